"""What a commit may cover: every produced record acknowledged (the delivery gate), and only
input records processed, from the committed offset on, after the seek to it."""

from __future__ import annotations

import asyncio
from typing import Any

import faust
import pytest
from faust.transport.consumer import Consumer
from faust.types import TP
from hypothesis import given
from hypothesis import strategies as st

from shared.kafka import delivery
from shared.kafka.delivery import DeliveryGate, committable
from shared.worker.boundary import exit_now


def test_settle_waits_for_every_record_still_on_its_way() -> None:
    async def go() -> tuple[list[str], BaseException | None]:
        gate, loop, order = DeliveryGate(), asyncio.get_running_loop(), []
        first, second = loop.create_future(), loop.create_future()
        gate.track(first)
        gate.track(second)
        loop.call_later(0.01, lambda: (order.append("first"), first.set_result(1)))
        loop.call_later(0.02, lambda: (order.append("second"), second.set_result(2)))
        refused = await gate.settle()
        order.append("settled")
        return order, refused
    order, refused = asyncio.run(go())
    assert order == ["first", "second", "settled"]
    assert refused is None


def test_a_refused_record_is_reported_and_stays_reported() -> None:
    async def go() -> tuple[BaseException | None, BaseException | None, int]:
        gate, loop = DeliveryGate(), asyncio.get_running_loop()
        ok, bad, late = loop.create_future(), loop.create_future(), loop.create_future()
        for future in (ok, bad, late):
            gate.track(future)
        ok.set_result(1)
        bad.set_exception(RuntimeError("NOT_LEADER_FOR_PARTITION"))
        first = await gate.settle()
        late.set_result(3)
        await asyncio.sleep(0)
        return first, await gate.settle(), len(gate.pending)
    first, again, pending = asyncio.run(go())
    assert isinstance(first, RuntimeError) and again is first
    assert pending == 0


def test_a_cancelled_send_counts_as_refused() -> None:
    async def go() -> BaseException | None:
        gate, loop = DeliveryGate(), asyncio.get_running_loop()
        future = loop.create_future()
        gate.track(future)
        future.cancel()
        return await gate.settle()
    assert isinstance(asyncio.run(go()), asyncio.CancelledError)


def test_faust_commits_only_after_the_gate_settles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through Faust's own Consumer._commit_offsets, as installed by make_app."""
    refusals: list[BaseException] = []
    delivery.install(on_refused=exit_now)  # what make_app does
    monkeypatch.setattr(delivery, "_on_refused", refusals.append)
    monkeypatch.setattr(delivery, "gate", DeliveryGate())

    class Unstarted:  # any use of the real consumer's state means the commit went ahead
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"committed although a record was refused ({name})")

    async def go() -> bool:
        future = asyncio.get_running_loop().create_future()
        delivery.gate.track(future)
        future.set_exception(RuntimeError("refused"))
        return await Consumer._commit_offsets(Unstarted(), {})  # type: ignore[arg-type]
    assert asyncio.run(go()) is False
    assert [type(r) for r in refusals] == [RuntimeError]


# --- input offsets: a commit covers only records processed, from the committed offset on ---

def test_a_single_unprocessed_offset_after_the_committed_one_holds_the_commit() -> None:
    # Faust's own _new_offset returned 34 here (and 3 below): it allowed one missing offset
    # right after the committed one, and did not check at all while the commit was 0.
    assert committable([32, 33], 31) == (None, [])
    assert committable([1, 2], 0) == (None, [])


def test_the_commit_covers_the_run_from_the_committed_offset_up_to_the_first_hole() -> None:
    acked = [34, 31, 32]
    assert committable(acked, 31) == (33, [31, 32])
    assert acked == [34]
    assert committable(acked, 33) == (None, [])


def test_nothing_committed_yet_starts_at_the_lowest_processed_offset() -> None:
    assert committable([5, 6, 7], None) == (8, [5, 6, 7])
    assert committable([], None) == (None, [])


def test_offsets_read_again_below_the_committed_one_are_dropped_as_covered() -> None:
    acked = [8, 9, 10, 12]
    assert committable(acked, 10) == (11, [8, 9, 10])
    assert acked == [12]


@given(processed=st.sets(st.integers(0, 40)), committed=st.none() | st.integers(0, 40))
def test_every_offset_a_commit_covers_was_processed(processed: set[int],
                                                    committed: int | None) -> None:
    offset, covered = committable(sorted(processed), committed)
    if offset is not None:
        start = min(processed) if committed is None else committed
        assert set(range(start, offset)) <= processed
        assert offset > start
    assert set(covered) <= processed


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
    79..86 as a gap, which its _new_offset counted as processed once 87 was (committing 88)."""
    raw = TP("docs.raw.v1", 0)

    async def go() -> int | None:
        consumer = unstarted_consumer(monkeypatch, {raw}, {raw: 78})
        await Consumer.perform_seek(consumer)
        await consumer._add_gap(raw, 79, 86)
        for offset in (78, 87):
            consumer._acked[raw].append(offset)
            consumer._acked_index[raw].add(offset)
        return consumer._new_offset(raw)
    assert asyncio.run(go()) == 79


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

    async def go() -> tuple[list[int], list[tuple[TP, int]]]:
        consumer = fetching_consumer(monkeypatch, tp, 2, [
            {tp: [record(tp, 7)]}, {tp: [record(tp, 7), record(tp, 8)]}])
        await Consumer.perform_seek(consumer)
        return await delivered(consumer, 2), consumer.sought_to
    offsets, sought_to = asyncio.run(go())
    assert offsets == [7, 8]
    assert sought_to == [(tp, 2)]
