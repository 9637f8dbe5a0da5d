"""Presidio recognizer for national identity and tax numbers: the served locales' and every
country python-stdnum checks (shared.text.national_ids holds the shapes, check digits and
cues, shared.text.id_catalogue the table)."""

from __future__ import annotations

from presidio_analyzer import LocalRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

from services.redaction.recognizers import finding
from shared.text.national_ids import KINDS, national_ids

NATIONAL_ENTITIES = tuple(k.entity for k in KINDS)


class NationalIdRecognizer(LocalRecognizer):
    """BR_CPF, BR_CNPJ, IN_AADHAAR, CN_RESIDENT_ID, KR_RRN, DE_TAX_ID, RU_PASSPORT, a
    US_SSN written bare where the text names it (Presidio's finds the printed ones), and
    every person identifier of shared.text.id_catalogue (PL_PESEL, TR_TC_KIMLIK, ...)."""

    # Above the phone recognizer's score: where a phone matcher also reads the digits
    # (a CNPJ, an Aadhaar number), the placeholder names the id.
    SCORE = 0.95

    def __init__(self) -> None:
        super().__init__(supported_entities=list(NATIONAL_ENTITIES), supported_language="en",
                         name="NationalIdRecognizer")

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: NlpArtifacts | None = None) -> list[RecognizerResult]:
        return [finding(self, entity, a, b, self.SCORE, "shape, check digits and cues")
                for a, b, entity in national_ids(text) if entity in entities]
