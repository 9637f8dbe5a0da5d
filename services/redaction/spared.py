"""Findings dropped because the number they lie in is an ordinary token (shared.text.ordinary):
an amount, an ISBN or ISSN, a version."""

from __future__ import annotations

from presidio_analyzer import RecognizerResult

from shared.text.ordinary import ordinary_spans


def spared(text: str, results: list[RecognizerResult]) -> list[RecognizerResult]:
    """`results` less every finding wholly inside an ordinary token's number."""
    spans = ordinary_spans(text)
    if not spans:
        return results
    return [r for r in results if not any(a <= r.start and r.end <= b for a, b in spans)]
