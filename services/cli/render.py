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


def citation_check_lines(citations: Sequence[Any], cited: Sequence[str], check: Any,
                         ) -> list[str]:
    """Which sources the answer cites, how they were found, and how much of it they ground."""
    numbers = {c.chunk_id: n for n, c in enumerate(citations, start=1)}
    named = ", ".join(f"[{numbers[c]}]" for c in cited if c in numbers) or "none"
    how = {"overlap": "attributed by word overlap: the model wrote no [n]",
           "model": "as the model marked them", "quoted": "as quoted"}.get(check.cited_by, "")
    lines = [f"cites {named}" + (f" ({how})" if how else "")
             + f"; {check.supported_share:.0%} of its sentences grounded in them"]
    if check.unknown_markers:
        bad = ", ".join(f"[{n}]" for n in check.unknown_markers)
        lines.append(f"warning: the answer cites {bad}, which it was not shown")
    return lines


def render_answer(resp: Any) -> str:
    lines = [f"A ({resp.answer_mode}): {resp.answer}",
             *citation_check_lines(resp.citations, resp.cited_chunk_ids, resp.citation_check),
             "", citation_table(resp.citations)]
    if resp.partial:
        lines.append(f"partial result: shards {list(resp.missing_shards)} did not answer")
    return "\n".join(lines)
