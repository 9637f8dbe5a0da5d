"""kill -9 of redaction in the middle of a forget, on the real multi-process mesh: once
with the request in its hands (on docs.normalized.v1, not yet a receipt), once just as
the receipt reached docs.redacted.v1 (its audit record and the key destruction may or may
not have followed). Each forget completes after the restart, never half-done: the
`streamrag forget` that waited reports it done with its anchored receipt, the version's
key and the transit keys of what was parsed before the request are destroyed, no copy of
the document opens on any topic, verify passes; and the same id written again after the
forget is answered (what is parsed after a request is sealed under a key it spares)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from services.cli.mesh import Endpoints
from shared.contract import forget
from shared.contract.records import Document, RedactedDocument
from shared.contract.sealed import Forgotten, KeyUnavailable, open_document
from shared.keys.sealing import key_id_for
from shared.keys.store import Destroyed
from tests.support.mesh import chunks_of, produce, read_topic, uid, wait_verified
from tests.support.polling import eventually
from tests.support.sealed import keys_of, opened_text
from tests.support.workers import alive, pid_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
WORDS = ("marrowquill", "fennicastle")  # one per document: no other document holds them
SEALED_TOPICS = ("docs.parsed.v1", "docs.normalized.v1", "docs.redacted.v1")


def version_keys(item: dict[str, Any]) -> list[str]:
    return [k for k in item["receipt"]["keys_destroyed"] if k.startswith("k")]


def transit_keys(item: dict[str, Any]) -> list[str]:
    return [k for k in item["receipt"]["keys_destroyed"] if k.startswith("t")]


def is_request(doc_id: str) -> Callable[[Any], bool]:
    """A record of `doc_id` that is its forget request or receipt."""
    def match(record: Any) -> bool:
        if record.key != doc_id.encode():
            return False
        meta = json.loads(record.value).get("metadata") or {}
        return forget.REQUEST in meta
    return match


class KillWhen(threading.Thread):
    """Tails `topic` from its end and kill -9s redaction at the first record that `match`es."""

    def __init__(self, mesh: Endpoints, topic: str, match: Callable[[Any], bool]) -> None:
        super().__init__(daemon=True)
        self.mesh, self.topic, self.match = mesh, topic, match
        self.ready, self.killed = threading.Event(), 0

    def run(self) -> None:
        asyncio.run(self._tail())

    async def _tail(self) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.mesh.bootstrap, group_id=None,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            cluster = await consumer._client.fetch_all_metadata()  # noqa: SLF001
            parts = [TopicPartition(self.topic, p)
                     for p in cluster.partitions_for_topic(self.topic) or ()]
            assert parts, self.topic
            consumer.assign(parts)
            await consumer.seek_to_end(*parts)
            for tp in parts:
                await consumer.position(tp)
            self.ready.set()
            while True:
                batches = await consumer.getmany(timeout_ms=200)
                if any(self.match(r) for records in batches.values() for r in records):
                    self.killed = pid_of(self.mesh, "redaction")
                    os.kill(self.killed, signal.SIGKILL)
                    return
        finally:
            await consumer.stop()


def forget_killing(mesh: Endpoints, doc_id: str, topic: str) -> dict[str, Any]:
    """`streamrag forget doc_id`, redaction killed when the request shows on `topic`."""
    killer = KillWhen(mesh, topic, is_request(doc_id))
    killer.start()
    assert killer.ready.wait(60), "the tail never started"
    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap}
    done = subprocess.run([sys.executable, "-m", "services.cli.main", "forget", doc_id,
                           "--by", "dpo@example.org", "--json", "--timeout", "400"],
                          capture_output=True, text=True, env=env, timeout=500, check=False)
    killer.join(5)
    assert killer.killed, f"the request never reached {topic}"
    eventually(lambda: (pid := pid_of(mesh, "redaction")) not in (0, killer.killed)
               and alive(pid), "redaction restarted", 120)
    assert done.returncode == 0, done.stdout + done.stderr
    [item] = json.loads(done.stdout)
    return item  # type: ignore[no-any-return]


def test_a_forget_survives_kill_9_of_redaction_at_either_side_of_its_receipt(
        mesh: Endpoints) -> None:
    ids = [uid("fcrash"), uid("fcrash")]
    produce(mesh, [json.dumps({"id": d, "source": "fcrash", "text":
                               f"The {w} ledger entry for the quarterly review."}).encode()
                   for d, w in zip(ids, WORDS, strict=True)])
    for d, w in zip(ids, WORDS, strict=True):
        eventually(lambda d=d, w=w: chunks_of(mesh, f"{w} ledger entry", d),
                   f"{d} answered", timeout_s=240)
    keys = keys_of(mesh)
    parsed = read_topic(mesh, SEALED_TOPICS[0])
    transit_before = {d: [k for r in parsed if r.key == d.encode()
                          if (k := json.loads(r.value)["key_id"])] for d in ids}
    assert all(transit_before.values())

    items = [forget_killing(mesh, ids[0], "docs.normalized.v1"),
             forget_killing(mesh, ids[1], "docs.redacted.v1")]
    for d, item in zip(ids, items, strict=True):
        assert item["done"] and item["tx_hash"].startswith("0x"), item
        assert version_keys(item) == [key_id_for(d, 1)], item
        assert set(transit_before[d]) <= set(transit_keys(item)), item
        assert isinstance(keys.get(d, 1), Destroyed)
        assert all(isinstance(keys.by_id(k), Destroyed) for k in transit_before[d])

    # Every receipt of a request names the same keys: a redo never forgets more or less.
    for d in ids:
        receipts = {json.dumps(forget.read_receipt(doc.metadata)["keys_destroyed"])
                    for r in read_topic(mesh, "docs.redacted.v1") if is_request(d)(r)
                    for doc in [RedactedDocument.model_validate_json(r.value)]}
        assert len(receipts) == 1, receipts

    # No copy opens: parsed, normalized and redacted records of both are sealed under
    # destroyed keys, and no topic outside the clear copies holds their words.
    for topic in SEALED_TOPICS:
        for r in read_topic(mesh, topic):
            cls = RedactedDocument if topic == "docs.redacted.v1" else Document
            doc = cls.model_validate_json(r.value)
            if doc.doc_id in ids and doc.sealed:
                with pytest.raises((Forgotten, KeyUnavailable)):
                    open_document(doc, keys)
            text = opened_text(mesh, r.value).encode()
            assert not any(w.encode() in text for w in WORDS), (topic, r.offset)
    eventually(lambda: not chunks_of(mesh, f"{WORDS[0]} ledger entry", ids[0])
               and not chunks_of(mesh, f"{WORDS[1]} ledger entry", ids[1]),
               "both gone from answers", timeout_s=120)
    wait_verified(mesh, "after the forgets and the kills", timeout_s=240)

    # The id written again after its forget is a new document, answered.
    produce(mesh, [json.dumps({"id": ids[0], "source": "fcrash",
                               "text": "A rewritten saltmarsh entry after the erasure."}).encode()])
    eventually(lambda: chunks_of(mesh, "rewritten saltmarsh entry", ids[0]),
               "the document written again answered", timeout_s=240)
