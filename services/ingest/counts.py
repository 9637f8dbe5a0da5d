"""What one change counts for in the stream statistics (stats.counts.v1), pure.

Every raw record is `received` once: a parse failure where it fails (its source and
domain are unknown then), any other record where it is ordered. An applied change is also
`new` (first version), `updated` or `deleted`; a refused one `dead_lettered.<reason>`.
Repeats of the applied content count as received only.
"""

from __future__ import annotations

import time
from collections import Counter

from services.ingest.dedup import Applied
from shared.contract.records import Document, StreamCounts

UNKNOWN = "unknown"  # source and domain of a record that could not be parsed


def change_counts(doc: Document, applied: Applied | None, refused: str | None = None,
                  now: float | None = None) -> StreamCounts:
    counts = {"received": 1}
    if refused is not None:
        counts[f"dead_lettered.{refused}"] = 1
    elif applied is not None and applied.doc is not None:
        new = applied.doc
        kind = "deleted" if new.op == "delete" else "new" if new.version == 1 else "updated"
        counts[kind] = 1
    return StreamCounts(source=doc.source[:512], domain=doc.domain[:512], counts=counts,
                        at=time.time() if now is None else now)


def parse_failure_counts(reason: str, now: float | None = None) -> StreamCounts:
    return StreamCounts(source=UNKNOWN, domain=UNKNOWN,
                        counts={"received": 1, f"dead_lettered.{reason}": 1},
                        at=time.time() if now is None else now)


class CountsBuffer:
    """Counts added per change, sent as one record per (source, domain) by a timer, so the
    statistics cost a record per second and source, not one per change. What a killed
    worker had not sent yet is lost (the statistics are approximate under crashes)."""

    def __init__(self) -> None:
        self._pending: dict[tuple[str, str], Counter[str]] = {}

    def add(self, counts: StreamCounts) -> None:
        self._pending.setdefault((counts.source, counts.domain), Counter()).update(counts.counts)

    def drain(self, now: float | None = None) -> list[StreamCounts]:
        at = time.time() if now is None else now
        out = [StreamCounts(source=s, domain=d, counts=dict(c), at=at)
               for (s, d), c in sorted(self._pending.items())]
        self._pending.clear()
        return out
