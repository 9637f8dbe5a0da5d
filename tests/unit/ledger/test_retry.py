"""Backoff while the node is down: growing, capped waits, a deadline, no retry of other errors."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest
import requests

from services.ledger.chain import AnchorClient
from services.ledger.errors import LedgerUnavailable
from services.ledger.retry import Backoff, call_with_retry
from services.ledger.settings import LedgerServiceSettings
from shared.settings import LedgerSettings


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def failing(times: int, exc: BaseException) -> tuple[Callable[[], str], dict[str, int]]:
    calls = {"n": 0}

    def fn() -> str:
        calls["n"] += 1
        if calls["n"] <= times:
            raise exc
        return "ok"
    return fn, calls


def test_waits_double_up_to_the_cap_then_succeed() -> None:
    clock = FakeClock()
    fn, calls = failing(5, requests.ConnectionError("refused"))
    assert call_with_retry(fn, Backoff(0.5, 3.0, 60.0), "t", clock.sleep, clock) == "ok"
    assert clock.waits == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert calls["n"] == 6


def test_gives_up_at_the_deadline_with_a_typed_error() -> None:
    clock = FakeClock()
    fn, _ = failing(1000, requests.Timeout("slow"))
    with pytest.raises(LedgerUnavailable, match="unreachable for 10s") as info:
        call_with_retry(fn, Backoff(1.0, 4.0, 10.0), "anchor b", clock.sleep, clock)
    assert isinstance(info.value.__cause__, requests.Timeout)
    assert sum(clock.waits) == pytest.approx(10.0)  # the last wait is cut to the deadline
    assert clock.waits == [1.0, 2.0, 4.0, 3.0]


def test_other_errors_are_not_retried() -> None:
    clock = FakeClock()
    fn, calls = failing(1, ValueError("bad argument"))
    with pytest.raises(ValueError, match="bad argument"):
        call_with_retry(fn, Backoff(0.5, 3.0, 60.0), "t", clock.sleep, clock)
    assert calls["n"] == 1 and clock.waits == []


def test_connect_to_a_dead_node_raises_ledger_unavailable(service: LedgerServiceSettings) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ledger = LedgerSettings(rpc_url=f"http://127.0.0.1:{port}")
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)
    with pytest.raises(LedgerUnavailable, match="connect: node unreachable"):
        AnchorClient.connect(ledger, service, sleep=sleep)
    # It retried, and what it chose to wait stays within the deadline: it gave up there.
    assert len(waits) >= 2 and sum(waits) <= service.retry_deadline_s
