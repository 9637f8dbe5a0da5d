"""Verify holds the topics to the chain: an anchored batch whose record or documents are
gone is "unprovable: evidence missing", named with its block, and never verified; an empty
topic over a chain that holds anchors fails."""

from __future__ import annotations

import json

import pytest

from services.audit.documents import auditor
from services.audit.documents.verify import ChainAnchor, Report, batch_key, verify
from shared.contract.audit_signing import DEV_SIGNER
from shared.contract.records import Anchor, AuditBatch, RedactedDocument
from tests.unit.audit.documents.audit_history import KNOWN, chain_of, history, on_chain


def run(docs: list[RedactedDocument], batches: list[AuditBatch],
        chain: list[ChainAnchor], names: tuple[str, ...] = ()) -> Report:
    return verify(docs, batches, chain_of(history()[1]).get, KNOWN, chain, names)


def test_a_clean_history_reconciles_with_every_anchor_on_chain() -> None:
    docs, batches = history()
    report = run(docs, batches, on_chain(batches))
    assert report.ok and not report.unprovable and report.chain_anchors == 6
    assert [b.block_number for b in report.batches] == [10, 11, 12, 13, 14, 15]


def test_an_empty_topic_over_a_chain_with_anchors_fails() -> None:
    _, batches = history()
    report = run([], [], on_chain(batches))
    assert not report.ok and report.batches == []
    assert [(u.block_number, u.missing) for u in report.unprovable] == [
        (10 + i, "no audit record on audit.batches.v1") for i in range(6)]
    # Nothing names them: the contract holds only sha256 of each batch id.
    assert report.unprovable[0].batch_id == f"(unknown: key {batch_key(batches[0].batch_id)})"


def test_an_announcement_names_a_batch_whose_record_is_gone() -> None:
    docs, batches = history()
    gone = batches[1]
    report = run([d for d in docs if d.batch_id != gone.batch_id],
                 [b for b in batches if b is not gone], on_chain(batches), (gone.batch_id,))
    assert [(u.batch_id, u.block_number, u.tx_hash) for u in report.unprovable] == [
        (gone.batch_id, 11, f"0x{1:064x}")]
    assert all(b.ok for b in report.batches)  # the rest still verify
    assert not report.ok


def test_a_batch_whose_documents_are_gone_is_unprovable_with_its_block() -> None:
    docs, batches = history()
    target = batches[4]
    report = run([d for d in docs if d.batch_id != target.batch_id], batches,
                 on_chain(batches))
    (u,) = report.unprovable
    leaves = sorted(f"{x.doc_id}@v{x.version}" for x in target.leaves)
    assert (u.batch_id, u.block_number) == (target.batch_id, 14)
    assert u.missing == f"3 of 3 redacted documents not on docs.redacted.v1: {', '.join(leaves)}"
    (b,) = [b for b in report.batches if not b.ok]
    assert (b.batch_id, b.result, b.problems, b.block_number) == (target.batch_id,
                                                                  "unprovable", [], 14)


def test_documents_gone_from_the_head_of_the_topic_as_retention_deletes_them() -> None:
    """Retention deletes each partition's oldest records: every batch before the cut is
    unprovable, every batch after it verifies (its prev_root links to a record still
    there, or to none: the first record left starts the chain seen)."""
    docs, batches = history()
    old = {batches[0].batch_id, batches[3].batch_id}
    report = run([d for d in docs if d.batch_id not in old],
                 [b for b in batches if b.batch_id not in old], on_chain(batches))
    assert {u.batch_id for u in report.unprovable} == {
        f"(unknown: key {batch_key(i)})" for i in old}
    assert all(b.ok for b in report.batches) and len(report.batches) == 4


def test_a_forged_record_in_place_of_the_anchored_one_is_unprovable_too() -> None:
    docs, batches = history()
    forged = batches[2].model_copy(update={"root": "cd" * 32})
    report = run(docs, [*batches[:2], forged, *batches[3:]], on_chain(batches))
    assert [(u.batch_id, u.missing) for u in report.unprovable] == [
        (forged.batch_id, "no authentic audit record on audit.batches.v1")]
    assert report.batches[2].result == "failed"


def test_anchors_of_other_signers_are_not_the_deployment_s() -> None:
    """read_anchors keeps only the known signers' events; verify trusts what it is given."""
    docs, batches = history()
    assert run(docs, batches, on_chain(batches)[:3]).ok  # a chain that holds only some


