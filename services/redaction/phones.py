"""A phone recognizer that runs python-phonenumbers only where digits could form a number.

Presidio's PhoneRecognizer runs phonenumbers' matcher over the whole text once per region,
which was the largest cost of redaction. Every number that matcher can find is a chain of
digit blocks joined by at most four punctuation characters; we find those chains with one
cheap regex and run the same matcher only on each chain with some context around it, so
the results are the same as over the whole text.
"""

from __future__ import annotations

import re

from presidio_analyzer import RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

from services.redaction.windows import shifted

# A superset of phonenumbers' separators: non-word characters, 'x' and the katakana dash.
_CHAIN = re.compile(r"\d(?:[\W_x\u30fc]{0,4}\d)*")
# Context kept around a chain: phonenumbers looks at neighbouring characters (letters,
# a leading '+' or '('), and an extension ("ext. 123") is a chain of its own nearby.
MARGIN = 32
MIN_DIGITS = 4  # no region has a valid number this short


def snippets(text: str) -> list[tuple[int, int]]:
    """Merged (start, end) spans of text around every digit chain that could be a number."""
    out: list[tuple[int, int]] = []
    for m in _CHAIN.finditer(text):
        if sum(c.isdigit() for c in m.group()) < MIN_DIGITS:
            continue
        start, end = max(0, m.start() - MARGIN), min(len(text), m.end() + MARGIN)
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


class PrefilteredPhoneRecognizer(PhoneRecognizer):
    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: NlpArtifacts | None = None) -> list[RecognizerResult]:
        results: list[RecognizerResult] = []
        for start, end in snippets(text):
            results += shifted(super().analyze(text[start:end], entities, nlp_artifacts), start)
        return results
