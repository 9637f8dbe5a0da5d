"""Human-readable answers: the text, then a table of its citations."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any


def citation_table(citations: Sequence[Any]) -> str:
    rows = [f"{'#':>2}  {'score':>6}  {'doc id':<30} {'event time (UTC)':<16}  text"]
    for n, c in enumerate(citations, 1):
        when = datetime.fromtimestamp(c.event_time, UTC).strftime("%Y-%m-%d %H:%M")
        text = " ".join(c.text.split())[:70]
        rows.append(f"{n:>2}  {c.score:6.3f}  {c.doc_id[:30]:<30} {when:<16}  {text}")
    return "\n".join(rows)


def render_answer(resp: Any) -> str:
    lines = [f"A ({resp.answer_mode}): {resp.answer}", "", citation_table(resp.citations)]
    if resp.partial:
        lines.append(f"partial result: shards {list(resp.missing_shards)} did not answer")
    return "\n".join(lines)
