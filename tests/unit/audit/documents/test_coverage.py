"""Redaction's input reconciled with its audit leaves and dead letters: every record below
the committed offset has one or the other, or is named lost; past the committed offset it
is in flight; where evidence may be gone it is unreconciled, never lost."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from pydantic import SecretStr

from services.audit.documents import auditor, inputs
from services.audit.documents.coverage import (
    Coverage,
    Gap,
    Input,
    describe,
    expired,
    reconcile_inputs,
    record_gone,
)
from services.audit.documents.verify import Report, Unprovable
from shared.contract.audit_signing import DEV_SIGNER, sign
from shared.contract.records import AuditBatch, DeadLetter
from shared.kafka.offsets import Committed
from tests.unit.audit.documents.audit_history import KNOWN, chain_of, history

GROUP = "streamrag-redaction"
T0 = 1_700_000_000_000  # when the inputs were written (ms)


def letter(partition: int, offset: int, topic: str = "docs.normalized.v1") -> DeadLetter:
    return DeadLetter(stage="redaction", reason="malformed_json", source_topic=topic,
                      partition=partition, offset=offset, payload_sha256="0", payload_size=0,
                      at=1.0)


def planted() -> tuple[list[Input], list[AuditBatch], list[DeadLetter]]:
    """Partition 0 as redaction left it: offsets 0-2 audited (history's first batch), 3-4
    dead-lettered, 5 skipped by hand (a commit passed it, nothing names it), 6 not a
    document and dead-lettered, 7 not yet reached."""
    batches = [b for b in history()[1] if b.partition == 0][:1]
    audited = [Input(0, x.offset, T0 + x.offset, x.doc_id, x.version) for x in batches[0].leaves]
    rest = [Input(0, 3, T0 + 3, "bad-3", 1), Input(0, 4, T0 + 4, "bad-4", 2),
            Input(0, 5, T0 + 5, "skipped", 3), Input(0, 6, T0 + 6), Input(0, 7, T0 + 7, "next", 1)]
    return audited + rest, batches, [letter(0, 3), letter(0, 4), letter(0, 6)]


def test_every_input_below_the_commit_is_audited_dead_lettered_or_named_lost() -> None:
    found, batches, letters = planted()
    c = reconcile_inputs(found, {0: Committed(GROUP, 7)}, batches, letters)
    assert (c.checked, c.audited, c.dead_lettered, c.in_flight) == (7, 3, 3, 1)
    assert c.lost == [Gap("skipped", 3, "docs.normalized.v1", 0, 5, GROUP, 7)]
    assert not c.unreconciled and not c.ok
    assert c.lost[0].name() == "skipped@v3 at docs.normalized.v1/0@5"


def test_records_at_or_past_the_committed_offset_are_in_flight_not_lost() -> None:
    found, batches, letters = planted()
    c = reconcile_inputs(found, {0: Committed(GROUP, 5)}, batches, letters)
    assert c.ok and (c.checked, c.in_flight) == (5, 3)
    # No commit on a partition at all: everything there is in flight.
    c = reconcile_inputs(found, {1: Committed(GROUP, 99)}, batches, letters)
    assert c.ok and (c.checked, c.in_flight) == (0, 8)


def test_a_leaf_or_letter_must_name_that_very_record() -> None:
    found, batches, _ = planted()
    # A leaf at the same offset of another partition, or naming another version, covers
    # nothing; nor does a dead letter of another topic.
    moved = [b.model_copy(update={"partition": 1}) for b in batches]
    c = reconcile_inputs(found[:3], {0: Committed(GROUP, 3)}, moved, [])
    assert [g.offset for g in c.lost] == [0, 1, 2]
    other = [Input(0, 0, T0, found[0].doc_id, (found[0].version or 0) + 1)]
    assert reconcile_inputs(other, {0: Committed(GROUP, 1)}, batches, []).lost
    elsewhere = [letter(0, 5, "docs.redacted.v1")]
    assert [g.offset for g in reconcile_inputs(found, {0: Committed(GROUP, 6)}, batches,
                                               elsewhere).lost] == [3, 4, 5]


def test_missing_evidence_makes_an_input_unreconciled_not_lost() -> None:
    found, batches, letters = planted()
    gone = [record_gone("e1/docs.normalized.v1/0/5-5", 12)]
    c = reconcile_inputs(found, {0: Committed(GROUP, 7)}, batches, letters, gone)
    assert c.ok and not c.lost
    assert [(g.offset, g.why) for g in c.unreconciled] == [
        (5, "anchored batch e1/docs.normalized.v1/0/5-5 (block 12) has no authentic audit "
            "record")]
    # An anchored batch nobody names could have held any input; another partition's, not.
    assert record_gone("(unknown: key ab)", 3).could_hold(found[5])
    assert not record_gone("e1/docs.normalized.v1/1/0-9", 3).could_hold(found[5])


def test_expired_evidence_covers_only_inputs_written_before_what_is_still_held() -> None:
    assert expired("deadletter.v1", {}) is None  # every partition still starts at 0
    held = expired("deadletter.v1", {0: T0 + 5, 2: T0 + 3})
    assert held is not None and held.before_ms == T0 + 5  # the latest of the first held
    found, batches, _ = planted()
    c = reconcile_inputs(found, {0: Committed(GROUP, 7)}, batches, [], [held])
    # Offsets 3 and 4 were written before the dead letters still held: theirs may have
    # expired. Offsets 5 and 6 were written after it: theirs would still be there.
    assert [g.offset for g in c.unreconciled] == [3, 4]
    assert [g.offset for g in c.lost] == [5, 6]
    assert "deadletter.v1 no longer holds records written before 2023-11-14T22:13:20" in \
        c.unreconciled[0].why
    emptied = expired("audit.batches.v1", {1: None})  # a partition that holds nothing now
    assert emptied is not None and emptied.before_ms == math.inf


def test_the_report_names_every_lost_input_and_the_totals() -> None:
    found, batches, letters = planted()
    lines = describe(reconcile_inputs(found, {0: Committed(GROUP, 7)}, batches, letters))
    assert lines == [
        "lost: skipped@v3 at docs.normalized.v1/0@5: streamrag-redaction committed past it "
        "(to 7) and it has neither an audit leaf nor a dead letter",
        "inputs: 7 records of docs.normalized.v1 below the offsets streamrag-redaction "
        "committed: 3 audited, 3 dead-lettered, 1 LOST, 0 unreconciled; 1 in flight"]
    assert describe(Coverage(not_checked="refused")) == ["inputs: NOT RECONCILED: refused"]


def test_forged_audit_records_account_for_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    found, batches, letters = planted()
    forged = sign(batches[0], SecretStr("0x" + "42" * 32))

    async def read(_: Any) -> Any:
        return found, letters, {"audit.batches.v1": {}, "deadletter.v1": {}}
    monkeypatch.setattr(inputs, "_read", read)
    commits = {0: Committed(GROUP, 7)}
    c = inputs.read_coverage(None, commits, [forged], Report([], []), KNOWN)  # type: ignore[arg-type]
    assert [g.offset for g in c.lost] == [0, 1, 2, 5]
    gone = Report([], [], unprovable=[Unprovable(batches[0].batch_id, 9, "0x1", "no record")])
    c = inputs.read_coverage(None, commits, [forged], gone, KNOWN)  # type: ignore[arg-type]
    assert [g.offset for g in c.unreconciled] == [0, 1, 2] and [g.offset for g in c.lost] == [5]
    assert inputs.read_coverage(None, {}, [], Report([], []), KNOWN).checked == 0  # type: ignore[arg-type]


def test_verify_fails_naming_a_lost_input_with_a_reason_for_scripts(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    docs, batches = history()
    found, _, letters = planted()
    monkeypatch.setattr(auditor, "load", lambda *_: auditor.Loaded(docs, batches, [], []))
    monkeypatch.setattr(auditor, "chain_reader", lambda *_: chain_of(batches).get)
    monkeypatch.setattr(auditor, "read_chain", lambda *_: auditor.ChainView(["0xC0"], []))
    monkeypatch.setattr(auditor, "read_commits", lambda *_: {0: Committed(GROUP, 7)})
    monkeypatch.setattr(auditor, "read_coverage", lambda _, commits, b, *__: reconcile_inputs(
        found, commits, b, letters))
    assert auditor.main(["verify", "--signer", DEV_SIGNER, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["reasons"] == ["lost_inputs"]
    assert [(g["doc_id"], g["version"], g["topic"], g["partition"], g["offset"], g["group"])
            for g in report["inputs"]["lost"]] == [
        ("skipped", 3, "docs.normalized.v1", 0, 5, GROUP)]
    assert auditor.main(["verify", "--signer", DEV_SIGNER]) == 1
    out = capsys.readouterr().out
    assert "lost: skipped@v3 at docs.normalized.v1/0@5" in out
    assert out.rstrip().endswith("1 LOST (inputs committed past with neither an audit leaf "
                                 "nor a dead letter)")
    # Once the skipped record is audited after all (here: dead-lettered), verify passes.
    monkeypatch.setattr(auditor, "read_coverage", lambda _, commits, b, *__: reconcile_inputs(
        found, commits, b, [*letters, letter(0, 5)]))
    assert auditor.main(["verify", "--signer", DEV_SIGNER, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["reasons"] == [] and report["inputs"]["checked"] == 7


def test_a_principal_refused_the_input_topic_is_told_so_and_nothing_is_called_lost(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    docs, batches = history()
    monkeypatch.setattr(auditor, "load", lambda *_: auditor.Loaded(docs, batches, [], []))
    monkeypatch.setattr(auditor, "chain_reader", lambda *_: chain_of(batches).get)
    monkeypatch.setattr(auditor, "read_chain", lambda *_: auditor.ChainView(["0xC0"], []))

    def refused(*_: Any) -> Any:
        raise inputs.RefusedError("the broker refused it")
    monkeypatch.setattr(auditor, "read_commits", refused)
    assert auditor.main(["verify", "--signer", DEV_SIGNER]) == 0
    out = capsys.readouterr().out
    assert "inputs: NOT RECONCILED: committed offsets not read: the broker refused it" in out
    assert out.rstrip().endswith("all verified; inputs NOT RECONCILED")
