"""The auditor's view of the contract, and the `streamrag audit` command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from services.audit.documents import auditor
from services.audit.documents.auditor import build_parser, proof_document, render_proof
from services.audit.onchain import ANCHORED_ABI, ANCHORS_ABI
from services.cli.main import build_parser as streamrag_parser
from shared.contract.audit_signing import DEV_SIGNER, DEV_SIGNING_KEY, sign
from shared.contract.records import Anchor
from tests.unit.audit.documents.audit_history import KNOWN, chain_of, history

LEDGER_ABI = Path(__file__).resolve().parents[4] / "services/ledger/contract/AuditAnchor.json"


def test_anchor_view_is_the_committed_contract_abi() -> None:
    with open(LEDGER_ABI) as f:
        committed = [x for x in json.load(f)["abi"] if x.get("name") == "anchors"]
    assert committed == ANCHORS_ABI
    with open(LEDGER_ABI) as f:
        (event,) = [x for x in json.load(f)["abi"] if x.get("name") == "Anchored"]
    assert event == ANCHORED_ABI


def test_streamrag_audit_passes_its_arguments_through() -> None:
    args = streamrag_parser().parse_args(["audit", "prove", "incident-42", "--version", "2",
                                          "--json"])
    assert args.command == "audit"
    sub = build_parser().parse_args(args.audit_args)
    assert (sub.command, sub.doc_id, sub.version, sub.json) == ("prove", "incident-42", 2, True)


def test_rendered_proof_names_batch_path_signer_and_anchor() -> None:
    _, batches = history()
    batch = batches[1]
    doc = next(d for d in history()[0] if d.doc_id == batch.leaves[2].doc_id)
    anchor = Anchor(batch_id=batch.batch_id, root=batch.root, tx_hash="0xabc", block_number=7,
                    contract="0xC0", chain_id=31337, anchored_at=2.0, batch_closed_at=1.0)
    held = (batch.root, batch.prev_root, len(batch.leaves), "0x" + "00" * 20)
    out = proof_document(doc, batch, [anchor], lambda _: held, KNOWN)
    assert out["checks"] == {"proof_holds": True, "redacted_matches_leaf": True,
                             "signed_by_known_signer": True,
                             "anchor_on_chain_matches": False}  # the signer on chain differs
    assert (out["tx_hash"], out["contract"], out["signer"]) == ("0xabc", "0xC0", DEV_SIGNER)
    assert bytes.fromhex(out["leaf_bytes_hex"]).decode() == out["leaf_bytes"]
    text = render_proof(out)
    assert f"batch     {batch.batch_id} (partition 0, 3 leaves)" in text
    assert f"          1. {out['path'][0]}" in text
    assert f"signed    by {DEV_SIGNER}: ok" in text
    assert "anchor    tx 0xabc block 7 contract 0xC0 chain 31337" in text
    assert text.endswith("on chain  root, prev_root, leaf count and signer: FAILED")


def test_verify_prints_each_problem_and_counts_redeliveries(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    docs, batches = history()
    again = sign(batches[0].model_copy(update={"created_at": 9.0}), SecretStr(DEV_SIGNING_KEY))
    rival = sign(batches[4].model_copy(update={"root": "ab" * 32}), SecretStr("0x" + "42" * 32))
    held = chain_of(batches)
    monkeypatch.setattr(auditor, "load", lambda *_: auditor.Loaded(
        docs + docs[:1], [*batches, again, rival], [], ["audit.batches.v1 0/9: malformed_json"]))
    monkeypatch.setattr(auditor, "chain_reader", lambda *_: held.get)
    monkeypatch.setattr(auditor, "read_chain", lambda *_: auditor.ChainView(["0xC0"], []))
    monkeypatch.setattr(auditor, "read_commits", lambda *_: {})  # nothing consumed
    code = auditor.main(["verify", "--signer", DEV_SIGNER])
    out = capsys.readouterr().out
    assert code == 1
    assert f"{batches[0].batch_id}" in out and "ok (2 redelivered copies)" in out
    assert (f"conflicting record for this batch id: differs in root, signer; unknown signer "
            f"{rival.signer}") in out
    assert "unreadable: audit.batches.v1 0/9: malformed_json" in out
    assert out.rstrip().endswith("2 FAILED")