def test_the_verify_command_reports_unprovable_batches_and_exits_non_zero(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    docs, batches = history()
    chain = on_chain(batches)
    announced = [Anchor(batch_id=batches[0].batch_id, root=batches[0].root, tx_hash="0x1",
                        block_number=10, contract="0xC0", chain_id=1, anchored_at=1.0,
                        batch_closed_at=1.0)]
    monkeypatch.setattr(auditor, "load", lambda *_: auditor.Loaded([], [], announced, []))
    monkeypatch.setattr(auditor, "chain_reader", lambda *_: chain_of(batches).get)
    monkeypatch.setattr(auditor, "read_chain", lambda *_: auditor.ChainView(["0xC0"], chain))
    monkeypatch.setattr(auditor, "read_commits", lambda *_: {})  # nothing consumed
    assert auditor.main(["verify", "--signer", DEV_SIGNER]) == 1
    out = capsys.readouterr().out
    assert (f"unprovable: evidence missing: batch {batches[0].batch_id} (block 10, "
            f"tx 0x{0:064x}): no audit record on audit.batches.v1") in out
    assert "chain: 6 anchors of the known signers on 0xC0" in out
    assert out.rstrip().endswith("0 batches, 0 documents, 0 redelivered copies of unfinished "
                                 "batches: 6 UNPROVABLE (evidence missing)")
    assert auditor.main(["verify", "--signer", DEV_SIGNER, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["chain"] == {"contracts": ["0xC0"], "anchors": 6}
    assert [u["block_number"] for u in report["unprovable"]] == list(range(10, 16))


def test_verify_never_passes_without_the_chain(capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auditor, "load", lambda *_: auditor.Loaded([], [], [], []))
    monkeypatch.setattr(auditor, "read_chain", lambda *_: auditor.ChainView([], []))
    monkeypatch.setattr(auditor, "read_commits", lambda *_: {})  # nothing consumed
    assert auditor.main(["verify"]) == 1
    out = capsys.readouterr().out
    assert "chain: NOT READ: no AuditAnchor contract known" in out
    assert out.rstrip().endswith("1 FAILED")


def test_the_contract_comes_from_the_flag_the_setting_the_record_and_announcements(
        tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.settings import LedgerSettings
    record = tmp_path / "ledger" / "contract.json"  # type: ignore[operator]
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"address": "0x" + "bb" * 20}))
    monkeypatch.setenv("STREAMRAG_DATA_DIR", str(tmp_path))
    seen: list[list[str]] = []
    monkeypatch.setattr(auditor, "read_anchors",
                        lambda _w3, cs, _k: seen.append(cs) or [])
    announced = [Anchor(batch_id="b", root="00", tx_hash="0x1", block_number=1,
                        contract="0x" + "cc" * 20, chain_id=1, anchored_at=1.0,
                        batch_closed_at=1.0)]
    view = auditor.read_chain(LedgerSettings(contract_address="0x" + "aa" * 20), announced,
                              KNOWN, "0x" + "dd" * 20)
    assert [c.lower() for c in view.contracts] == ["0x" + x * 20 for x in ("dd", "aa", "bb",
                                                                            "cc")]
    assert seen == [view.contracts]


def test_prove_works_from_the_audit_record_when_the_text_is_no_longer_held(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A document forgotten on a deletion request (or past retention): the leaf commits to
    the hash of its redacted text, not the text, so the record alone proves the leaf."""
    docs, batches = history()
    leaf = batches[4].leaves[1]
    held = [d for d in docs if d.doc_id != leaf.doc_id]
    forged = batches[5].model_copy(update={"leaves": (*batches[5].leaves, leaf.model_copy(
        update={"doc_id": "only-forged"}))})
    monkeypatch.setattr(auditor, "load", lambda *_: auditor.Loaded(
        held, [*batches, forged], [], []))
    monkeypatch.setattr(auditor, "chain_reader", lambda *_: chain_of(batches).get)
    assert auditor.main(["prove", leaf.doc_id, "--signer", DEV_SIGNER, "--json"]) == 0
    proof = json.loads(capsys.readouterr().out)
    assert (proof["batch_id"], proof["version"], proof["text_held"],
            proof["redacted_content"]) == (batches[4].batch_id, leaf.version, False, None)
    assert proof["leaf"]["redacted_sha256"] == leaf.redacted_sha256
    assert proof["checks"] == {"proof_holds": True, "redacted_matches_leaf": None,
                               "signed_by_known_signer": True, "anchor_on_chain_matches": True}
    assert auditor.main(["prove", leaf.doc_id, "--signer", DEV_SIGNER]) == 0
    assert "redacted  text not held on docs.redacted.v1 (forgotten or past retention)" in \
        capsys.readouterr().out
    # Only an authentic record proves a leaf; nothing else names this one.
    assert auditor.main(["prove", "only-forged", "--signer", DEV_SIGNER]) == 2
