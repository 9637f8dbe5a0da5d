"""`streamrag produce`: what a text file becomes on docs.raw.v1, labels included, and only
acknowledged records counted as sent."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest
from aiokafka.errors import TopicAuthorizationFailedError

from services.cli import produce
from services.ingest.normalize import RawMessage, parse_raw
from services.ingest.settings import IngestSettings
from shared.errors import InfrastructureError
from shared.settings import KafkaSettings


def parsed(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    produce.add_parser(parser.add_subparsers())
    return parser.parse_args(["produce", *argv])


def test_a_text_file_carries_the_labels_given_and_ingest_reads_them(tmp_path: Path) -> None:
    note = tmp_path / "runbook.md"
    note.write_text("Restart the payments gateway.", "utf-8")
    [(key, value)] = list(produce.records(note, parsed([str(note), "--acl", "sre, payments"])))
    assert key == str(note).encode()
    assert json.loads(value)["acl"] == "sre, payments"
    doc = parse_raw(RawMessage(value, 1.7e9, {}), IngestSettings())
    assert doc.acl == ("payments", "sre")


def test_without_acl_the_file_names_no_labels_so_ingest_applies_its_default(
        tmp_path: Path) -> None:
    note = tmp_path / "runbook.txt"
    note.write_text("Restart the payments gateway.", "utf-8")
    [(_, value)] = list(produce.records(note, parsed([str(note)])))
    assert "acl" not in json.loads(value)


class _RefusingProducer:
    """A producer whose broker refuses every third record (as a topic ACL would)."""

    def __init__(self, **_: object) -> None:
        self.n = 0

    async def start(self) -> None: ...
    async def flush(self) -> None: ...
    async def stop(self) -> None: ...

    async def send(self, *_: object, **__: object) -> asyncio.Future[object]:
        self.n += 1
        done: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        if self.n % 3:
            done.set_result(self.n)
        else:
            done.set_exception(TopicAuthorizationFailedError())
        return done


def test_a_refused_record_is_not_counted_as_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(produce, "AIOKafkaProducer", _RefusingProducer)
    items = [(None, b"{}")] * 7
    with pytest.raises(InfrastructureError) as refused:
        asyncio.run(produce.send(KafkaSettings(), items, progress=False))
    assert "refused 2 of 7" in str(refused.value)
    assert "5 were acknowledged" in str(refused.value)
    monkeypatch.setattr(_RefusingProducer, "send", _all_acked)
    assert asyncio.run(produce.send(KafkaSettings(), items, progress=False)) == 7


async def _all_acked(self: _RefusingProducer, *_: object, **__: object) -> asyncio.Future[object]:
    done: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    done.set_result(1)
    return done
