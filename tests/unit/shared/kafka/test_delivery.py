"""Faust's reading, kept honest for the checkpoint: after the seek to the committed offset
every record is read, none skipped, and what was acked before the seek proves nothing;
and Faust's commits are the checkpoint's (test_checkpoint.py has the checkpoint itself)."""

from __future__ import annotations

import asyncio
from typing import Any
from unittest.mock import AsyncMock

import faust
import pytest
from faust.transport.consumer import Consumer
from faust.types import TP

from shared.kafka import checkpoint, delivery
from shared.worker.boundary import exit_now


def unstarted_consumer(monkeypatch: pytest.MonkeyPatch, assigned: set[TP],
                       committed: dict[TP, int]) -> Any:
    """Faust's real aiokafka Consumer, never started: its assignment and the broker's
    committed offsets are stand-ins, its offset bookkeeping is Faust's own. Made inside
    the test's event loop, so Faust makes no loop of its own."""
    delivery.install(on_refused=exit_now)  # what make_app does
    app = faust.App(f"unit-{id(assigned)}", broker="kafka://127.0.0.1:1",
                    store="memory://", web_enabled=False, autodiscover=False)
    consumer = app.consumer
    seeks: list[dict[TP, int]] = []

    async def seek_to_committed() -> dict[TP, int]:
        seeks.append(dict(committed))
        return dict(committed)
    monkeypatch.setattr(consumer, "assignment", lambda: set(assigned))
    monkeypatch.setattr(consumer, "seek_to_committed", seek_to_committed)
    monkeypatch.setattr(consumer, "_is_changelog_tp", lambda tp: tp.topic.endswith("changelog"))
    consumer.seeks = seeks
    return consumer


def test_a_gap_in_fetched_offsets_is_never_committed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The traced loss: after the seek Faust's fetch loop went on from 78 to 86 and marked
    79..86 as a gap, which its _new_offset counted as processed once 87 was (committing 88).
    Faust still records the gap; the checkpoint does not read it."""
    raw = TP("docs.raw.v1", 0)

    async def go() -> dict[TP, int]:
        consumer = unstarted_consumer(monkeypatch, {raw}, {raw: 78})
        await Consumer.perform_seek(consumer)
        await consumer._add_gap(raw, 79, 86)
        for offset in (78, 87):
            consumer._acked[raw].append(offset)
            consumer._acked_index[raw].add(offset)
        return checkpoint.of(consumer).close().offsets
    assert asyncio.run(go()) == {raw: 79}


def test_every_faust_commit_is_the_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Faust's own Consumer.commit (its interval, a rebalance, a stop) with a record refused
    by the broker: nothing reaches the broker's side, and the worker is told to stop."""
    raw = TP("docs.raw.v1", 0)
    refusals: list[BaseException] = []
    monkeypatch.setattr(checkpoint, "gate", checkpoint.DeliveryGate())

    async def go() -> tuple[bool, list[dict[TP, int]], bool, list[dict[TP, int]]]:
        consumer = unstarted_consumer(monkeypatch, {raw}, {raw: 3})
        monkeypatch.setattr(checkpoint, "_on_refused", refusals.append)
        commits: list[dict[TP, int]] = []

        async def commit(offsets: dict[TP, int]) -> bool:  # the broker's side
            commits.append(dict(offsets))
            return True
        monkeypatch.setattr(consumer, "_commit", commit)
        monkeypatch.setattr(consumer.app.producer, "flush", AsyncMock())
        await Consumer.perform_seek(consumer)
        for offset in (3, 4):
            consumer._acked[raw].append(offset)
            consumer._acked_index[raw].add(offset)
        future = asyncio.get_running_loop().create_future()
        checkpoint.gate.track(future)
        future.set_exception(RuntimeError("NOT_ENOUGH_REPLICAS"))
        refused = await consumer.commit()
        refused_commits = list(commits)
        monkeypatch.setattr(checkpoint, "gate", checkpoint.DeliveryGate())
        consumer.__dict__.pop("_streamrag_checkpoint")  # a fresh worker's
        took = await consumer.commit()
        return refused, refused_commits, took, commits
    refused, refused_commits, took, commits = asyncio.run(go())
    assert (refused, refused_commits) == (False, [])
    assert [type(r) for r in refusals] == [RuntimeError]
    assert took is True and commits == [{raw: 5}]


