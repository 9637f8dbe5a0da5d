"""The one checkpoint (shared/kafka/checkpoint.py): a fault at each of its five steps
leaves the committed offsets where they were, a commit never passes an offset whose record
was not processed or whose outputs the broker did not take, and a replay from the committed
offsets produces every output. Against a fake consumer and producer (`Port`); Faust's own
commit path runs it in test_delivery.py, the real broker in the kill tests."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.errors import ConfigError
from shared.kafka import checkpoint
from shared.kafka.app import make_app
from shared.kafka.checkpoint import Checkpoint, DeliveryGate, committable
from shared.settings import KafkaSettings

TP0, TP1 = ("docs.raw.v1", 0), ("docs.raw.v1", 1)


class FakePort:
    """A consumer's ack list and committed offsets, a producer, a broker's commit; each step
    can be made to fail."""

    def __init__(self, committed: dict[Any, int] | None = None) -> None:
        self.acked_offsets: dict[Any, list[int]] = {}
        self.committed_offsets: dict[Any, int] = dict(committed or {})
        self.assignment: set[Any] = {TP0, TP1}
        self.crashed: BaseException | None = None
        self.commits: list[dict[Any, int]] = []
        self.steps: list[str] = []
        self.fail_flush: BaseException | None = None
        self.fail_commit: BaseException | bool | None = None
        self.fail_state: BaseException | None = None
        self.state_flushed: list[dict[Any, int]] = []

    def ack(self, tp: Any, *offsets: int) -> None:
        committed = self.committed_offsets.get(tp)
        self.acked_offsets.setdefault(tp, []).extend(
            o for o in offsets if committed is None or o >= committed)

    def acked(self, tps: Any) -> Mapping[Any, list[int]]:
        return {tp: list(o) for tp, o in self.acked_offsets.items() if tps is None or tp in tps}

    def committed(self, tp: Any) -> int | None:
        return self.committed_offsets.get(tp)

    def assigned(self) -> set[Any]:
        return set(self.assignment)

    def halted(self) -> BaseException | None:
        return self.crashed

    async def flush(self) -> None:
        self.steps.append("flush")
        if self.fail_flush is not None:
            raise self.fail_flush

    async def commit(self, offsets: Mapping[Any, int]) -> bool:
        self.steps.append("commit")
        if isinstance(self.fail_commit, BaseException):
            raise self.fail_commit
        if self.fail_commit is False:
            return False
        self.commits.append(dict(offsets))
        return True

    def committed_now(self, offsets: Mapping[Any, int], covered: Mapping[Any, list[int]],
                      ) -> None:
        self.committed_offsets.update(offsets)
        for tp, end in offsets.items():
            self.acked_offsets[tp] = [o for o in self.acked_offsets.get(tp, []) if o >= end]

    def flush_state(self, offsets: Mapping[Any, int]) -> None:
        self.steps.append("state")
        if self.fail_state is not None:
            raise self.fail_state
        self.state_flushed.append(dict(offsets))


def made(port: FakePort, gate: DeliveryGate | None = None,
         ) -> tuple[Checkpoint, list[BaseException]]:
    refusals: list[BaseException] = []
    return Checkpoint(port, gate or DeliveryGate(), refusals.append), refusals


def test_the_five_steps_run_in_order_and_commit_the_processed_run() -> None:
    port = FakePort({TP0: 10})
    port.ack(TP0, 10, 11, 12, 14)
    cp, _ = made(port)
    assert asyncio.run(cp.commit()) is True
    assert port.steps == ["flush", "commit", "state"]
    assert port.commits == [{TP0: 13}]  # 13 is not processed: the run stops before it
    assert port.acked_offsets[TP0] == [14]
    assert port.state_flushed == [{TP0: 13}]


def test_nothing_processed_past_the_committed_offset_commits_nothing() -> None:
    port = FakePort({TP0: 10})
    port.ack(TP0, 11, 12)  # 10 is still in hand
    cp, _ = made(port)
    assert asyncio.run(cp.commit()) is False
    assert port.steps == [] and port.commits == []


def test_step_2_a_producer_that_cannot_flush_commits_nothing() -> None:
    port = FakePort({TP0: 0})
    port.ack(TP0, 0, 1)
    port.fail_flush = ConnectionError("broker gone")
    cp, _ = made(port)
    with pytest.raises(ConnectionError):
        asyncio.run(cp.commit())
    assert port.commits == [] and port.committed_offsets == {TP0: 0}
    port.fail_flush = None
    assert asyncio.run(cp.commit()) is True  # the same run, once the producer is back
    assert port.commits == [{TP0: 2}]


def test_step_3_a_refused_delivery_commits_nothing_and_stops_the_worker() -> None:
    async def go() -> tuple[bool, list[BaseException], FakePort]:
        port, gate = FakePort({TP0: 0}), DeliveryGate()
        port.ack(TP0, 0, 1)
        cp, refusals = made(port, gate)
        refused = asyncio.get_running_loop().create_future()
        gate.track(refused)
        refused.set_exception(RuntimeError("NOT_ENOUGH_REPLICAS"))
        return await cp.commit(), refusals, port
    took, refusals, port = asyncio.run(go())
    assert took is False and [type(r) for r in refusals] == [RuntimeError]
    assert port.steps == ["flush"] and port.commits == []


def test_step_3_waits_for_every_delivery_taken_at_the_close_and_not_for_later_ones() -> None:
    async def go() -> tuple[list[str], FakePort]:
        port, gate, loop, order = FakePort({TP0: 0}), DeliveryGate(), \
            asyncio.get_running_loop(), []
        port.ack(TP0, 0)
        cp, _ = made(port, gate)
        first, later = loop.create_future(), loop.create_future()
        gate.track(first)
        loop.call_later(0.02, lambda: (order.append("delivered"), first.set_result(1)))
        task = asyncio.ensure_future(cp.commit())
        await asyncio.sleep(0)
        gate.track(later)  # produced after the close: the next checkpoint's
        await task
        order.append("committed")
        later.set_result(2)
        return order, port
    order, port = asyncio.run(go())
    assert order == ["delivered", "committed"]
    assert port.commits == [{TP0: 1}]


def test_a_crash_between_steps_3_and_4_leaves_the_committed_offsets_for_the_replay() -> None:
    async def go() -> FakePort:
        port, gate = FakePort({TP0: 5}), DeliveryGate()
        port.ack(TP0, 5, 6)
        cp, _ = made(port, gate)
        pending = asyncio.get_running_loop().create_future()
        gate.track(pending)
        task = asyncio.ensure_future(cp.commit())
        await asyncio.sleep(0.01)
        task.cancel()  # the worker dies while the broker has not answered
        with pytest.raises(asyncio.CancelledError):
            await task
        return port
    port = asyncio.run(go())
    assert port.commits == [] and port.committed_offsets == {TP0: 5}


def test_step_4_a_refused_commit_keeps_the_processed_offsets_for_the_next_one() -> None:
    """Faust's own _new_offset dropped the covered offsets before its commit: a commit the
    broker refused (a rebalance) left nothing to commit them by again."""
    port = FakePort({TP0: 0})
    port.ack(TP0, 0, 1, 2)
    cp, _ = made(port)
    port.fail_commit = False
    assert asyncio.run(cp.commit()) is False
    assert port.committed_offsets == {TP0: 0} and port.acked_offsets[TP0] == [0, 1, 2]
    port.fail_commit = ConnectionError("coordinator gone")
    with pytest.raises(ConnectionError):
        asyncio.run(cp.commit())
    assert port.committed_offsets == {TP0: 0}
    port.fail_commit = None
    assert asyncio.run(cp.commit()) is True
    assert port.commits == [{TP0: 3}]


def test_step_4_a_crashed_worker_commits_nothing() -> None:
    port = FakePort({TP0: 0})
    port.ack(TP0, 0, 1)
    port.crashed = FileNotFoundError("a timer")
    cp, _ = made(port)
    assert asyncio.run(cp.commit()) is False
    assert port.commits == [] and "commit" not in port.steps


def test_step_4_a_partition_revoked_mid_checkpoint_is_left_to_its_next_owner() -> None:
    async def go() -> FakePort:
        port, gate = FakePort({TP0: 0, TP1: 0}), DeliveryGate()
        port.ack(TP0, 0, 1)
        port.ack(TP1, 0)
        cp, _ = made(port, gate)
        pending = asyncio.get_running_loop().create_future()
        gate.track(pending)
        task = asyncio.ensure_future(cp.commit())
        await asyncio.sleep(0.01)
        port.assignment = {TP1}  # the rebalance takes TP0 while step 3 waits
        pending.set_result(None)
        await task
        return port
    port = asyncio.run(go())
    assert port.commits == [{TP1: 1}]
    assert port.committed_offsets[TP0] == 0


def test_step_5_a_state_flush_that_fails_comes_after_the_commit_it_follows() -> None:
    port = FakePort({TP0: 0})
    port.ack(TP0, 0)
    port.fail_state = OSError("disk full")
    cp, _ = made(port)
    with pytest.raises(OSError):
        asyncio.run(cp.commit())
    assert port.commits == [{TP0: 1}] and port.committed_offsets == {TP0: 1}


def test_committable_counts_only_the_unbroken_run_from_the_committed_offset() -> None:
    # Faust's own _new_offset returned 34 here (and 3 below): it allowed one missing offset
    # right after the committed one, and did not check at all while the commit was 0.
    assert committable([32, 33], 31) == (None, [])
    assert committable([1, 2], 0) == (None, [])
    acked = [34, 31, 32]
    assert committable(acked, 31) == (33, [31, 32])
    assert acked == [34, 31, 32]  # left as it was: only a commit the broker took drops them
    assert committable([8, 9, 10, 12], 10) == (11, [8, 9, 10])
    # Nothing committed and no floor known: hold, whatever was processed. Starting the run
    # at the lowest processed offset let a record done early (a dead letter while earlier
    # ones waited for a batch) commit past the ones still in flight.
    assert committable([5, 6, 7], None) == (None, [])


def test_offsets_the_broker_does_not_hold_count_as_processed() -> None:
    """A compacted input has holes: a run stopped at the first one for ever."""
    assert committable([10, 11, 15], 10) == (12, [10, 11])
    assert committable([10, 11, 15], 10, [(12, 15)]) == (16, [10, 11, 15])
    assert committable([15], 10, [(10, 15)]) == (16, [15])
    assert committable([10, 11], 10, [(20, 30)]) == (12, [10, 11])  # a hole further on


def test_with_no_committed_offset_the_run_starts_at_the_first_offset_read() -> None:
    port = FakePort()
    cp, _ = made(port)
    port.ack(TP0, 1)  # done first (a dead letter) while 0 waits for its batch
    assert asyncio.run(cp.commit()) is False  # no committed offset, no floor: held
    cp.first_read(TP0, 0)
    assert asyncio.run(cp.commit()) is False  # 0 is still in flight
    port.ack(TP0, 0)
    assert asyncio.run(cp.commit()) is True and port.commits == [{TP0: 2}]


def test_a_revoked_partition_is_held_until_its_next_seek() -> None:
    """Faust forgets a revoked partition's committed offset before its revocation commit;
    the checkpoint must not start the run anywhere else then."""
    port = FakePort({TP0: 4})
    cp, _ = made(port)
    cp.revoked({TP0})
    del port.committed_offsets[TP0]  # what Faust's on_partitions_revoked does
    port.ack(TP0, 6)  # done out of order while 4 and 5 are still in flight
    assert asyncio.run(cp.commit()) is False and port.commits == []
    cp.sought(TP0, 4)  # assigned again
    port.ack(TP0, 4, 5)
    assert asyncio.run(cp.commit()) is True and port.commits == [{TP0: 7}]


def test_a_missing_range_lets_the_commit_pass_over_it() -> None:
    port = FakePort({TP0: 10})
    cp, _ = made(port)
    port.ack(TP0, 10, 11, 15)
    cp.missing(TP0, 12, 15)
    assert asyncio.run(cp.commit()) is True and port.commits == [{TP0: 16}]
    assert cp.absent[TP0] == []  # passed: forgotten


@given(processed=st.sets(st.integers(0, 40)), committed=st.none() | st.integers(0, 40))
def test_every_offset_a_commit_covers_was_processed(processed: set[int],
                                                    committed: int | None) -> None:
    offset, covered = committable(sorted(processed), committed)
    if committed is None:
        assert offset is None
    if offset is not None:
        assert committed is not None
        assert set(range(committed, offset)) <= processed
        assert offset > committed
    assert set(covered) <= processed


def test_settle_reports_a_cancelled_send_as_refused() -> None:
    async def go() -> BaseException | None:
        gate = DeliveryGate()
        future = asyncio.get_running_loop().create_future()
        gate.track(future)
        future.cancel()
        return await gate.settle()
    assert isinstance(asyncio.run(go()), asyncio.CancelledError)


# --- a model of a worker: process, produce, commit, crash at any step, replay ---

STEPS = ("process", "deliver", "refuse", "commit", "crash")


@settings(max_examples=150, deadline=None)
@given(script=st.lists(st.tuples(st.sampled_from(STEPS), st.integers(0, 3)), max_size=60))
def test_whatever_crashes_where_every_input_is_produced_and_no_commit_passes_a_lost_one(
        script: list[tuple[str, int]]) -> None:
    """Inputs 0..11 of one partition; processing input n hands output n to the producer;
    the broker delivers or refuses it later; commits and crashes come anywhere (a crash
    loses every output not yet delivered and restarts from the committed offset). At any
    commit, every input below it has its output on the broker; at the end, after a last
    clean run, every input's output is there."""
    inputs = 12

    async def go() -> None:
        loop = asyncio.get_running_loop()
        port, delivered = FakePort({TP0: 0}), set[int]()
        port.assignment = {TP0}
        state: dict[str, Any] = {}

        def start() -> None:  # a fresh worker: reads from the committed offset
            gate = DeliveryGate()
            state.update(gate=gate, next=port.committed_offsets[TP0], flight={},
                         cp=Checkpoint(port, gate, lambda exc: state.update(dead=True)),
                         dead=False)
            port.acked_offsets = {}

        def check_commits() -> None:
            for commit in port.commits:
                assert set(range(commit[TP0])) <= delivered, (commit, delivered)

        start()
        for step, n in script:
            if state["dead"]:
                start()
            if step == "process" and state["next"] < inputs:
                offset = state["next"]
                future = loop.create_future()
                state["gate"].track(future)
                state["flight"][offset] = future
                port.ack(TP0, offset)  # done once its output is handed over
                state["next"] += 1
            elif step in ("deliver", "refuse") and state["flight"]:
                offset = sorted(state["flight"])[n % len(state["flight"])]
                future = state["flight"].pop(offset)
                if step == "deliver":
                    delivered.add(offset)
                    future.set_result(None)
                else:
                    future.set_exception(RuntimeError("refused"))
            elif step == "commit":
                flight = list(state["flight"].items())
                task = asyncio.ensure_future(state["cp"].commit())
                for _ in range(3):
                    await asyncio.sleep(0)
                if not task.done():  # deliveries outstanding: the broker answers them now
                    for offset, future in flight:
                        if not future.done():
                            delivered.add(offset)
                            future.set_result(None)
                            state["flight"].pop(offset, None)
                await task
            elif step == "crash":
                for future in state["flight"].values():
                    future.cancel()
                start()
            check_commits()
        start()  # the last run: no faults
        while state["next"] < inputs:
            offset = state["next"]
            future = loop.create_future()
            state["gate"].track(future)
            port.ack(TP0, offset)
            delivered.add(offset)
            future.set_result(None)
            state["next"] += 1
        await state["cp"].commit()
        check_commits()
        assert delivered == set(range(inputs))
        assert port.committed_offsets[TP0] == inputs

    asyncio.run(go())


def test_checkpoint_of_a_consumer_is_one_and_the_same() -> None:
    class Consumer:
        pass
    consumer = Consumer()
    assert checkpoint.of(consumer) is checkpoint.of(consumer)


@pytest.mark.parametrize("override", [{"processing_guarantee": "exactly_once"},
                                      {"stream_publish_on_commit": True}])
def test_an_app_that_asks_for_what_the_checkpoint_does_not_do_is_refused(
        tmp_path: Path, override: dict[str, Any]) -> None:
    """Faust's commit published attached messages and ended transactions; the checkpoint
    does neither, so asking for them must fail at start, not wait at a commit."""
    with pytest.raises(ConfigError, match="at-least-once"):
        make_app(f"refused-{len(override)}", KafkaSettings(), tmp_path, **override)
    assert make_app("at-least-once", KafkaSettings(), tmp_path).conf.id == "at-least-once"
