"""Redacted text the broker was told to expire is not missing evidence: verify reports such
leaves as expired and passes, proven by their signed records, while a text gone before its
retention could have taken it, or from a topic kept forever, is still unprovable."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.audit.documents import auditor
from services.audit.documents.evidence import Evidence, missing_sentence, retention_of
from services.audit.documents.verify import Report, TextRetention, verify
from shared.contract.audit_signing import DEV_SIGNER
from shared.contract.records import AuditBatch, RedactedDocument
from tests.unit.audit.documents.audit_history import KNOWN, chain_of, history, on_chain

CREATED = 1.0  # every batch of audit_history was recorded at t=1 s


def run(docs: list[RedactedDocument], batches: list[AuditBatch],
        text: TextRetention) -> Report:
    return verify(docs, batches, chain_of(batches).get, KNOWN, on_chain(batches), (), text)


def test_texts_past_their_retention_are_expired_and_verify_passes() -> None:
    docs, batches = history()
    old = {batches[0].batch_id, batches[3].batch_id}  # each partition's oldest batch
    report = run([d for d in docs if d.batch_id not in old], batches,
                 TextRetention(20_000, CREATED + 20.0))
    assert report.ok and not report.unprovable and report.chain_anchors == 6
    results = {b.batch_id: (b.result, sorted(b.expired)) for b in report.batches}
    for batch in batches:
        want = sorted(f"{x.doc_id}@v{x.version}" for x in batch.leaves)
        assert results[batch.batch_id] == (("expired", want) if batch.batch_id in old
                                           else ("ok", []))


def test_a_text_gone_before_its_retention_could_take_it_is_unprovable() -> None:
    docs, batches = history()
    gone = batches[4]
    report = run([d for d in docs if d.batch_id != gone.batch_id], batches,
                 TextRetention(20_000, CREATED + 19.999))
    assert not report.ok
    assert [u.batch_id for u in report.unprovable] == [gone.batch_id]
    assert report.batches[4].result == "unprovable" and report.batches[4].expired == []


def test_a_text_gone_from_a_topic_kept_forever_is_unprovable() -> None:
    docs, batches = history()
    del docs[5]
    report = run(docs, batches, TextRetention(None, 10**12))
    assert not report.ok and report.batches[1].result == "unprovable"


def test_a_forged_record_is_never_proven_by_expiry() -> None:
    docs, batches = history()
    forged = batches[1].model_copy(update={"signature": "0x" + "00" * 65})
    report = run([d for d in docs if d.batch_id != forged.batch_id],
                 [*batches[:1], forged, *batches[2:]], TextRetention(1, 10**12))
    assert not report.ok and report.batches[1].result == "failed"
    assert report.batches[1].expired == []


@given(retention_ms=st.integers(1, 10**10), age_ms=st.integers(0, 2 * 10**10))
def test_expired_exactly_when_the_retention_has_passed(retention_ms: int, age_ms: int) -> None:
    docs, batches = history()
    report = run([d for d in docs if d.batch_id != batches[2].batch_id], batches,
                 TextRetention(retention_ms, CREATED + age_ms / 1000))
    passed = CREATED + retention_ms / 1000 <= CREATED + age_ms / 1000
    assert report.batches[2].result == ("expired" if passed else "unprovable")
    assert report.ok is passed


def test_the_broker_s_retention_is_read_as_it_reports_it() -> None:
    assert retention_of({"retention.ms": "-1"}) is None
    assert retention_of({"retention.ms": "20000"}) == 20_000
    assert retention_of({}) is None
    assert retention_of({"retention.ms": "soon"}) is None


def test_the_verify_command_passes_with_expired_texts_and_says_so(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    docs, batches = history()
    kept = [d for d in docs if d.batch_id != batches[0].batch_id]
    monkeypatch.setattr(auditor, "read_evidence", lambda *_: Evidence(20_000))
    monkeypatch.setattr(auditor, "load", lambda *_: auditor.Loaded(kept, batches, [], []))
    monkeypatch.setattr(auditor, "chain_reader", lambda *_: chain_of(batches).get)
    monkeypatch.setattr(auditor, "read_chain",
                        lambda *_: auditor.ChainView(["0xC0"], on_chain(batches)))
    monkeypatch.setattr(auditor, "read_commits", lambda *_: {})
    monkeypatch.setattr(auditor, "time", SimpleNamespace(time=lambda: CREATED + 60.0))
    assert auditor.main(["verify", "--signer", DEV_SIGNER]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split(None, 3)[1:] for line in out.splitlines()[1:7]}
    assert rows[batches[0].batch_id] == [
        "0", "0", "expired: 3 redacted texts past their retention, leaves proven by the "
        "signed record"]
    assert [rows[b.batch_id][2] for b in batches[1:]] == ["ok"] * 5
    assert "6 batches (1 with their texts past retention, proven by their records)" in out
    assert auditor.main(["verify", "--signer", DEV_SIGNER, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["batches"][0]["result"] == "expired"
    # The same history a moment after it was recorded: that text cannot have expired yet.
    monkeypatch.setattr(auditor, "time", SimpleNamespace(time=lambda: CREATED + 1.0))
    assert auditor.main(["verify", "--signer", DEV_SIGNER]) == 1
    assert "1 UNPROVABLE (evidence missing)" in capsys.readouterr().out


def test_a_broker_without_the_evidence_topics_is_one_sentence_and_exit_2(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def lacking(*_: object) -> Evidence:
        raise auditor.EvidenceError(missing_sentence("127.0.0.1:1", ["audit.batches.v1"]))
    monkeypatch.setattr(auditor, "read_evidence", lacking)
    for command in (["verify"], ["prove", "some-doc"]):
        assert auditor.main(command) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.strip().splitlines()
        assert lines == [f"streamrag audit {command[0]}: the broker at 127.0.0.1:1 holds no "
                         "audit.batches.v1: the audit evidence is not there to verify (wrong "
                         "broker, or a mesh that never started on it; `streamrag topics` "
                         "creates the topics)"]
