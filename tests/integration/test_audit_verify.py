"""`streamrag audit` against the real mesh: a clean history verifies, proofs hold on chain,
and tampering with what was read from the real topics is caught."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from web3 import Web3

from services.audit.documents.auditor import chain_reader, load
from services.audit.documents.verify import verify
from services.cli.mesh import Endpoints as RunningMesh
from shared.contract.audit_signing import DEV_SIGNER
from shared.settings import KafkaSettings, LedgerSettings
from tests.support.mesh import produce, read_topic, streamrag_audit, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
VERIFY_PROOF = Path(__file__).resolve().parents[2] / "scripts" / "verify_proof"


@pytest.fixture(scope="module")
def anchored_docs(mesh: RunningMesh) -> list[str]:
    ids = [uid("audit") for _ in range(5)]
    produce(mesh, [json.dumps({"id": i, "source": "audit", "text": f"Audit trail entry {n}: "
                               f"Robert Miller approved change {n}."}).encode() for n, i in
                   enumerate(ids)])

    def all_anchored() -> bool:
        batches = [json.loads(r.value) for r in read_topic(mesh, "audit.batches.v1")]
        mine = {b["batch_id"] for b in batches for leaf in b["leaves"] if leaf["doc_id"] in ids}
        covered = {leaf["doc_id"] for b in batches for leaf in b["leaves"]
                   if b["batch_id"] in mine}
        done = {json.loads(r.value)["batch_id"] for r in read_topic(mesh, "ledger.anchors.v1")}
        return set(ids) <= covered and mine <= done
    eventually(all_anchored, "the audit batches to be anchored")
    return ids


def test_clean_history_verifies(mesh: RunningMesh, anchored_docs: list[str]) -> None:
    def clean() -> Any:
        code, report = streamrag_audit(mesh, "verify")
        return report if code == 0 else None  # batches of other tests may still be in flight
    report = eventually(clean, "`streamrag audit verify` to pass", timeout_s=90)
    assert report["ok"] and not report["orphans"]
    assert sum(b["docs"] for b in report["batches"]) >= len(anchored_docs)
    assert all(not b["problems"] for b in report["batches"])


def test_prove_gives_a_path_that_holds_and_its_anchor_tx(mesh: RunningMesh,
                                                         anchored_docs: list[str]) -> None:
    code, proof = streamrag_audit(mesh, "prove", anchored_docs[2])
    assert code == 0, proof
    assert proof["doc_id"] == anchored_docs[2] and proof["version"] == 1
    assert proof["checks"] == {"proof_holds": True, "redacted_matches_leaf": True,
                               "signed_by_known_signer": True, "anchor_on_chain_matches": True}
    assert proof["signer"] == DEV_SIGNER and proof["on_chain"]["signer"] == DEV_SIGNER
    assert 0 <= proof["leaf_index"] < proof["tree_size"]
    assert len(proof["path"]) <= (proof["tree_size"] - 1).bit_length()
    receipt = Web3(Web3.HTTPProvider(mesh.rpc_url)).eth.get_transaction_receipt(
        proof["anchor"]["tx_hash"])
    assert receipt["status"] == 1 and receipt["blockNumber"] == proof["anchor"]["block_number"]
    code, _ = streamrag_audit(mesh, "prove", "no-such-document")
    assert code == 2


def test_a_third_party_checks_the_proof_without_the_project(
        mesh: RunningMesh, anchored_docs: list[str]) -> None:
    """scripts/verify_proof imports nothing from streamrag; `python -I` keeps the project
    off its path, so only hashlib, eth-account and raw JSON-RPC do the checking."""
    code, proof = streamrag_audit(mesh, "prove", anchored_docs[3])
    assert code == 0, proof

    def third_party(p: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        done = subprocess.run(
            [sys.executable, "-I", str(VERIFY_PROOF), "--rpc-url", mesh.rpc_url,
             "--signer", DEV_SIGNER], input=json.dumps(p), capture_output=True, text=True,
            timeout=60, check=False, cwd="/")
        return done.returncode, json.loads(done.stdout)

    assert third_party(proof) == (0, {
        "ok": True, "leaf_is_this_document": True, "path_leads_to_root": True,
        "record_signed_by_trusted_signer": True, "chain_holds_root_count_and_signer": True,
        "anchor_tx_succeeded": True})
    other = "ab" * 32
    assert proof["redacted_content"][0] == "sealed"  # what the mesh writes now
    assert third_party({**proof, "redacted_content": ["", "edited", []]})[1][
        "leaf_is_this_document"] is False
    if proof["path"]:
        assert third_party({**proof, "path": [other, *proof["path"][1:]]})[1][
            "path_leads_to_root"] is False
    forged = {**proof, "root": other}  # a root nobody signed or anchored
    assert third_party(forged)[1]["record_signed_by_trusted_signer"] is False
    assert third_party(forged)[1]["chain_holds_root_count_and_signer"] is False


def test_tampering_with_real_records_is_caught(mesh: RunningMesh,
                                               anchored_docs: list[str]) -> None:
    data = load(KafkaSettings(bootstrap=mesh.bootstrap))
    docs = data.docs
    on_chain = chain_reader(LedgerSettings(rpc_url=mesh.rpc_url), data.anchors)
    target = next(d for d in docs if d.doc_id == anchored_docs[0])
    mine = [b for b in data.batches if b.batch_id == target.batch_id][:1]
    assert mine and on_chain(target.batch_id) is not None

    def problems_of(docs_in: list[Any], anchor_of: Any = on_chain) -> list[str]:
        report = verify(docs_in, mine, anchor_of, frozenset({DEV_SIGNER.lower()}))
        return report.batches[0].problems

    assert problems_of(docs) == []
    # Edited: its text, or the sealed text that stands for it on the topic.
    edit = ({"sealed": target.sealed[:-8] + "AAAAAAA="} if target.sealed else
            {"text": target.text + " edited"})
    changed = [d.model_copy(update=edit) if d is target else d for d in docs]
    assert problems_of(changed) == [f"changed {target.doc_id}@v1"]
    # A document that is gone is missing evidence, not tampering: unprovable, never ok.
    gone = verify([d for d in docs if d is not target], mine, on_chain,
                  frozenset({DEV_SIGNER.lower()})).batches[0]
    assert (gone.problems, gone.missing, gone.result) == ([], [f"{target.doc_id}@v1"],
                                                          "unprovable")
    assert problems_of(docs, lambda batch_id: None) == ["missing anchor"]
    # A redelivered copy of every document is recognised, not flagged.
    assert problems_of(docs + [d for d in docs if d.batch_id == target.batch_id]) == []
