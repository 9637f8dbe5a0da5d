"""`streamrag subjects`: the documents whose newest indexed version mentions a value, found
however the value is written, with exit 0/1/2 for found/none/unreadable."""

from __future__ import annotations

import asyncio
import json

import pytest

from services.cli import main, subjects
from shared.contract.records import SubjectIndex
from shared.contract.subjects import DEV_SUBJECT_KEY, key_id, key_of

KEY = DEV_SUBJECT_KEY.encode()


def record(doc: str, version: int, *values: tuple[str, str], key: bytes = KEY,
           ) -> SubjectIndex:
    keys = sorted({key_of(key, kind, v) for kind, v in values})  # type: ignore[arg-type]
    return SubjectIndex(doc_id=doc, version=version, batch_id=f"ep/docs.normalized.v1/0/{version}",
                        key_id=key_id(key), subjects=tuple(keys))


INDEX = [
    record("a", 1, ("email", "ann@example.com")),
    record("a", 2, ("email", "ann@example.com"), ("phone", "+1 415 555 0132")),
    record("b", 3, ("email", "ann@example.com")),
    record("b", 4),  # the newest version of b mentions nobody
    record("c", 1, ("name", "Ann Lee"), ("id", "078-05-1120")),
    record("d", 7, ("email", "bob@example.com")),
]


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str,
        index: list[SubjectIndex] | Exception = INDEX) -> tuple[int, str, str]:
    async def read_index(_: object) -> list[SubjectIndex]:
        if isinstance(index, Exception):
            raise index
        return index
    monkeypatch.setattr(subjects, "read_index", read_index)
    code = main.main(["subjects", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_email_written_otherwise_finds_each_document_s_newest_version(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(monkeypatch, capsys, "  ANN@Example.COM ")
    assert code == 0
    assert out.splitlines() == ["doc id  version  batch id",
                                "a             2  ep/docs.normalized.v1/0/2"]


def test_a_phone_number_in_national_format_finds_its_international_form(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(monkeypatch, capsys, "(415) 555-0132", "--kind", "phone", "--json")
    assert code == 0
    assert json.loads(out) == {"matches": [{"doc_id": "a", "version": 2,
                                            "batch_id": "ep/docs.normalized.v1/0/2"}],
                               "records_under_another_key": 0}


def test_the_kind_limits_what_the_value_is_taken_for(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert run(monkeypatch, capsys, "078 05 1120", "--kind", "id")[0] == 0
    assert run(monkeypatch, capsys, "078 05 1120", "--kind", "phone")[0] == 1
    code, out, _ = run(monkeypatch, capsys, "ann   LEE")
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:]] == ["c"]


def test_another_value_finds_nothing_and_exits_1(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(monkeypatch, capsys, "ann@example.org")
    assert code == 1 and out.strip() == "no document's newest version mentions it (4 indexed)"


def test_records_under_another_key_are_named_not_matched(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    other = [record("e", 1, ("email", "ann@example.com"), key=b"another key")]
    code, _, err = run(monkeypatch, capsys, "ann@example.com", index=other)
    assert code == 1 and "1 documents are indexed under another subject key" in err
    monkeypatch.setenv("STREAMRAG_REDACTION_SUBJECT_KEY", "another key")
    code, out, _ = run(monkeypatch, capsys, "ann@example.com", index=other)
    assert code == 0 and out.splitlines()[1].split()[:2] == ["e", "1"]


def test_an_unreadable_index_exits_2_with_one_sentence(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    why = subjects.IndexUnreadable("pii.subjects.v1 is not on the broker at x:9092")
    code, out, err = run(monkeypatch, capsys, "ann@example.com", index=why)
    assert (code, out) == (2, "")
    assert err == "streamrag subjects: pii.subjects.v1 is not on the broker at x:9092.\n"


def test_a_replayed_older_version_does_not_hide_the_newest() -> None:
    replayed = [INDEX[1], INDEX[0]]  # version 2, then a replay of version 1
    assert subjects.newest(replayed)["a"].version == 2


class Admin:
    def __init__(self, topics: list[str], **_: object) -> None:
        self.topics = topics

    async def start(self) -> None:
        return None

    async def list_topics(self) -> list[str]:
        return self.topics

    async def close(self) -> None:
        return None


class Message:
    def __init__(self, value: bytes | None) -> None:
        self.value = value


def test_the_index_is_read_past_tombstones_and_foreign_records(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def read_topic(_: object, spec: object) -> list[Message]:
        assert spec is subjects.PII_SUBJECTS
        return [Message(INDEX[0].model_dump_json().encode()), Message(None),
                Message(b'{"not": "an index record"}'), Message(INDEX[1].model_dump_json()
                                                                 .encode())]
    monkeypatch.setattr(subjects, "AIOKafkaAdminClient",
                        lambda **kw: Admin(["docs.redacted.v1", "pii.subjects.v1"]))
    monkeypatch.setattr(subjects, "read_topic", read_topic)
    assert asyncio.run(subjects.read_index(subjects.KafkaSettings())) == INDEX[:2]
    monkeypatch.setattr(subjects, "AIOKafkaAdminClient", lambda **kw: Admin(["docs.raw.v1"]))
    with pytest.raises(subjects.IndexUnreadable, match=r"^pii.subjects.v1 is not on the broker"):
        asyncio.run(subjects.read_index(subjects.KafkaSettings()))
