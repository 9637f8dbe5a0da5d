"""Table writes from inside a micro-batch (shared.kafka.checkpoint.batches)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def current_event(stream: Any, event: Any) -> Iterator[None]:
    """Make `event` current for the synchronous table writes inside the block only.

    Faust 0.15 allows table writes only for the stream's current event (the changelog
    record goes to the event's partition) and exposes no public way to set it for an
    event of a micro-batch; this is the one place that reaches in. Do not await inside
    the block.
    """
    before = stream.current_event
    stream._set_current_event(event)
    try:
        yield
    finally:
        stream._set_current_event(before)