def test_an_assigned_partition_is_fetched_only_after_the_seek_to_its_committed_offset(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Faust's recovery resumes the stream partitions, then seeks them; its fetcher runs
    in between and delivered records from before the seek (which were then lost)."""
    raw, changelog = TP("docs.raw.v1", 0), TP("app-doc_versions-changelog", 0)

    async def go() -> tuple[Any, set[TP], set[TP]]:
        consumer = unstarted_consumer(monkeypatch, {raw, changelog}, {raw: 78})
        delivery.fence_of(consumer).assigned({raw})  # what on_partitions_assigned records
        consumer.pause_partitions({raw, changelog})
        consumer.resume_partitions({changelog})  # table recovery reads its changelog
        consumer._acked[raw].append(90)  # a record acked before the seek
        consumer.resume_partitions({raw})  # Faust's on_recovery_completed, then the seek:
        before_seek = set(consumer._get_active_partitions())
        await Consumer.perform_seek(consumer)
        return consumer, before_seek, set(consumer._get_active_partitions())
    consumer, before_seek, after_seek = asyncio.run(go())
    assert before_seek == {changelog}
    assert after_seek == {raw, changelog}
    assert consumer.seeks == [{raw: 78}]
    assert consumer._acked[raw] == []  # read again from 78: the ack from before proves nothing
    assert consumer._read_offset[raw] == 78


def test_a_seek_faust_makes_before_the_resume_does_not_open_the_fence(
        monkeypatch: pytest.MonkeyPatch) -> None:
    raw = TP("docs.raw.v1", 1)

    async def go() -> tuple[bool, bool]:
        consumer = unstarted_consumer(monkeypatch, {raw}, {raw: 5})
        delivery.fence_of(consumer).assigned({raw})
        consumer.pause_partitions({raw})
        await Consumer.perform_seek(consumer)  # its fetcher found the flow stopped
        consumer.resume_partitions({raw})
        held = raw not in consumer._get_active_partitions()
        await Consumer.perform_seek(consumer)
        return held, raw in consumer._get_active_partitions()
    assert asyncio.run(go()) == (True, True)


# --- fetches that skip offsets: the partition goes back to the first missing offset ---

def record(tp: TP, offset: int) -> Any:
    from aiokafka.structs import ConsumerRecord
    return ConsumerRecord(topic=tp.topic, partition=tp.partition, offset=offset, timestamp=0,
                          timestamp_type=0, key=b"k", value=b"v", checksum=None,
                          serialized_key_size=1, serialized_value_size=1, headers=())


def fetching_consumer(monkeypatch: pytest.MonkeyPatch, tp: TP, committed: int,
                      batches: list[dict[TP, list[Any]]]) -> Any:
    """Faust's real consumer over a fake consumer thread that answers `batches` in turn and
    records each seek, as aiokafka's would (a seek moves the position back)."""
    consumer = unstarted_consumer(monkeypatch, {tp}, {tp: committed})
    consumer.sought_to = []

    async def thread_getmany(active: Any, timeout: float) -> Any:
        return batches.pop(0) if batches else {}

    async def seek_wait(partitions: dict[TP, int]) -> None:
        consumer.sought_to.extend(partitions.items())
    monkeypatch.setattr(consumer._thread, "getmany", thread_getmany)
    monkeypatch.setattr(consumer._thread, "seek_wait", seek_wait)
    monkeypatch.setattr(consumer, "highwater", lambda tp: 0)
    consumer._set_active_tps({tp})
    consumer.resume_flow()
    return consumer


async def delivered(consumer: Any, rounds: int) -> list[int]:
    offsets = []
    for _ in range(rounds):
        async for _tp, message in consumer.getmany(timeout=0.01):
            offsets.append(message.offset)
    return offsets


def test_a_fetch_that_skips_offsets_goes_back_to_the_first_missing_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger after kill -9: sought to 2, the first record fetched was 11. Faust passed
    11 on (its read offset was 2, so 2..10 were never read) and 2..10 were lost."""
    tp = TP("audit.batches.v1", 3)

    async def go() -> tuple[list[int], list[tuple[TP, int]], Any]:
        consumer = fetching_consumer(monkeypatch, tp, 2, [
            {tp: [record(tp, 11), record(tp, 12)]},  # the skip
            {tp: [record(tp, o) for o in range(2, 13)]}])  # fetched again from 2
        delivery.fence_of(consumer).assigned({tp})
        await Consumer.perform_seek(consumer)
        return await delivered(consumer, 2), consumer.sought_to, consumer._read_offset[tp]
    offsets, sought_to, read_offset = asyncio.run(go())
    assert offsets == list(range(2, 13))
    assert sought_to == [(tp, 2)]
    assert read_offset == 2  # Faust's read offset went back too: 2.. are not dropped as read


def test_records_of_a_partition_paused_while_the_thread_fetched_are_fetched_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """aiokafka reads Faust's live set of active partitions when its fetch returns; recovery
    pausing the changelogs emptied that set, aiokafka then returned every partition's
    records (moving its position past them), and Faust's getmany dropped those of
    partitions not active."""
    tp, changelog = TP("docs.raw.v1", 0), TP("app-doc_versions-changelog", 0)

    async def go() -> tuple[list[int], int]:
        consumer = fetching_consumer(monkeypatch, tp, 5, [])
        monkeypatch.setattr(consumer, "assignment", lambda: {tp, changelog})
        await Consumer.perform_seek(consumer)
        consumer.pause_partitions({tp})
        consumer.resume_partitions({changelog})
        position = {tp: 5}

        async def thread_getmany(active: Any, timeout: float) -> Any:
            consumer.pause_partitions({changelog})  # recovery is done meanwhile
            if active and tp not in active:  # aiokafka: an empty set means every partition
                return {}
            position[tp] = 7
            return {tp: [record(tp, 5), record(tp, 6)]}

        async def seek_wait(partitions: dict[TP, int]) -> None:
            position.update(partitions)
        monkeypatch.setattr(consumer._thread, "getmany", thread_getmany)
        monkeypatch.setattr(consumer._thread, "seek_wait", seek_wait)
        return await delivered(consumer, 1), position[tp]
    offsets, position = asyncio.run(go())
    assert offsets == []
    assert position == 5  # 5 and 6 are still to be fetched


def test_a_paused_partitions_records_that_still_came_back_are_fetched_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tp = TP("docs.raw.v1", 1)

    async def go() -> tuple[list[int], list[tuple[TP, int]], Any]:
        consumer = fetching_consumer(monkeypatch, tp, 5, [])
        await Consumer.perform_seek(consumer)

        async def thread_getmany(active: Any, timeout: float) -> Any:
            consumer.pause_partitions({tp})  # paused after the thread took its copy
            return {tp: [record(tp, 5), record(tp, 6)]}
        monkeypatch.setattr(consumer._thread, "getmany", thread_getmany)
        offsets = await delivered(consumer, 1)
        return offsets, consumer.sought_to, consumer._read_offset[tp]
    offsets, sought_to, read_offset = asyncio.run(go())
    assert offsets == []  # Faust's getmany drops them ...
    assert sought_to == [(tp, 5)]  # ... and the position goes back to them
    assert read_offset == 5


def test_offsets_missing_from_the_broker_are_passed_over_after_one_try(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tp = TP("docs.raw.v1", 2)

    async def go() -> tuple[list[int], list[tuple[TP, int]], dict[TP, int]]:
        consumer = fetching_consumer(monkeypatch, tp, 2, [
            {tp: [record(tp, 7)]}, {tp: [record(tp, 7), record(tp, 8)]}])
        await Consumer.perform_seek(consumer)
        offsets = await delivered(consumer, 2)
        for offset in offsets:  # processed
            consumer._acked[tp].append(offset)
        return offsets, consumer.sought_to, checkpoint.of(consumer).close().offsets
    offsets, sought_to, commit = asyncio.run(go())
    assert offsets == [7, 8]
    assert sought_to == [(tp, 2)]
    assert commit == {tp: 9}  # 2..6 are not on the broker (compacted): not a hole to wait on


def test_a_send_refused_before_the_producer_had_it_holds_no_commit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """aiokafka raises at once for a send it cannot take (a partition the topic lacks): the
    record's future never resolves, and tracked it would hold every later commit at step 3.
    The caller gets the exception; the gate forgets the future."""
    monkeypatch.setattr(checkpoint, "gate", checkpoint.DeliveryGate())
    delivery.install(on_refused=exit_now)  # what make_app does

    class Refusing:
        async def send(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("Unrecognized partition")

    async def go() -> tuple[type[BaseException] | None, int, BaseException | None]:
        app = faust.App(f"refusing-{id(monkeypatch)}", broker="kafka://127.0.0.1:1",
                        store="memory://", web_enabled=False, autodiscover=False)
        topic = app.topic("chunks.v1", key_type=bytes, value_type=bytes,
                          key_serializer="raw", value_serializer="raw")

        async def producer() -> Any:
            return Refusing()
        monkeypatch.setattr(topic, "_get_producer", producer)
        raised = None
        try:
            await topic.send(key=b"k", value=b"v", partition=99)
        except AssertionError as exc:
            raised = type(exc)
        settled = await asyncio.wait_for(checkpoint.gate.settle(), 5)
        return raised, len(checkpoint.gate.pending), settled
    assert asyncio.run(go()) == (AssertionError, 0, None)
