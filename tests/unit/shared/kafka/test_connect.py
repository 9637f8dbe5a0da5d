"""shared.kafka.connect.started: a client's start waits out a broker that refuses connections."""
from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import KafkaConnectionError

from shared.errors import InfrastructureError
from shared.kafka import connect


class Client:
    """Refuses to start while `down` says the broker is down; records what was done."""

    def __init__(self, down: list[bool]) -> None:
        self.down, self.started, self.closed = down, False, False

    async def start(self) -> None:
        if self.down.pop(0):
            raise KafkaConnectionError("Unable to bootstrap")
        self.started = True


async def close(client: Client) -> None:
    client.closed = True


def run_started(down: list[bool], wait_s: float) -> tuple[list[Client], Client | Exception]:
    made: list[Client] = []

    def make() -> Client:
        made.append(Client(down))
        return made[-1]
    try:
        got: Client | Exception = asyncio.run(connect.started(make, close, "b:9092", wait_s,
                                                              "test"))
    except InfrastructureError as exc:
        got = exc
    return made, got


def test_a_broker_back_within_the_wait_gives_a_started_fresh_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connect, "FIRST_PAUSE_S", 0.001)
    made, got = run_started([True, True, True, False], wait_s=30)
    assert got is made[-1] and len(made) == 4  # a new client for each try
    assert made[-1].started and not made[-1].closed
    assert all(c.closed and not c.started for c in made[:-1])  # each failed one closed


def test_a_broker_gone_longer_raises_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connect, "FIRST_PAUSE_S", 0.001)
    monkeypatch.setattr(connect, "LONGEST_PAUSE_S", 0.001)
    made, got = run_started([True] * 10_000, wait_s=0.05)
    assert isinstance(got, InfrastructureError)
    assert "broker b:9092 not reachable after" in str(got)
    assert 1 < len(made) < 10_000 and all(c.closed for c in made)


def test_no_wait_tries_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made, got = run_started([True, False], wait_s=0)
    assert isinstance(got, InfrastructureError) and len(made) == 1
