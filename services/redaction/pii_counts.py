"""PII entities found per source, domain and type in one batch, for stats.counts.v1 (pure)."""

from __future__ import annotations

import time
from collections import Counter

from shared.contract.records import RedactedDocument, StreamCounts


def pii_counts(redacted: list[RedactedDocument], now: float | None = None) -> list[StreamCounts]:
    """One record per (source, domain) that had any entity: `pii.<TYPE>` -> count."""
    found: dict[tuple[str, str], Counter[str]] = {}
    for doc in redacted:
        where = found.setdefault((doc.source[:512], doc.domain[:512]), Counter())
        where.update({f"pii.{kind}": n for kind, n in doc.entity_counts.items() if n})
    at = time.time() if now is None else now
    return [StreamCounts(source=s, domain=d, counts=dict(c), at=at)
            for (s, d), c in sorted(found.items()) if c]
