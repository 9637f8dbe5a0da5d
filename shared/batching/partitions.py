"""Micro-batches from a Faust stream, grouped by partition, with table writes allowed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any


async def partition_batches(
    stream: Any, max_events: int, within_s: float,
) -> AsyncIterator[dict[int, list[Any]]]:
    """Yield {partition: [events in offset order]} for each micro-batch of the stream."""
    async for events in stream.take_events(max_events, within=within_s):
        groups: dict[int, list[Any]] = defaultdict(list)
        for event in events:
            groups[event.message.partition].append(event)
        yield dict(groups)


@contextmanager
def current_event(stream: Any, event: Any) -> Iterator[None]:
    """Make `event` current for the synchronous table writes inside the block only.

    Faust 0.15 allows table writes only for the stream's current event and exposes no
    public way to set it inside a take_events batch; this is the one place that reaches in.

    take_events records `stream.current_event` when the next message arrives; if that
    still pointed at an old event, the new message would be replaced by the old one (one
    record processed twice, one never). Do not await inside the block.
    """
    before = stream.current_event
    stream._set_current_event(event)
    try:
        yield
    finally:
        stream._set_current_event(before)
