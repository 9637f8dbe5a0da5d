"""IBANs by the ISO 13616 check (mod 97), compact or printed in groups, anywhere in a token.

Presidio's IbanRecognizer missed valid IBANs after a possessive ("vendor's account
ES02...") and rejects any whose length differs from its per-country table. The mod-97
check alone leaves one chance in 97 for a random string of this shape, and a string of
this shape (two letters, two digits, 11-30 more letters or digits) is rare in prose.
"""

from __future__ import annotations

from presidio_analyzer import LocalRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

from services.redaction.recognizers import finding
from shared.text.checksums import IBAN_CANDIDATE, iban_ok


def find_ibans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each IBAN, the longest valid prefix of each candidate run."""
    out = []
    for m in IBAN_CANDIDATE.finditer(text):
        value = m.group()
        # A printed IBAN may be followed by another word of letters/digits: shrink to
        # the longest prefix that passes the check.
        for end in range(len(value), 14, -1):
            if value[end - 1] != " " and iban_ok(value[:end]):
                out.append((m.start(), m.start() + end))
                break
    return out


class Mod97IbanRecognizer(LocalRecognizer):
    SCORE = 0.9
    CONTEXT = ["iban", "bank", "account", "transfer", "wire"]

    def __init__(self) -> None:
        super().__init__(supported_entities=["IBAN_CODE"], supported_language="en",
                         context=self.CONTEXT, name="Mod97IbanRecognizer")

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: NlpArtifacts | None = None) -> list[RecognizerResult]:
        return [finding(self, "IBAN_CODE", a, b, self.SCORE, "ISO 13616 mod-97 check")
                for a, b in find_ibans(text)]
