"""The leak and false-positive rules of `scripts/bench_redaction --forms`, and the business
tokens it counts them on."""

from __future__ import annotations

from scripts.benchlib import pii_planted as pp
from scripts.benchlib import pii_scoring as sc
from scripts.benchlib.pii_business import BusinessDoc, Token, business
from scripts.benchlib.pii_tables import Side, recall_table


def phone_doc() -> pp.PlantedDoc:
    text = "Call +49 30 258517 now"
    units = tuple((i, i + 1) for i in range(9, 18) if text[i].isdigit())
    p = pp.Planted("de", "phone", "plain", "", "DE", False, "+49 30 258517", "+49 30 258517",
                   ((5, 18),), units)
    return pp.PlantedDoc(text, "prose", "de", (p,))


def mask_of(doc_text: str, start: int, end: int) -> list[bool]:
    return [start <= i < end for i in range(len(doc_text))]


def test_findings_that_explain_the_output_are_used() -> None:
    text = "Call +49 30 258517 now"
    mask, explained = sc.replaced(text, "Call +49 <PHONE_NUMBER> now", [(9, 18, "PHONE_NUMBER")])
    assert explained
    assert mask == mask_of(text, 9, 18)


def test_findings_of_one_type_with_only_spaces_between_are_replaced_as_one() -> None:
    text = "Ana Lima  Souza called"
    mask, explained = sc.replaced(text, "<PERSON> called",
                                  [(0, 8, "PERSON"), (10, 15, "PERSON")])
    assert explained
    assert mask == mask_of(text, 0, 15)


def test_without_findings_the_texts_are_aligned() -> None:
    text = "Call +49 30 258517 now"
    mask, explained = sc.replaced(text, "Call +49 [gone] now", [(9, 18, "PHONE_NUMBER")])
    assert not explained
    assert mask == mask_of(text, 9, 18)
    mask, _ = sc.replaced(text, "Call <PHONE> now", None)
    assert mask == mask_of(text, 5, 18)


def test_a_surviving_country_code_is_no_leak_a_surviving_digit_is() -> None:
    doc = phone_doc()
    [caught] = sc.outcomes(doc, mask_of(doc.text, 9, 18))
    assert caught.caught and not caught.untouched
    [leaked] = sc.outcomes(doc, mask_of(doc.text, 5, 17))  # the last digit left
    assert not leaked.caught and not leaked.untouched
    [missed] = sc.outcomes(doc, [False] * len(doc.text))
    assert not missed.caught and missed.untouched


def test_a_token_changed_at_all_is_a_false_positive() -> None:
    doc = BusinessDoc("build 20261210.3 on 2026-12-10\n", "timeline",
                      (Token("build", "20261210.3", (6, 16)), Token("iso_date", "2026-12-10",
                                                                    (20, 30))))
    assert sc.changed_tokens(doc, mask_of(doc.text, 15, 16)) == [("build", True),
                                                                   ("iso_date", False)]
    assert sc.changed_words("a bb c", [False, False, False, True, False, False]) == (3, 1)


def test_every_business_token_is_where_it_says() -> None:
    docs = business(7, 40)
    assert {d.container for d in docs} == {"timeline", "ticket", "changelog", "config"}
    for d in docs:
        assert d.tokens
        assert all(d.text[a:b] == t.text for t in d.tokens for a, b in [t.span])
    assert [d.text for d in business(7, 40)] == [d.text for d in docs]


def test_the_recall_table_counts_values_per_side() -> None:
    doc = phone_doc()
    good = Side("after", sc.outcomes(doc, mask_of(doc.text, 9, 18)) * 3)
    bad = Side("before", sc.outcomes(doc, [False] * len(doc.text)) * 3)
    text = recall_table({"before": bad, "after": good}, "t", lambda o: (o.planted.form,),
                        ["form"], lambda k: [pp.FORMS[k[0]]])
    plain = next(line for line in text.splitlines() if line.startswith("plain"))
    assert plain.split() == ["plain", "3", "0.0", "100.0", "0.0"]
