"""Custom Presidio recognizers for secrets, and the finding every custom recognizer returns."""

from __future__ import annotations

import tldextract
from presidio_analyzer import (
    AnalysisExplanation,
    EntityRecognizer,
    Pattern,
    PatternRecognizer,
    RecognizerResult,
)
from presidio_analyzer.predefined_recognizers import EmailRecognizer


def finding(recognizer: EntityRecognizer, entity: str, start: int, end: int, score: float,
            why: str) -> RecognizerResult:
    """A result named for `recognizer`, as Presidio's own recognizers build theirs."""
    return RecognizerResult(
        entity, start, end, score,
        AnalysisExplanation(recognizer.name, score, textual_explanation=why),
        {RecognizerResult.RECOGNIZER_NAME_KEY: recognizer.name,
         RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: recognizer.id})


def secret_recognizer() -> PatternRecognizer:
    patterns = [
        Pattern("bearer", r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{16,}=*", 0.9),
        Pattern("api_key", r"\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b", 0.9),
        Pattern("aws_key", r"\bAKIA[0-9A-Z]{16}\b", 0.9),
        Pattern("github_token", r"\bgh[pousr]_[A-Za-z0-9]{36,}\b", 0.9),
        Pattern("private_key",
                r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]+?-----END [A-Z ]*PRIVATE KEY-----",
                0.95),
        Pattern("password_pair", r"(?i)\b(?:password|passwd|pwd|secret|token)\s*[=:]\s*\S+",
                0.85),
        Pattern("url_password", r"(?<=://)[^\s:/@]+:[^\s@/]+(?=@)", 0.9),
    ]
    return PatternRecognizer(supported_entity="SECRET", patterns=patterns, name="SecretRecognizer")


class MailboxRecognizer(EmailRecognizer):
    """Presidio's email pattern, accepting every domain that ends in a public suffix.

    Presidio's EmailRecognizer keeps a match only when tldextract finds a registrable
    domain in it, so a mailbox whose domain is itself a public suffix is left in clear:
    the Public Suffix List names thousands (Brazil's city domains such as aparecida.br,
    Japan's prefectures, Norway's municipalities), and each is a real mail domain. Here a
    known suffix at the end is enough; a name that ends in none (`v1.2`) still is not.
    """

    def __init__(self) -> None:
        super().__init__(name="MailboxRecognizer")
        # The suffix list snapshot inside tldextract: its default fetches the list over the
        # network at first use, which a worker must never wait on.
        self._extract = tldextract.TLDExtract(suffix_list_urls=())

    def validate_result(self, pattern_text: str) -> bool:
        return bool(self._extract(pattern_text).suffix)
