"""The subject index of a redacted document version: the keys of what was masked (pure).

The redactor hands over each masked value with its entity type (`Masked`, whose repr
withholds the value, so a log line or a traceback that shows one shows no PII); here they
become keys (shared/contract/subjects.py), and nothing else of them is kept.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from shared.contract.records import RedactedDocument, SubjectIndex
from shared.contract.subjects import ENTITY_KINDS, key_id, key_of


@dataclass(frozen=True)
class Masked:
    """One masked span: its entity type and the value it held (as a person reads it)."""

    entity: str
    value: str = field(repr=False)


@dataclass(frozen=True)
class Redacted:
    """A redacted document version and what was masked in it (never sent anywhere)."""

    doc: RedactedDocument
    masked: tuple[Masked, ...] = field(default=(), repr=False)


class SubjectKeys:
    """Keys masked values under one secret key, reading phone numbers with `regions`."""

    def __init__(self, key: bytes, regions: tuple[str, ...]) -> None:
        self._key, self.regions = key, regions
        self.key_id = key_id(key)

    def __repr__(self) -> str:
        return f"SubjectKeys(key_id={self.key_id!r})"

    def index(self, redacted: Redacted) -> SubjectIndex:
        """The version's record: each indexed kind's values keyed once, sorted."""
        keyed = {(kind, key_of(self._key, kind, m.value, self.regions))
                 for m in redacted.masked
                 if (kind := ENTITY_KINDS.get(m.entity)) and m.value.strip()}
        doc = redacted.doc
        return SubjectIndex(doc_id=doc.doc_id, version=doc.version, batch_id=doc.batch_id,
                            key_id=self.key_id, subjects=tuple(sorted(k for _, k in keyed)),
                            kinds=dict(Counter(kind for kind, _ in keyed)))
