"""The prefiltered phone recognizer finds exactly what Presidio's own finds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

from services.redaction.phones import PrefilteredPhoneRecognizer, snippets
from tests.unit.redaction.pii_corpus import VALUES

REGIONS = ["US", "GB", "DE", "FR", "IN"]
FULL = PhoneRecognizer(supported_regions=REGIONS)
FAST = PrefilteredPhoneRecognizer(supported_regions=REGIONS)
NOISE = ["call", "x", "ext. 12", "fax:", "4111 1111 1111 1111", "10.0.4.17", "2026-11-28",
         "(", ")", "+", "-", "\n", "12", "order #77812", "v2.4.1", "port 8080"]


def spans(rec: PhoneRecognizer, text: str) -> list[tuple[int, int]]:
    return sorted((x.start, x.end) for x in rec.analyze(text, ["PHONE_NUMBER"]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list(VALUES["PHONE_NUMBER"]) + NOISE), max_size=12),
       st.sampled_from([" ", "  ", ", ", "; "]))
def test_same_findings_as_presidio(parts: list[str], sep: str) -> None:
    text = sep.join(parts)
    assert spans(FAST, text) == spans(FULL, text)


def test_every_known_number_is_found_at_its_place() -> None:
    for number in VALUES["PHONE_NUMBER"]:
        text = f"Ring {number} after nine."
        assert spans(FAST, text) == [(5, 5 + len(number))]


def test_text_without_digit_chains_costs_no_matcher_call() -> None:
    assert snippets("No numbers here, only 3 words and 12 more.") == []
    assert snippets("x" * 100 + "415 555 0199") == [(68, 112)]
