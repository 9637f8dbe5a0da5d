"""`streamrag audit verify` against a real chain whose evidence was deleted: six batches
anchored on anvil by the real ledger client, then verified against an embedded broker whose
topics hold none of them, and then only some of them. Every anchored batch whose record or
documents are missing is reported unprovable with its block, and the command exits 1.

Its own broker and node (no services): the session mesh's topics stay untouched.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from services.audit.documents.verify import batch_key
from services.cli.mesh import free_port, spawn_broker
from services.cli.procs import stop
from services.ledger.chain import AnchorClient
from services.ledger.settings import LedgerServiceSettings
from shared.contract.topics import AUDIT_BATCHES, DOCS_REDACTED, LEDGER_ANCHORS
from shared.kafka.admin import ensure_topics
from shared.settings import KafkaSettings, LedgerSettings
from tests.support.anvil import Anvil, needs_anvil
from tests.unit.audit.documents.audit_history import history

pytestmark = [pytest.mark.integration, needs_anvil, pytest.mark.timeout(300)]


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    child = spawn_broker("127.0.0.1", port, tmp_path)
    try:
        asyncio.run(ensure_topics(KafkaSettings(bootstrap=f"127.0.0.1:{port}")))
        yield f"127.0.0.1:{port}"
    finally:
        stop([child], 10)


def produce(bootstrap: str, records: list[tuple[str, int, bytes, bytes]]) -> None:
    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            for topic, partition, key, value in records:
                await producer.send_and_wait(topic, value, key=key, partition=partition)
        finally:
            await producer.stop()
    asyncio.run(go())


def audit(bootstrap: str, anvil: Anvil, data_dir: Path, *args: str) -> tuple[int, Any]:
    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": bootstrap,
           "STREAMRAG_LEDGER_RPC_URL": anvil.url, "STREAMRAG_DATA_DIR": str(data_dir)}
    env.pop("STREAMRAG_LEDGER_CONTRACT_ADDRESS", None)
    done = subprocess.run([sys.executable, "-m", "services.cli.main", "audit", *args, "--json"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else done.stderr


def test_every_batch_whose_evidence_was_deleted_is_unprovable(
        anvil: Anvil, bootstrap: str, tmp_path: Path) -> None:
    docs, batches = history()
    data_dir = tmp_path / "data"
    client = AnchorClient.connect(LedgerSettings(rpc_url=anvil.url),
                                  LedgerServiceSettings(data_dir=data_dir))
    receipts = [client.anchor(b.batch_id, b.root, b.prev_root, len(b.leaves), signer=b.signer)
                for b in batches]
    blocks = {r.batch_id: r.block_number for r in receipts}

    # A fresh broker, every topic empty: the chain's six anchors are all unprovable.
    code, report = audit(bootstrap, anvil, data_dir, "verify")
    assert code == 1, report
    assert report["ok"] is False and report["batches"] == []
    assert report["chain"]["anchors"] == 6
    assert [u["block_number"] for u in report["unprovable"]] == sorted(blocks.values())
    assert {u["missing"] for u in report["unprovable"]} == {"no audit record on audit.batches.v1"}

    # Some evidence comes back: every record but batches 0 and 3, every document but
    # batch 4's, and the announcement of batch 0 (which names it; batch 3 stays a key).
    gone_record, gone_docs = {batches[0].batch_id, batches[3].batch_id}, batches[4].batch_id
    announce = receipts[0].record(batch_closed_at=1.0)
    produce(bootstrap, [
        *[(AUDIT_BATCHES.name, b.partition, str(b.partition).encode(),
           b.model_dump_json().encode()) for b in batches if b.batch_id not in gone_record],
        *[(DOCS_REDACTED.name, p, d.doc_id.encode(), d.model_dump_json().encode())
          for d in docs if d.batch_id not in gone_record | {gone_docs}
          for p in [next(b.partition for b in batches if b.batch_id == d.batch_id)]],
        (LEDGER_ANCHORS.name, 0, announce.batch_id.encode(), announce.model_dump_json().encode()),
    ])
    code, report = audit(bootstrap, anvil, data_dir, "verify")
    assert code == 1, report
    unprovable = {u["batch_id"]: (u["block_number"], u["missing"])
                  for u in report["unprovable"]}
    key3 = batch_key(batches[3].batch_id)
    assert set(unprovable) == {batches[0].batch_id, f"(unknown: key {key3})", gone_docs}
    assert unprovable[batches[0].batch_id][0] == blocks[batches[0].batch_id]
    assert unprovable[f"(unknown: key {key3})"][0] == blocks[batches[3].batch_id]
    assert unprovable[gone_docs] == (blocks[gone_docs], "3 of 3 redacted documents not on "
                                     "docs.redacted.v1: " + ", ".join(sorted(
                                         f"{x.doc_id}@v{x.version}"
                                         for x in batches[4].leaves)))
    results = {b["batch_id"]: (b["result"], b["block_number"]) for b in report["batches"]}
    assert results == {b.batch_id: ("unprovable" if b.batch_id == gone_docs else "ok",
                                    blocks[b.batch_id])
                       for b in batches if b.batch_id not in gone_record}
    # What is still there still proves.
    code, proof = audit(bootstrap, anvil, data_dir, "prove", batches[5].leaves[0].doc_id)
    assert code == 0 and all(proof["checks"].values()), proof
    # A document whose text is gone still proves from its batch's record: its leaf.
    code, proof = audit(bootstrap, anvil, data_dir, "prove", batches[4].leaves[2].doc_id)
    assert code == 0 and proof["text_held"] is False and proof["batch_id"] == gone_docs, proof
    assert proof["checks"]["proof_holds"] and proof["checks"]["anchor_on_chain_matches"]
