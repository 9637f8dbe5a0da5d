"""The one checkpoint: the only place a worker's input offsets are committed.

Every agent reads its input with acks off and hands each record to the checkpoint once it
is processed and what it produced is handed to the producer: `records(stream)` does so as
the loop moves on from a record whose body finished (never for one whose body raised),
`batches(stream, ...)` for a micro-batch, and `done(event)` for an agent that finishes
records out of order (embedding's batcher). Nothing else acks or commits (a test parses
every module for it). Faust's commits (its interval, a rebalance, a stop, an agent error)
all run `Checkpoint.commit`, five numbered steps:

1. close: take, per input partition, the end of the unbroken run of processed offsets
   from the committed one (a gap stops the run: never skip), and the deliveries still
   pending; records processed from here on belong to the next checkpoint;
2. flush the producer (Faust's buffer, table changelogs included, and aiokafka's);
3. await every delivery taken in step 1; a refusal ends here, nothing committed, and the
   worker exits so its input replays;
4. commit the offsets of step 1 still assigned, unless the app crashed; only a commit
   the broker took moves the committed offsets and drops what it covers;
5. flush state (Faust's tables learn the committed offsets).

A crash or an exception at any step leaves the committed offsets where they were, so the
input replays from there: that is the only recovery, and every stage is idempotent or
deduplicates for it. Retrieval's index keeps no committed offsets at all: its position is
its shard snapshots' (services/retrieval/positions.py), so its topic is declared with
`committed=False` (shared/kafka/app.py) and the checkpoint has nothing of it to commit.

Design and the proofs: docs/design/checkpoint.md. The seam with Faust is small: Faust's
`Consumer.force_commit` runs `Checkpoint.commit`; `Channel.as_future_message` hands every
produced record's future to `gate` (shared/kafka/delivery.py installs both); the
checkpoint reads Faust's ack list and committed offsets (`FaustPort`, declared in
shared/kafka/patches.py and checked by tests/unit/shared/kafka/test_compat.py).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)


class DeliveryGate:
    """The records handed to the producer and not yet answered by the broker."""

    def __init__(self) -> None:
        self.pending: set[asyncio.Future[Any]] = set()
        self.refused: BaseException | None = None  # the first record the broker refused

    def track(self, future: asyncio.Future[Any]) -> None:
        self.pending.add(future)
        future.add_done_callback(self._answered)

    def forget(self, future: asyncio.Future[Any]) -> None:
        """`future`'s record never reached the producer (its send raised to the caller, who
        handles that): there is no delivery to wait for."""
        self.pending.discard(future)

    def _answered(self, future: asyncio.Future[Any]) -> None:
        self.pending.discard(future)
        if self.refused is None:
            # A cancelled send never reached the broker: as bad as a refused one.
            if future.cancelled():
                self.refused = asyncio.CancelledError()
            elif future.exception() is not None:
                self.refused = future.exception()

    async def settle(self, futures: Iterable[asyncio.Future[Any]] | None = None,
                     ) -> BaseException | None:
        """Wait until `futures` (default: every record handed over so far) are answered;
        the first refusal, if any."""
        waiting = set(self.pending if futures is None else futures)
        while True:
            for answered in [f for f in waiting if f.done()]:
                self._answered(answered)  # its callback may not have run yet
                waiting.discard(answered)
            if self.refused is not None or not waiting:
                return self.refused
            await asyncio.wait(waiting, return_when=asyncio.FIRST_EXCEPTION)


gate = DeliveryGate()  # one worker per process: one gate


def committable(acked: list[int], committed: int | None,
                absent: Iterable[tuple[int, int]] = ()) -> tuple[int | None, list[int]]:
    """The offset to commit next and the acked offsets it covers; `acked` is left as it is.

    That is one past the run of consecutive acked offsets starting exactly at `committed`
    (the next offset to read), where a range [start, end) of `absent` (offsets the broker
    does not hold: a compacted topic's) counts as processed; None while the next offset to
    read is not processed yet, and while `committed` is unknown (hold rather than guess
    where the run starts). Offsets below `committed` (a record read again after a seek)
    count as covered already.
    """
    if committed is None:
        return None, []
    ordered = sorted(acked)
    gaps = sorted(absent)
    i = bisect.bisect_left(ordered, committed)
    end = committed
    while True:
        for start, stop in gaps:
            if start <= end < stop:
                end = stop
        if i < len(ordered) and ordered[i] < end:  # inside a run already counted
            i += 1
        elif i < len(ordered) and ordered[i] == end:
            end, i = end + 1, i + 1
        else:
            break
    return (end if end > committed else None), ordered[:i]


def halt_commits(app: Any, reason: BaseException) -> None:
    """`app` crashed: none of its consumer's commits may reach the broker from now on."""
    if getattr(app, "_streamrag_commits_halted", None) is None:
        app._streamrag_commits_halted = reason


def commits_halted(app: Any) -> BaseException | None:
    """Why `app` commits nothing any more (the crash), or None."""
    reason: BaseException | None = getattr(app, "_streamrag_commits_halted", None)
    return reason


class Port(Protocol):
    """What the checkpoint needs of a consumer and its producer (Faust's: `FaustPort`)."""

    def acked(self, tps: Any) -> Mapping[Any, list[int]]:
        """{partition: offsets processed and not yet committed} of the partitions asked
        (None: all)."""
    def committed(self, tp: Any) -> int | None: ...
    def assigned(self) -> set[Any]: ...
    def halted(self) -> BaseException | None: ...
    async def flush(self) -> None: ...
    async def commit(self, offsets: Mapping[Any, int]) -> bool: ...
    def committed_now(self, offsets: Mapping[Any, int], covered: Mapping[Any, list[int]],
                      ) -> None: ...
    def flush_state(self, offsets: Mapping[Any, int]) -> None: ...


@dataclass
class Closed:
    """Step 1's result: what this commit may cover, and the deliveries it waits for."""

    offsets: dict[Any, int] = field(default_factory=dict)
    covered: dict[Any, list[int]] = field(default_factory=dict)
    deliveries: set[asyncio.Future[Any]] = field(default_factory=set)


def _named(offsets: Mapping[Any, int]) -> dict[str, int]:
    return {f"{getattr(tp, 'topic', tp)}/{getattr(tp, 'partition', '')}": o
            for tp, o in offsets.items()}


class Checkpoint:
    """The commits of one consumer (one per worker; in one process, every stage's)."""

    def __init__(self, port: Port, deliveries: DeliveryGate,
                 on_refused: Callable[[BaseException], None]) -> None:
        self.port, self.gate, self.on_refused = port, deliveries, on_refused
        self._held_at: dict[Any, int | None] = {}  # to log a held commit once per position
        # Where a partition's run starts when the consumer knows no committed offset (a
        # group that never committed, or Faust's 0): the first offset read after the seek.
        self.floor: dict[Any, int] = {}
        # Per partition, ranges [start, end) the broker does not hold (compaction, retention).
        self.absent: dict[Any, list[tuple[int, int]]] = {}

    # --- what the reading side (shared/kafka/delivery.py) tells the checkpoint ---

    def sought(self, tp: Any, committed: int | None) -> None:
        """`tp` was sought to `committed` (None: none known; its first read sets the floor)."""
        self.absent.pop(tp, None)
        if committed is None:
            self.floor.pop(tp, None)
        else:
            self.floor[tp] = committed

    def first_read(self, tp: Any, offset: int) -> None:
        """The first offset read from `tp` since a seek that knew no committed offset."""
        self.floor.setdefault(tp, offset)

    def missing(self, tp: Any, start: int, end: int) -> None:
        """Offsets [start, end) of `tp` are not on the broker: they count as processed."""
        self.absent.setdefault(tp, []).append((start, end))

    def revoked(self, tps: Iterable[Any]) -> None:
        """The partitions went away: nothing more of theirs is committed here until a seek
        (Faust forgets their committed offsets before its revocation commit runs)."""
        for tp in tps:
            self.floor.pop(tp, None)
            self.absent.pop(tp, None)

    def start_of(self, tp: Any) -> int | None:
        committed = self.port.committed(tp)
        return committed if committed is not None else self.floor.get(tp)

    def close(self, tps: Any = None) -> Closed:
        """Step 1, with no await: what the checkpoint covers is fixed here."""
        closed = Closed(deliveries=set(self.gate.pending))
        for tp, acked in self.port.acked(tps).items():
            committed = self.start_of(tp)
            offset, covered = committable(acked, committed, self.absent.get(tp, ()))
            if covered:
                closed.covered[tp] = covered
            if offset is not None and (committed is None or offset > committed):
                closed.offsets[tp] = offset
            elif acked and offset is None and self._held_at.get(tp, -1) != committed:
                self._held_at[tp] = committed
                log.warning("%s: commit held at %s, a record before %s is not processed yet",
                            next(iter(_named({tp: 0}))), committed, min(acked))
        return closed

    async def commit(self, tps: Any = None) -> bool:
        """Steps 1-5; True when the broker took a commit."""
        closed = self.close(tps)                                       # 1. close
        if not closed.offsets:
            return False
        await self.port.flush()                                        # 2. flush producer
        refused = await self.gate.settle(closed.deliveries)            # 3. await deliveries
        if refused is not None:
            log.critical("the broker refused a record (%s); stopping before the commit so "
                         "its input replays", type(refused).__name__)
            self.on_refused(refused)
            return False
        return await self._commit(closed)                              # 4. and 5.

    async def _commit(self, closed: Closed) -> bool:
        crashed = self.port.halted()
        if crashed is not None:
            log.warning("not committing %s: the worker crashed (%s); its input replays after "
                        "the restart", _named(closed.offsets), type(crashed).__name__)
            return False
        assigned = self.port.assigned()
        offsets = {tp: o for tp, o in closed.offsets.items() if tp in assigned}
        if gone := set(closed.offsets) - set(offsets):
            log.info("not committing revoked %s: their next owner reads them again",
                     _named({tp: closed.offsets[tp] for tp in gone}))
        if not offsets:
            return False
        log.debug("commit %s", _named(offsets))
        if not await self.port.commit(offsets):                        # 4. commit
            return False
        self.port.committed_now(offsets, {tp: closed.covered.get(tp, []) for tp in offsets})
        for tp, end in offsets.items():
            self.floor[tp] = end
            if tp in self.absent:
                self.absent[tp] = [(a, b) for a, b in self.absent[tp] if b > end]
        self.port.flush_state(offsets)                                 # 5. flush state
        return True


class FaustPort:
    """`Port` over Faust's consumer: its ack list is the record of what was processed."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer

    def acked(self, tps: Any) -> Mapping[Any, list[int]]:
        acked = self.consumer._acked
        return {tp: list(offsets) for tp, offsets in acked.items()
                if tps is None or tp in tps or tp.topic in tps}

    def committed(self, tp: Any) -> int | None:
        committed: int | None = self.consumer._committed_offset.get(tp)
        return committed

    def assigned(self) -> set[Any]:
        return set(self.consumer.assignment())

    def halted(self) -> BaseException | None:
        return commits_halted(self.consumer.app)

    async def flush(self) -> None:
        await self.consumer.app.producer.flush()

    async def commit(self, offsets: Mapping[Any, int]) -> bool:
        took: bool = await self.consumer._commit(offsets)
        return took

    def committed_now(self, offsets: Mapping[Any, int], covered: Mapping[Any, list[int]],
                      ) -> None:
        consumer = self.consumer
        consumer._committed_offset.update(offsets)
        for tp, end in offsets.items():
            gone = set(covered.get(tp, ()))
            acked = consumer._acked.get(tp)
            if acked is not None:
                acked[:] = [o for o in acked if o >= end and o not in gone]
            index = consumer._acked_index.get(tp)
            if index is not None:
                index.difference_update(o for o in list(index) if o < end)

    def flush_state(self, offsets: Mapping[Any, int]) -> None:
        app = self.consumer.app
        app.tables.on_commit(offsets)
        app.monitor.on_tp_commit(offsets)


_on_refused: Callable[[BaseException], None] | None = None


def of(consumer: Any) -> Checkpoint:
    """The consumer's checkpoint (made on first use)."""
    made = consumer.__dict__.get("_streamrag_checkpoint")
    if made is None:
        made = consumer.__dict__["_streamrag_checkpoint"] = Checkpoint(
            FaustPort(consumer), gate, lambda exc: (_on_refused or _no_handler)(exc))
    return made


def _no_handler(exc: BaseException) -> None:
    raise RuntimeError("shared.kafka.checkpoint.install was not called") from exc


def on_refused(handler: Callable[[BaseException], None]) -> None:
    """What the worker does when the broker refuses a record (exit, so its input replays)."""
    global _on_refused
    _on_refused = handler


# --- the agents' side: how a processed record reaches the checkpoint ---

def done(event: Any) -> None:
    """`event` is processed and everything it produced is handed to the producer."""
    event.ack()


async def taken(stream: Any) -> AsyncIterator[Any]:
    """The stream's events, none of them processed yet: hand each to `done` when it is."""
    async for event in stream.noack().events():
        yield event


async def records(stream: Any) -> AsyncIterator[Any]:
    """The stream's events; each one is done when the loop asks for the next, so a body
    that raises (or a loop left by break) leaves its record unprocessed."""
    async for event in taken(stream):
        yield event
        done(event)


async def batches(stream: Any, max_events: int, within_s: float,
                  ) -> AsyncIterator[dict[int, list[Any]]]:
    """{partition: [events in offset order]} per micro-batch of up to `max_events` taken
    within `within_s` of its first; each batch is done when the loop asks for the next.

    Not Faust's `take_events`, which acks its batch in a `finally` whatever became of it:
    a reader task fills a bounded queue and the batches are cut from it here.
    """
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=max(1, max_events))
    loop = asyncio.get_running_loop()

    async def read() -> None:
        async for event in taken(stream):
            await queue.put(event)

    reader = asyncio.ensure_future(read())
    # Whatever ended the reader is raised to the loop below, or was beside the point once the
    # loop itself raised: retrieve it either way (no "exception never retrieved" log).
    reader.add_done_callback(lambda done: done.cancelled() or done.exception())
    try:
        while (first := await _next(queue, reader, None)) is not _END:
            events = [first]
            deadline = loop.time() + within_s
            while len(events) < max_events:
                left = deadline - loop.time()
                if left <= 0 and queue.empty():
                    break
                try:
                    event = await _next(queue, reader, max(0.0, left))
                except TimeoutError:
                    break
                if event is _END:
                    break
                events.append(event)
            groups: dict[int, list[Any]] = defaultdict(list)
            for event in events:
                groups[event.message.partition].append(event)
            yield dict(groups)
            for event in events:
                done(event)
    finally:
        reader.cancel()


_END = object()  # the stream ended


async def _next(queue: asyncio.Queue[Any], reader: asyncio.Future[None],
                timeout: float | None) -> Any:
    """The next queued event; `_END` (or the reader's exception) once the reader ended
    and nothing is queued; TimeoutError after `timeout` seconds."""
    if not queue.empty():
        return queue.get_nowait()
    getting = asyncio.ensure_future(queue.get())
    try:
        finished, _ = await asyncio.wait({getting, reader}, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        getting.cancel()
        raise
    if getting in finished:
        return getting.result()
    getting.cancel()
    if reader in finished:
        reader.result()  # raises what ended the reader
        return _END
    raise TimeoutError
