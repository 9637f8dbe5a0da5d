"""The units a passage states its facts in: table rows with their header, sentences, and
clauses with their sentence's subject (answer/units.py)."""

from __future__ import annotations

import pytest

from services.inference.answer.citations import supported
from services.inference.answer.units import Unit, clauses, passage_units


def test_a_pipe_tables_rows_are_read_with_its_header_and_the_separator_is_no_row() -> None:
    text = "Credits:\n| tier | credit |\n|---|:--:|\n| Gold | 25% |\n| Silver | 10% |"
    assert passage_units(text) == [
        Unit("Credits:"), Unit("| tier | credit |"),
        Unit("| Gold | 25% |", "| tier | credit |"),
        Unit("| Silver | 10% |", "| tier | credit |")]


def test_a_csv_like_table_is_read_cell_by_cell_its_first_row_a_header_without_digits() -> None:
    assert passage_units("tier,credit,cap\nGold,25,30\nSilver,10,20") == [
        Unit("tier | credit | cap"), Unit("Gold | 25 | 30", "tier | credit | cap"),
        Unit("Silver | 10 | 20", "tier | credit | cap")]
    assert passage_units("Gold\t25\nSilver\t10") == [Unit("Gold | 25"), Unit("Silver | 10")]


def test_prose_is_split_into_sentences_its_wrapped_lines_joined_list_items_kept_apart() -> None:
    text = ("Tamarin keeps cached pages\nfor 35 days. Osprey times out after 20 s.\n"
            "- Gold: 25%\n- Silver: 10%")
    assert [u.text for u in passage_units(text)] == [
        "Tamarin keeps cached pages for 35 days.", "Osprey times out after 20 s.",
        "- Gold: 25%", "- Silver: 10%"]


def test_a_later_clause_is_read_with_the_first_clauses_subject_and_none_of_its_numbers() -> None:
    assert clauses("Grebe keeps audit logs for 400 days, and access logs for 90 days.") == [
        Unit("Grebe keeps audit logs for 400 days"),
        Unit("access logs for 90 days.", "Grebe keeps")]
    assert clauses("In 2024 Grebe kept audit logs; access logs 90 days") == [
        Unit("In 2024 Grebe kept audit logs"), Unit("access logs 90 days", "In Grebe")]
    # A bare "and" splits only between two numbers; a clause naming its own subject is
    # read alone.
    assert clauses("Gold and Silver give 5% and Bronze 2%") == [
        Unit("Gold and Silver give 5%"), Unit("Bronze 2%")]
    assert clauses("Tamarin keeps cached pages for 35 days.") == [
        Unit("Tamarin keeps cached pages for 35 days.")]


def test_a_sentence_opening_with_a_pronoun_is_read_with_the_names_of_the_one_before() -> None:
    text = "Osprey is the gateway. It times out after 20 seconds. Tamarin caches pages."
    assert passage_units(text) == [
        Unit("Osprey is the gateway."), Unit("It times out after 20 seconds.", "Osprey"),
        Unit("Tamarin caches pages.")]


POSTMORTEM = ("Resolution: the migration was cancelled at 13:49 and the pools drained within "
              "three minutes. On-call engineer <PERSON> paged the database team.")


@pytest.mark.parametrize(("sentence", "share"), [
    # two true facts of two passage sentences, joined by "and the ...": each stands
    ("The migration was cancelled after 13:49 and the on-call engineer paged the database "
     "team.", 1.0),
    # either one wrong: not supported
    ("The migration was cancelled after 13:52 and the on-call engineer paged the database "
     "team.", 0.0),
    ("The migration was cancelled after 13:49 and the pools drained within 30 minutes.", 0.0),
])
def test_a_sentence_joining_two_passage_sentences_is_judged_clause_by_clause(
        sentence: str, share: float) -> None:
    assert supported(sentence, ["c1"], ["c1"], [POSTMORTEM]) == share


def test_a_noun_and_a_subject_are_not_split_into_clauses() -> None:
    assert [u.text for u in clauses("Gold and the Silver tier give 5%.")] == [
        "Gold and the Silver tier give 5%."]
