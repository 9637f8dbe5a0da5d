"""Citations of an answer: markers resolved, unknown ones flagged, uncited answers
attributed by word overlap, and the share of sentences grounded in what is cited."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.inference.answer import citations

IDS = ["c1", "c2", "c3"]
TEXTS = [
    "The payments outage was caused by a schema migration that locked the transactions table.",
    "The on-call engineer <PERSON> rolled back the migration after fourteen minutes.",
    "The cafeteria reopens on Monday with a new menu.",
]


def test_markers_in_first_mention_order_with_unknown_ones_flagged() -> None:
    answer = "A migration locked it [2]. Rolled back [1][2]. See [7] and [0]."
    check = citations.check_generated(answer, IDS, TEXTS, shown=(1, 2, 3))
    assert check.cited_ids == ("c2", "c1") and check.cited_by == "model"
    assert check.unknown_markers == (7, 0) and not check.uncited


def test_a_marker_naming_a_passage_left_out_of_the_prompt_is_unknown() -> None:
    # Passage 2 did not fit the prompt: "[2]" cannot be the model's reading of it.
    check = citations.check_generated("Rolled back [2].", IDS, TEXTS, shown=(1, 3))
    assert check.unknown_markers == (2,) and check.uncited


def test_an_uncited_answer_is_flagged_and_attributed_sentence_by_sentence() -> None:
    answer = ("A schema migration locked the transactions table. <PERSON> rolled back the "
              "migration after fourteen minutes.")
    check = citations.check_generated(answer, IDS, TEXTS, shown=(1, 2, 3))
    assert check.uncited and check.cited_by == "overlap"
    assert check.cited_ids == ("c1", "c2") and check.supported_share == 1.0


def test_an_answer_that_says_what_no_passage_holds_is_not_grounded() -> None:
    answer = "The cafeteria reopens on Monday. The CEO approved a bonus for every engineer."
    check = citations.check_generated(answer, IDS, TEXTS, shown=(1, 2, 3))
    assert check.cited_ids == ("c3",) and check.supported_share == 0.5


def test_nothing_attributable_cites_nothing() -> None:
    check = citations.check_generated("Quarterly revenue grew strongly.", IDS, TEXTS, (1, 2, 3))
    assert check.cited_ids == () and check.cited_by == "none" and check.supported_share == 0.0


def test_a_quoted_answer_is_grounded_in_what_it_marks() -> None:
    answer = f"{TEXTS[1]} [2] {TEXTS[0]} [1]"
    check = citations.check_quoted(answer, IDS, TEXTS)
    assert check.cited_ids == ("c2", "c1") and check.cited_by == "quoted"
    assert check.supported_share == 1.0 and not check.uncited


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([0, 1, 2]), min_size=1, max_size=5),
       st.lists(st.integers(0, 9), max_size=4), st.sets(st.integers(1, 3), min_size=1))
def test_citations_are_always_shown_chunks_and_copied_sentences_are_grounded(
        picks: list[int], markers: list[int], shown: set[int]) -> None:
    # Sentences copied from passages, with arbitrary markers sprinkled in.
    answer = " ".join(TEXTS[i] + (f" [{markers[k]}]" if k < len(markers) else "")
                      for k, i in enumerate(picks))
    check = citations.check_generated(answer, IDS, TEXTS, tuple(sorted(shown)))
    allowed = {IDS[n - 1] for n in shown}
    assert set(check.cited_ids) <= allowed
    assert len(set(check.cited_ids)) == len(check.cited_ids)
    assert set(check.unknown_markers) == {m for m in markers[:len(picks)] if m not in shown}
    copied_shown = [i for i in picks if i + 1 in shown]
    if check.cited_by == "overlap":  # every sentence copied from a shown passage is found
        assert {IDS[i] for i in copied_shown} == set(check.cited_ids)
        assert check.supported_share == len(copied_shown) / len(picks)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 100_000), st.integers(0, 100_000),
       st.sampled_from(["days", "seconds", "%", "requests per second"]),
       st.sampled_from(["Tamarin", "Osprey", "the ledger"]))
def test_a_sentence_is_grounded_only_where_its_number_stands_in_the_passage(
        held: int, said: int, unit: str, name: str) -> None:
    passage = f"After the upgrade {name} keeps cached pages for {held:,} {unit} at most."
    sentence = f"After the upgrade {name} keeps cached pages for {said} {unit} at most."
    share = citations.supported(sentence, ["c"], ["c"], [passage])
    assert share == (1.0 if said == held else 0.0), (passage, sentence)


def test_names_and_quoted_terms_must_stand_in_the_one_passage_that_grounds_a_sentence() -> None:
    texts = ["Tamarin keeps cached pages for 35 days before eviction.",
             "The Osprey gateway times out a request after 20 seconds."]
    ids = ["t", "o"]
    for sentence, share in (
            ("Tamarin keeps cached pages for 35 days before eviction.", 1.0),
            ("Tamarin keeps cached pages for 35 days before \"lazy eviction\".", 0.0),
            ("Tamarin keeps cached pages for 35 days under the Lazy Eviction Policy.", 0.0),
            # each fact is in a cited passage, but no one passage holds them both
            ("The Osprey gateway keeps cached pages for 35 days.", 0.0),
            ("The Osprey gateway times out a request after 20 seconds.", 1.0)):
        assert citations.supported(sentence, ids, ids, texts) == share, sentence
    assert citations.unsupported_facts(
        "Tamarin keeps pages for 30 days, says Ana.", texts[0]) == {"#30", "name:ana"}
    # A date's parts, thousands separators and trailing zeros read alike.
    assert not citations.unsupported_facts("It began on 5 March 2026 with 1200 users at 2.50.",
                                           "Since 2026-03-05, 1,200 users; price 2.5.")


def test_a_subject_from_one_passage_with_a_fact_from_another_is_not_grounded() -> None:
    texts = ["Dingo follows the Frozen Sweep Policy when its disk fills up.",
             "Tamarin follows the Tiered Compaction Policy when its disk fills up."]
    ids = ["d", "t"]
    mixed = "Dingo follows the Tiered Compaction Policy when its disk fills up."
    assert citations.supported(mixed, ids, ids, texts) == 0.0
    assert citations.supported(texts[0], ids, ids, texts) == 1.0
    # An opener is no fact; the name after it is.
    assert citations.facts("According to the passage, Dingo keeps it.") == {"name:dingo"}
