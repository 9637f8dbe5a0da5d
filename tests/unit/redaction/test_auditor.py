"""The auditor's view of the contract, and the `streamrag audit` command line."""

from __future__ import annotations

import json
from pathlib import Path

from services.redaction.auditor import ANCHORS_ABI, build_parser, render_proof
from shared.cli.main import build_parser as streamrag_parser
from tests.unit.redaction.test_verify import history

LEDGER_ABI = Path(__file__).resolve().parents[3] / "services/ledger/contract/AuditAnchor.json"


def test_anchor_view_is_the_committed_contract_abi() -> None:
    with open(LEDGER_ABI) as f:
        committed = [x for x in json.load(f)["abi"] if x.get("name") == "anchors"]
    assert committed == ANCHORS_ABI


def test_streamrag_audit_passes_its_arguments_through() -> None:
    args = streamrag_parser().parse_args(["audit", "prove", "incident-42", "--version", "2",
                                          "--json"])
    assert args.command == "audit"
    sub = build_parser().parse_args(args.audit_args)
    assert (sub.command, sub.doc_id, sub.version, sub.json) == ("prove", "incident-42", 2, True)


def test_rendered_proof_names_batch_path_and_anchor() -> None:
    from services.redaction.audit import prove
    batch = history()[1][1]
    proof = prove(batch, batch.leaves[2].doc_id)
    text = render_proof({
        "doc_id": proof.leaf.doc_id, "version": proof.leaf.version, "batch_id": batch.batch_id,
        "partition": 0, "tree_size": 3, "leaf_index": 2, "leaf_hash": proof.leaf_hash,
        "leaf": proof.leaf.model_dump(), "path": list(proof.path), "root": proof.root,
        "proof_holds": True, "redacted_matches_leaf": True, "anchor_on_chain_matches": False,
        "anchor": {"tx_hash": "0xabc", "block_number": 7, "contract": "0xC0", "chain_id": 31337}})
    assert f"batch     {batch.batch_id} (partition 0, 3 leaves)" in text
    assert f"          1. {proof.path[0]}" in text
    assert "anchor    tx 0xabc block 7 contract 0xC0 chain 31337" in text
    assert text.endswith("on chain  root, prev_root and leaf count: FAILED")
