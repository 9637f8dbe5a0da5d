"""Custom Presidio recognizers for secrets, mailboxes and IP addresses, and the finding every
custom recognizer returns."""

from __future__ import annotations

import re

import tldextract
from presidio_analyzer import (
    AnalysisExplanation,
    EntityRecognizer,
    Pattern,
    PatternRecognizer,
    RecognizerResult,
)
from presidio_analyzer.nlp_engine import NlpArtifacts
from presidio_analyzer.predefined_recognizers import EmailRecognizer, IpRecognizer

from shared.text.ordinary import version


def finding(recognizer: EntityRecognizer, entity: str, start: int, end: int, score: float,
            why: str) -> RecognizerResult:
    """A result named for `recognizer`, as Presidio's own recognizers build theirs."""
    return RecognizerResult(
        entity, start, end, score,
        AnalysisExplanation(recognizer.name, score, textual_explanation=why),
        {RecognizerResult.RECOGNIZER_NAME_KEY: recognizer.name,
         RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: recognizer.id})


# Provider keys and tokens by their published prefix and shape (what each issuer says its
# tokens look like), then generic pairs where a key's name says what the value is.
SECRET_PATTERNS = (
    ("bearer", r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{16,}=*", 0.9),
    ("stripe_key", r"\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b", 0.9),
    ("stripe_webhook_secret", r"\bwhsec_[A-Za-z0-9]{24,}\b", 0.9),
    ("aws_access_key", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{16}\b",
     0.9),
    ("github_token", r"\bgh[pousr]_[A-Za-z0-9]{36,}\b", 0.9),
    ("github_fine_grained", r"\bgithub_pat_[A-Za-z0-9_]{22,}", 0.9),
    ("gitlab_token", r"\bgl(?:pat|dt|rt|ptt|cbt|imt|oas|soat|ffct|agent)-[A-Za-z0-9_-]{20,}", 0.9),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])", 0.9),
    ("google_oauth", r"\b(?:ya29\.[0-9A-Za-z_-]{20,}|GOCSPX-[0-9A-Za-z_-]{24,})", 0.9),
    ("slack_token", r"\bxox[abposre]-[0-9A-Za-z-]{10,}", 0.9),
    ("slack_app_token", r"\bxapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+", 0.9),
    ("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]{20,}",
     0.9),
    ("openai_key", r"\bsk-(?:proj-|ant-|svcacct-)?[A-Za-z0-9_-]{20,}", 0.9),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", 0.9),
    ("pypi_token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}", 0.9),
    ("sendgrid_key", r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", 0.9),
    ("twilio_key", r"\bSK[0-9a-f]{32}\b", 0.9),
    ("shopify_token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", 0.9),
    ("digitalocean_token", r"\bdo[por]_v1_[a-f0-9]{64}\b", 0.9),
    # Azure connection strings: a storage or Service Bus key, and a SAS token's signature
    # (its other fields, sv= se= sp=, say what it grants, not how to prove it).
    ("azure_storage_key", r"(?i)\b(?:AccountKey|SharedAccessKey|SharedSecretValue)="
     r"[A-Za-z0-9+/=]{20,}", 0.9),
    ("sas_signature", r"(?i)(?<![\w-])sig=[A-Za-z0-9%+/=_-]{16,}", 0.9),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", 0.9),
    ("private_key",
     r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]+?"
     r"(?:-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----|(?=\n[ \t]*\n)|\Z)", 0.95),
    ("password_pair", r"(?i)\b(?:password|passwd|pwd|secret|token)\s*[=:]\s*\S+", 0.85),
    ("key_pair",
     r"(?i)\b(?:aws_secret_access_key|aws_session_token|api[_-]?key|apikey|x-api-key|"
     r"access[_-]?key(?:[_-]?id)?|secret[_-]?key|client[_-]?secret|auth[_-]?token|"
     r"private[_-]?token|access[_-]?token|refresh[_-]?token)[\"']?\s*[=:]\s*[\"']?"
     r"[A-Za-z0-9/+_.=-]{12,}", 0.85),
    # A URL's credentials (postgres://user:pass@, redis://:pass@, mongodb+srv://...): the
    # user name, which may be a person's, goes with the password.
    ("url_password", r"(?<=://)[^\s:/@]*:[^\s@/]+(?=@)", 0.9),
)


def secret_recognizer() -> PatternRecognizer:
    patterns = [Pattern(name, regex, score) for name, regex, score in SECRET_PATTERNS]
    return PatternRecognizer(supported_entity="SECRET", patterns=patterns, name="SecretRecognizer")


# "postgres://user:pass@host": the `@` ends a URL's credentials, there is no mailbox; the
# password is a SECRET (url_password).
_URL_CREDENTIALS = re.compile(r"://[^\s/@]*:[^\s/@]*$")


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
        # The domain alone: the pattern's local part may have taken a URL's path and query
        # ("lookup?email=anna"), which tldextract would read as the host.
        return bool(self._extract(pattern_text.rpartition("@")[2]).suffix)

    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: NlpArtifacts | None = None,
                regex_flags: int | None = None) -> list[RecognizerResult]:
        """Presidio's matches, each starting after the last URL mark (`/?=&:`) before its
        `@`: in `search?email=anna@example.com` the address is `anna@example.com`."""
        out = [r for r in super().analyze(text, entities, nlp_artifacts, regex_flags)
               if not _URL_CREDENTIALS.search(text, max(0, r.start - 256),
                                              text.rfind("@", r.start, r.end))]
        for r in out:
            local = text[r.start:r.end].rpartition("@")[0]
            cut = max(local.rfind(c) for c in "/?=&:")
            if 0 <= cut < len(local) - 1:
                r.start += cut + 1
        return out


class AddressRecognizer(IpRecognizer):
    """Presidio's IP address patterns, less a dotted number right after a word that names a
    version ("firmware 9.14.67.234", "build 2.7.1.44"): four numbers under 256 are a
    version as often as an address, and the word before says which (shared.text.ordinary).
    "host 10.1.2.3" names no version and stays an address."""

    def __init__(self) -> None:
        super().__init__(name="AddressRecognizer")

    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: NlpArtifacts | None = None,
                regex_flags: int | None = None) -> list[RecognizerResult]:
        out = super().analyze(text, entities, nlp_artifacts, regex_flags)
        return [r for r in out if not version(text[max(0, r.start - 24):r.start])]
