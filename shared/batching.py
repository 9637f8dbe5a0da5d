"""Micro-batches from a Faust stream, grouped by partition, with table writes allowed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
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


def make_current(stream: Any, event: Any) -> None:
    """Let table writes attribute to `event`'s partition inside a take_events batch.

    Faust 0.15 allows table writes only for the stream's current event and exposes
    no public way to set it for a batch; this is the one place that reaches in.
    """
    stream._set_current_event(event)
