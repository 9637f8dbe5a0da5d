"""`streamrag forget` on the real one-process mesh, by document and by person, while a
client keeps producing: each receipt is signed, anchored and proven by `audit prove`;
afterwards neither document is answered, its copies on the evidence topic no longer open,
the subject index and the chunk topics hold its delete, no file of the run directory
outside the broker's log holds its text, another document stays, and verify passes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from services.cli.mesh import Endpoints
from shared.contract import forget
from shared.contract.records import RedactedDocument
from shared.contract.sealed import Forgotten, open_document
from shared.keys.sealing import key_id_for
from shared.keys.settings import KeySettings
from shared.keys.store import VersionKeys
from tests.support.mesh import (
    chunks_of,
    produce,
    read_topic,
    streamrag_audit,
    uid,
    wait_verified,
)
from tests.support.polling import eventually
from tests.support.sealed import opened_text

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
# Lower case, so no recognizer takes them for names: they stay in the redacted text.
WORD, OTHER = "quillomantic", "brindlewick"
ONLY_A, ONLY_B = "zarnowiecki", "huxtablewood"  # words no other document holds
EMAIL = "Ottoline.Brackenbury@example.net"


def streamrag(mesh: Endpoints, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap}
    return subprocess.run([sys.executable, "-m", "services.cli.main", *args],
                          capture_output=True, text=True, env=env, timeout=400, check=False)


class Trickle(threading.Thread):
    """A client producing unrelated documents the whole time."""

    def __init__(self, mesh: Endpoints) -> None:
        super().__init__(daemon=True)
        self.mesh, self.stop, self.sent = mesh, threading.Event(), 0

    def run(self) -> None:
        while not self.stop.wait(0.5):
            produce(self.mesh, [json.dumps({"id": uid("trickle"), "source": "trickle",
                                            "text": f"Routine note {self.sent}."}).encode()])
            self.sent += 1


def version_keys(item: dict[str, Any]) -> list[str]:
    """The version keys a receipt names destroyed."""
    return [k for k in item["receipt"]["keys_destroyed"] if k.startswith("k")]


def transit_keys(item: dict[str, Any]) -> list[str]:
    """The transit keys (of what was parsed before the request) a receipt names destroyed."""
    return [k for k in item["receipt"]["keys_destroyed"] if k.startswith("t")]


def forget_json(mesh: Endpoints, *args: str) -> list[dict[str, Any]]:
    done = streamrag(mesh, "forget", *args, "--by", "dpo@example.org", "--json",
                     "--timeout", "300")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_a_document_and_a_person_are_forgotten_with_anchored_receipts(
        onebox_mesh: Endpoints) -> None:
    mesh = onebox_mesh
    a, b, c = uid("forget-a"), uid("forget-b"), uid("forget-c")
    produce(mesh, [
        json.dumps({"id": a, "source": "forget", "title": "Escalation", "text":
                    f"The {WORD} escalation: write to {EMAIL} about the {ONLY_A} invoice."}
                   ).encode(),
        json.dumps({"id": b, "source": "forget", "text":
                    f"Second {WORD} note; copy {EMAIL} on the {ONLY_B} reply."}).encode(),
        json.dumps({"id": c, "source": "forget",
                    "text": f"The {OTHER} {WORD} schedule: nobody is named here."}).encode()])
    for doc_id in (a, b, c):
        eventually(lambda d=doc_id: chunks_of(mesh, f"{WORD} escalation note", d),
                   f"{doc_id} answered", timeout_s=240)
    keys = VersionKeys.from_settings(KeySettings(path=mesh.run_dir / "data" / "keys" /
                                                 "versions.sqlite"))
    redacted = [RedactedDocument.model_validate_json(r.value)
                for r in read_topic(mesh, "docs.redacted.v1") if r.key in (a.encode(),)]
    assert redacted and all(d.sealed for d in redacted)  # sealed on the evidence topic
    assert ONLY_A in open_document(redacted[0], keys).text  # and opens while the key lives

    trickle = Trickle(mesh)
    trickle.start()
    try:
        [by_doc] = forget_json(mesh, a)
        by_person = forget_json(mesh, "--subject", EMAIL.upper())
    finally:
        trickle.stop.set()
        trickle.join()
    assert trickle.sent > 0
    assert by_doc["done"] and by_doc["receipt"]["versions"] == [1]
    assert version_keys(by_doc) == [key_id_for(a, 1)] and transit_keys(by_doc)
    assert by_doc["receipt"]["requested_by"] == "dpo@example.org"
    assert by_doc["version"] == 2 and by_doc["tx_hash"].startswith("0x")
    person = {item["doc_id"]: item for item in by_person}
    assert b in person and c not in person and all(i["done"] for i in by_person)
    assert version_keys(person[b]) == [key_id_for(b, 1)] and transit_keys(person[b])

    # Not answered any more; the other document is.
    eventually(lambda: not chunks_of(mesh, f"{WORD} escalation note", a)
               and not chunks_of(mesh, f"{WORD} escalation note", b),
               "the forgotten documents gone from answers", timeout_s=120)
    assert chunks_of(mesh, f"{OTHER} {WORD} schedule", c)

    code, proof = streamrag_audit(mesh, "prove", a)
    assert code == 0, proof
    # The newest receipt: the person's forget reaches `a` again when its index record of
    # version 1 is not compacted away yet (a second forget destroys nothing more).
    last = person.get(a, by_doc)
    assert proof["version"] == last["version"] and proof["forgotten"]["request_id"] == \
        last["request_id"] and proof["checks"]["anchor_on_chain_matches"]
    if a in person:  # a receipt names every earlier version's key gone, then or before
        assert version_keys(person[a]) == [key_id_for(a, 1)]
    wait_verified(mesh, "after the forgets", timeout_s=180)

    # The evidence topic's copies no longer open; no clear text anywhere on it.
    for record in read_topic(mesh, "docs.redacted.v1"):
        for clear in (ONLY_A, ONLY_B, WORD, EMAIL.lower()):
            assert clear.lower().encode() not in record.value.lower()
        doc = RedactedDocument.model_validate_json(record.value)
        if doc.doc_id in (a, b) and doc.sealed:
            with pytest.raises(Forgotten):
                open_document(doc, keys)
    # Every other topic, changelogs and dead letters included (keys, headers and values,
    # opened with the mesh's key store where it still can): nothing but the clear copies
    # the receipt names holds the forgotten words (docs.parsed.v1 and docs.normalized.v1
    # included: sealed under keys the forgets destroyed).
    held = [f"{r.topic}@{r.partition}/{r.offset}" for r in every_record(mesh.bootstrap)
            if r.topic not in forget.CLEAR_COPIES and r.topic != "deadletter.raw.v1"
            and any(w.encode() in _bytes(r) + opened_text(mesh, r.value).encode()
                    for w in (ONLY_A, ONLY_B))]
    assert held == []
    # The subject index and the chunk topics end with the deletes (compaction keeps those).
    for topic in ("pii.subjects.v1", "chunks.v1"):
        newest = {}
        for r in read_topic(mesh, topic):
            if r.key in (a.encode(), b.encode()):
                newest[r.key] = json.loads(r.value)
        assert set(newest) == {a.encode(), b.encode()}, topic
        assert all(v.get("subjects", []) == [] and v.get("chunks", []) == []
                   for v in newest.values()), topic
    # No file of the run directory outside the broker's log holds the text.
    def clean() -> list[str]:
        return [str(p) for p in _files(mesh.run_dir)
                if ONLY_A.encode() in (data := p.read_bytes()) or ONLY_B.encode() in data]
    eventually(lambda: not clean(), "no file holding the forgotten text", timeout_s=120)


def _bytes(record: Any) -> bytes:
    return b"".join([record.key or b"", record.value or b"",
                     *(k.encode() + (v or b"") for k, v in record.headers or ())])


def every_record(bootstrap: str) -> list[Any]:
    """Every record of every topic on the broker, each partition read to its end."""
    async def go() -> list[Any]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            cluster = await consumer._client.fetch_all_metadata()  # noqa: SLF001
            parts = [TopicPartition(t, p) for t in cluster.topics()
                     for p in cluster.partitions_for_topic(t) or ()]
            assert len(parts) > 20, parts  # every topic of the mesh, not a vacuous scan
            consumer.assign(parts)
            await consumer.seek_to_beginning(*parts)
            ends = await consumer.end_offsets(parts)
            out: list[Any] = []
            left = {tp for tp in parts if ends[tp] > 0}
            while left:
                for tp, records in (await consumer.getmany(timeout_ms=1000)).items():
                    out += records
                    if records and records[-1].offset + 1 >= ends[tp]:
                        left.discard(tp)
                left = {tp for tp in left if await consumer.position(tp) < ends[tp]}
            return out
        finally:
            await consumer.stop()
    return asyncio.run(go())


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and "kafka" not in p.parts
            and "keys" not in p.parts and p.stat().st_size < 512 * 1024 * 1024]
