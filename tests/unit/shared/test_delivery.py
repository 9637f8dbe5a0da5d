"""The delivery gate: a commit waits for every produced record and never follows a refused one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from faust.transport.consumer import Consumer

from shared import delivery
from shared.boundary import exit_now
from shared.delivery import DeliveryGate


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
