"""No offset is committed before every record the worker produced is on the broker.

Faust commits a consumer's offsets after `producer.flush()`, and that flush does not make
the commit safe: it waits for the records already in aiokafka's accumulator but not for
the ones still in Faust's own producer buffer (`send_soon`, table changelogs: its flush
gives up after 0.1 s without a send), and a record the broker refused resolves its future
with an exception that nobody reads, so the offsets of the input it came from are
committed anyway and the record is gone. An agent that sends with `await topic.send(...)`
gets a future back, not the broker's acknowledgement.

`DeliveryGate` follows every record the worker hands to Faust (each `FutureMessage`, from
`send`, `send_soon` and attachments alike) until the broker answers, and `settle()` is
awaited before each commit: it waits for every record still on its way, and reports the
first one the broker refused. `install()` puts the gate in front of Faust's commit; a
refused record stops the worker at once, without the commit, so the input it came from is
replayed (the boundary's rule for failures that are not about the record).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class DeliveryGate:
    """The records handed to the producer and not yet answered by the broker."""

    def __init__(self) -> None:
        self.pending: set[asyncio.Future[Any]] = set()
        self.refused: BaseException | None = None  # the first record the broker refused

    def track(self, future: asyncio.Future[Any]) -> None:
        self.pending.add(future)
        future.add_done_callback(self._answered)

    def _answered(self, future: asyncio.Future[Any]) -> None:
        self.pending.discard(future)
        if self.refused is None:
            # A cancelled send never reached the broker: as bad as a refused one.
            if future.cancelled():
                self.refused = asyncio.CancelledError()
            elif future.exception() is not None:
                self.refused = future.exception()

    async def settle(self) -> BaseException | None:
        """Wait until every record handed over so far is answered; the first refusal, if any."""
        while self.pending and self.refused is None:
            await asyncio.wait(set(self.pending), return_when=asyncio.FIRST_EXCEPTION)
        return self.refused


gate = DeliveryGate()  # one worker per process: one gate
_installed = False
_on_refused: Callable[[BaseException], None] | None = None


def install(on_refused: Callable[[BaseException], None]) -> None:
    """Track every record Faust produces, and settle the gate before each offset commit.

    Reaches into two private hooks of faust-streaming 0.15.3 (pinned in pyproject.toml):
    `Channel.as_future_message`, where every produced record's future is made, and
    `Consumer._commit_offsets`, which every commit (timer, rebalance, stop) goes through.
    """
    global _installed, _on_refused
    _on_refused = on_refused
    if _installed:
        return
    _installed = True
    from faust.channels import Channel
    from faust.transport.consumer import Consumer

    make_future = Channel.as_future_message

    def as_future_message(self: Any, *args: Any, **kwargs: Any) -> Any:
        future = make_future(self, *args, **kwargs)
        gate.track(future)
        return future

    commit = Consumer._commit_offsets

    async def commit_offsets(self: Any, offsets: Any, start_new_transaction: bool = True,
                             ) -> bool:
        refused = await gate.settle()
        if refused is not None:
            log.critical("the broker refused a record (%s); stopping before the commit so "
                         "its input replays", type(refused).__name__)
            if _on_refused is not None:
                _on_refused(refused)
            return False
        return await commit(self, offsets, start_new_transaction)

    Channel.as_future_message = as_future_message  # type: ignore[method-assign]
    Consumer._commit_offsets = commit_offsets  # type: ignore[method-assign]
