"""The ingest agents under Faust's test context: good records forward, bad ones dead-letter."""

from __future__ import annotations

import asyncio
import json
from unittest.mock import AsyncMock, patch

from services.ingest import agents
from services.ingest.app import app, dlq_raw, parsed_topic


def run(coro):  # noqa: ANN001, ANN201
    return asyncio.run(coro)


async def _drive(values: list[bytes]) -> tuple[AsyncMock, AsyncMock]:
    app.finalize()
    app.flow_control.resume()
    forward, dead = AsyncMock(), AsyncMock()
    with patch.object(parsed_topic, "send", forward), patch.object(dlq_raw, "send", dead):
        async with agents.parse.test_context() as agent:
            for value in values:
                await agent.put(value=value, key=None)
    return forward, dead


def test_parse_agent_forwards_good_and_dead_letters_bad_without_stopping() -> None:
    good = json.dumps({"id": "doc-1", "text": "Hello", "source": "t"}).encode()
    forward, dead = run(_drive([b"{broken", good]))
    assert forward.await_count == 1
    sent = forward.await_args.kwargs
    assert sent["key"] == b"doc-1" and json.loads(sent["value"])["text"] == "Hello"
    assert dead.await_count == 1
    letter = json.loads(dead.await_args.kwargs["value"])
    assert letter["reason"] == "malformed_json" and letter["stage"] == "ingest"
    assert letter["payload_b64"] is not None  # raw input keeps its payload for replay
