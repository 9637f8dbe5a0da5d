"""A worker asks the group coordinator whether it is still a member before writing what
must be written once per input."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError

from shared.kafka import membership


def app_with(member_id: str, answer: Any) -> tuple[Any, list[Any]]:
    sent: list[Any] = []

    async def send_req(request: Any) -> Any:
        sent.append(request)
        if isinstance(answer, BaseException):
            raise answer
        return SimpleNamespace(error_code=answer)

    group = SimpleNamespace(member_id=member_id, generation=7, group_id="streamrag-redaction",
                            _send_req=send_req)
    consumer = SimpleNamespace(_coordinator=group)

    async def call_thread(fun: Any, *args: Any) -> Any:
        return await fun(*args)
    thread = SimpleNamespace(_ensure_consumer=lambda: consumer, call_thread=call_thread)
    return SimpleNamespace(consumer=SimpleNamespace(_thread=thread)), sent


@pytest.mark.parametrize(("member", "answer", "why"), [
    ("m-1", 0, None),  # NoError
    ("m-1", 27, None),  # RebalanceInProgress: still a member, nothing handed on yet
    ("m-1", 25, "UnknownMemberIdError"),  # evicted
    ("m-1", 22, "IllegalGenerationError"),  # an older generation
    ("m-1", KafkaConnectionError(), "KafkaConnectionError"),  # no answer
    ("", 0, "no member id (the group has evicted this worker)"),
])
def test_membership_is_confirmed_only_by_the_coordinator_s_answer(
        member: str, answer: Any, why: str | None) -> None:
    app, sent = app_with(member, answer)
    assert asyncio.run(membership.confirm(app)) == why
    if member:
        [request] = sent
        assert (request._group, request._generation_id, request._member_id) == (
            "streamrag-redaction", 7, "m-1")


def test_no_consumer_yet_is_unconfirmed() -> None:
    app = SimpleNamespace(consumer=SimpleNamespace(_thread=None))
    assert asyncio.run(membership.confirm(app)) == "no group coordinator"


@pytest.mark.parametrize(("member", "answer", "evicted"), [
    ("m-1", 0, None),
    ("m-1", 27, None),
    ("m-1", 25, "UnknownMemberIdError"),
    ("m-1", 22, "IllegalGenerationError"),
    ("m-1", KafkaConnectionError(), None),  # no answer proves nothing
    ("", 0, "no member id (the group has evicted this worker)"),
])
def test_only_a_certain_answer_is_an_eviction(member: str, answer: Any,
                                              evicted: str | None) -> None:
    app, _ = app_with(member, answer)
    assert asyncio.run(membership.evicted(app)) == evicted
