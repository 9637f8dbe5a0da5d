"""What Faust reads and commits, made to keep the checkpoint's promise: no input offset is
committed before its record was processed and everything it produced is on the broker, nor
past an offset not processed, nor by a worker that crashed.

The commit itself is shared/kafka/checkpoint.py's, and only there. This module wires it
into Faust and keeps Faust's reading honest; what was seen without each fix, with the
traces, is in docs/design/delivery-and-ordering.md:

- Commits. Faust's `Consumer.force_commit` (every commit: its interval, a rebalance, a
  stop, an agent error) runs the consumer's `Checkpoint.commit`; `Channel.as_future_message`
  hands every produced record's future (table changelogs and `send_soon` included) to the
  checkpoint's delivery gate, and `Topic.publish_message` takes back one whose send raised
  before the producer had it.
- Inputs after a (re)start or rebalance. `SeekFence`: an assigned stream partition stays
  paused until the seek to its committed offset is done; acks from before the seek are
  forgotten (those records are read again).
- Fetches that skip offsets. `_getmany` passes a copy of the active partition set, asks for
  nothing while it is empty, and moves a partition that stopped being active meanwhile back
  to its first returned offset; `getmany` checks each record against the next offset
  expected for its partition and moves the partition back to the first missing offset
  (`beyond`) whatever dropped them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from shared.kafka import checkpoint
from shared.kafka.seam import replace

log = logging.getLogger(__name__)


class SeekFence:
    """Stream partitions that were assigned and not yet sought to their committed offsets,
    and those of them that Faust asked to resume meanwhile (they are resumed after the seek)."""

    def __init__(self) -> None:
        self.unsought: set[Any] = set()
        self.held: set[Any] = set()

    def assigned(self, tps: Iterable[Any]) -> None:
        self.unsought, self.held = set(tps), set()

    def admit(self, tps: Iterable[Any]) -> set[Any]:
        """Of the partitions to resume, those that may be resumed now; the rest are held."""
        tps = set(tps)
        self.held |= tps & self.unsought
        return tps - self.unsought

    def sought(self) -> set[Any]:
        """A seek to the committed offsets is done: the held partitions, to resume now.

        Only those held: a seek Faust makes on its own (its fetcher finding the flow
        stopped) may come before the resume, and the resume must still wait for one.
        """
        held, self.held = self.held, set()
        self.unsought -= held
        return held


def beyond(expected: int | None, offset: int, last_rewind: tuple[int, int] | None) -> bool:
    """Whether a fetched `offset` skips records before it, so its partition must go back to
    `expected`: not when nothing is expected yet, nor when going back to the same place
    already brought this same offset (those offsets are not on the broker)."""
    return expected is not None and offset > expected and last_rewind != (expected, offset)


class Expected:
    """Per input partition: the next offset to deliver and the last rewind made."""

    def __init__(self) -> None:
        self.next: dict[Any, int] = {}
        self.rewound: dict[Any, tuple[int, int]] = {}


def expected_of(consumer: Any) -> Expected:
    expected = consumer.__dict__.get("_streamrag_expected")
    if expected is None:
        expected = consumer.__dict__["_streamrag_expected"] = Expected()
    return expected


_installed = False


def fence_of(consumer: Any) -> SeekFence:
    fence = consumer.__dict__.get("_streamrag_fence")
    if fence is None:
        fence = consumer.__dict__["_streamrag_fence"] = SeekFence()
    return fence


def install(on_refused: Callable[[BaseException], None]) -> None:
    """Route Faust's commits through the checkpoint and keep its reading honest.

    Reaches into private parts of faust-streaming 0.15.3 (declared and checked by
    shared.kafka.patches): `Channel.as_future_message` (where every produced record's future
    is made), `Topic.publish_message` (a send that raises before the producer has it is
    forgotten by the gate) and, on `Consumer`, `force_commit` (every commit goes through it),
    `on_partitions_assigned`, `on_partitions_revoked`, `resume_partitions`, `perform_seek`
    (the seek to the committed offsets after an assignment), `getmany` (every fetched
    record passes it) and `ThreadDelegateConsumer._getmany` (the call into the consumer
    thread). The upstream issue behind each, and when each can go:
    docs/design/delivery-and-ordering.md ("Upstream, and when each fix can go"). All of
    them are exercised after kill -9 by tests/integration/test_supervision.py,
    test_ingest_restart.py and test_scale_out.py: rerun those against a new Faust before
    removing any.
    """
    global _installed
    checkpoint.on_refused(on_refused)
    if _installed:
        return
    _installed = True
    from faust.channels import Channel
    from faust.topics import Topic
    from faust.transport.consumer import Consumer, ThreadDelegateConsumer

    make_future = Channel.as_future_message

    def as_future_message(self: Any, *args: Any, **kwargs: Any) -> Any:
        future = make_future(self, *args, **kwargs)
        checkpoint.gate.track(future)
        return future

    publish = Topic.publish_message

    async def publish_message(self: Any, fut: Any, wait: bool = False) -> Any:
        try:
            return await publish(self, fut, wait)
        except BaseException:
            # Never handed to the producer (a send aiokafka refused at once): the caller has
            # the exception, and a tracked future that never resolves would hold every
            # later commit at step 3.
            checkpoint.gate.forget(fut)
            raise

    async def force_commit(self: Any, topics: Any = None, start_new_transaction: bool = True,
                           ) -> bool:
        sensor_state = self.app.sensors.on_commit_initiated(self)
        took = await checkpoint.of(self).commit(topics)
        self.app.sensors.on_commit_completed(self, sensor_state)
        return took

    assigned = Consumer.on_partitions_assigned

    async def on_partitions_assigned(self: Any, assigned_tps: Any, generation_id: int = 0,
                                     ) -> None:
        fence_of(self).assigned(tp for tp in assigned_tps if not self._is_changelog_tp(tp))
        await assigned(self, assigned_tps, generation_id)

    resume = Consumer.resume_partitions

    def resume_partitions(self: Any, tps: Any) -> None:
        resume(self, fence_of(self).admit(tps))

    seek = Consumer.perform_seek

    async def perform_seek(self: Any) -> None:
        await seek(self)
        # Every assigned partition is read again from its committed offset: what was acked
        # before the seek is not evidence that the records from there on were processed.
        for tp in self.assignment():
            self._acked.pop(tp, None)
            self._acked_index.pop(tp, None)
        log.info("sought to committed offsets %s", {
            f"{tp.topic}/{tp.partition}": o for tp, o in sorted(self._committed_offset.items())})
        expected, point = expected_of(self), checkpoint.of(self)
        for tp in self.assignment():
            committed = self._committed_offset.get(tp)
            if not self._is_changelog_tp(tp):
                point.sought(tp, committed)
            if committed is None or self._is_changelog_tp(tp):
                expected.next.pop(tp, None)
            else:
                expected.next[tp] = committed
        resume(self, fence_of(self).sought())

    async def rewind(self: Any, tp: Any, offset: int) -> None:
        """Fetch `tp` again from `offset`; Faust must not drop the records as read already."""
        # In the consumer thread, which owns aiokafka's state (Faust's own `_seek` is not).
        await self._thread.seek_wait({tp: offset})
        self._read_offset[tp] = offset if offset else None
        expected_of(self).next[tp] = offset

    async def rewind_if_assigned(self: Any, tp: Any, offset: int) -> None:
        if tp in self.assignment():  # else revoked meanwhile: the next owner seeks it
            await rewind(self, tp, offset)

    fetch = ThreadDelegateConsumer._getmany

    async def getmany_records(self: Any, active_partitions: Any, timeout: float) -> Any:
        if active_partitions is None:
            return await fetch(self, None, timeout)
        asked = set(active_partitions)  # the live set changes while the thread fetches
        if not asked:
            await asyncio.sleep(min(timeout, 0.1))
            return {}
        records = await fetch(self, asked, timeout)
        for tp, batch in records.items():
            if batch and tp not in active_partitions and tp not in self._buffered_partitions:
                # Faust's getmany drops these; aiokafka's position is already past them.
                log.warning("%s/%s: fetched %s..%s after it was paused; fetching again from %s",
                            tp.topic, tp.partition, batch[0].offset, batch[-1].offset,
                            batch[0].offset)
                await rewind_if_assigned(self, tp, batch[0].offset)
        return records

    get_many = Consumer.getmany

    async def getmany(self: Any, timeout: float) -> Any:
        expected, rewound = expected_of(self), set()
        async for tp, message in get_many(self, timeout):
            if tp in rewound:
                continue
            want = expected.next.get(tp)
            if beyond(want, message.offset, expected.rewound.get(tp)):
                assert want is not None
                log.warning("%s/%s: the fetch skipped offsets %s..%s; fetching again from %s",
                            tp.topic, tp.partition, want, message.offset - 1, want)
                expected.rewound[tp] = (want, message.offset)
                rewound.add(tp)
                await rewind(self, tp, want)
                continue
            if want is not None:
                if message.offset > want:  # the same rewind brought the same offset again
                    log.warning("%s/%s: offsets %s..%s are not on the broker (compacted or "
                                "deleted): the commit passes over them", tp.topic,
                                tp.partition, want, message.offset - 1)
                    checkpoint.of(self).missing(tp, want, message.offset)
                expected.next[tp] = max(want, message.offset + 1)
            elif not self._is_changelog_tp(tp):
                # No committed offset was known at the seek: the first read is the floor.
                checkpoint.of(self).first_read(tp, message.offset)
            yield tp, message

    revoked = Consumer.on_partitions_revoked

    async def on_partitions_revoked(self: Any, revoked_tps: Any) -> None:
        expected = expected_of(self)
        for tp in revoked_tps:
            expected.next.pop(tp, None)
            expected.rewound.pop(tp, None)
        # Faust forgets their committed offsets here, before its revocation commit: the
        # checkpoint holds them rather than start a run anywhere else.
        checkpoint.of(self).revoked(revoked_tps)
        await revoked(self, revoked_tps)

    replace(Channel, "as_future_message", as_future_message)
    replace(Topic, "publish_message", publish_message)
    replace(Consumer, "force_commit", force_commit)
    replace(Consumer, "on_partitions_assigned", on_partitions_assigned)
    replace(Consumer, "resume_partitions", resume_partitions)
    replace(Consumer, "perform_seek", perform_seek)
    replace(Consumer, "getmany", getmany)
    replace(Consumer, "on_partitions_revoked", on_partitions_revoked)
    replace(ThreadDelegateConsumer, "_getmany", getmany_records)
