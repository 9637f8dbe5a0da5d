"""The audit retention governs every topic a proof needs, and only those; bring-up names an
evidence topic the broker keeps for less."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.contract.retention import AuditRetentionSettings
from shared.contract.topics import (
    AUDIT_BATCHES,
    AUDIT_QUERIES,
    CHUNKS,
    DOCS_NORMALIZED,
    DOCS_REDACTED,
    FOREVER,
    LEDGER_ANCHORS,
    TOPICS,
    WEEK_MS,
)
from shared.kafka.admin import contract_specs, evidence_config_problems


def test_the_evidence_topics_are_what_a_proof_reads() -> None:
    assert {t.name for t in TOPICS if t.evidence} == {
        DOCS_REDACTED.name, AUDIT_BATCHES.name, AUDIT_QUERIES.name, LEDGER_ANCHORS.name}


def test_evidence_is_kept_forever_by_default_by_time_and_size() -> None:
    assert AuditRetentionSettings().retention_ms == FOREVER
    for spec in contract_specs(AuditRetentionSettings()):
        if spec.evidence:
            cfg = spec.broker_config()
            assert (cfg["cleanup.policy"], cfg["retention.ms"], cfg["retention.bytes"]) == (
                "delete", "-1", "-1"), spec.name


def test_the_setting_sets_the_evidence_topics_and_leaves_the_others_alone() -> None:
    days_400 = 400 * 86_400_000
    specs = {s.name: s for s in contract_specs(AuditRetentionSettings(retention_ms=days_400))}
    assert {n for n, s in specs.items() if s.retention_ms == days_400} == {
        DOCS_REDACTED.name, AUDIT_BATCHES.name, AUDIT_QUERIES.name, LEDGER_ANCHORS.name}
    assert specs[DOCS_NORMALIZED.name].broker_config()["retention.ms"] == str(WEEK_MS)
    assert "retention.bytes" not in specs[DOCS_NORMALIZED.name].broker_config()
    assert "retention.ms" not in specs[CHUNKS.name].broker_config()  # compacted


def test_the_setting_is_read_from_the_environment_and_checked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRAG_AUDIT_RETENTION_MS", "7776000000")
    assert AuditRetentionSettings().retention_ms == 7_776_000_000
    assert AuditRetentionSettings().describe() == "90 days (7776000000 ms)"
    for bad in ("0", "-2", "soon"):
        monkeypatch.setenv("STREAMRAG_AUDIT_RETENTION_MS", bad)
        with pytest.raises(ValidationError, match="retention_ms"):
            AuditRetentionSettings()


def test_an_existing_evidence_topic_kept_for_less_is_named() -> None:
    spec = contract_specs(AuditRetentionSettings())[TOPICS.index(AUDIT_BATCHES)]
    assert evidence_config_problems(spec, {"cleanup.policy": "delete", "retention.ms": "-1",
                                           "retention.bytes": "-1"}) == []
    assert evidence_config_problems(spec, {"cleanup.policy": "delete",
                                           "retention.ms": str(WEEK_MS)}) == [
        f"audit.batches.v1 has retention.ms={WEEK_MS}, the audit retention needs -1",
        "audit.batches.v1 has retention.bytes=(not set), the audit retention needs -1"]
    assert evidence_config_problems(spec, {"cleanup.policy": "compact", "retention.ms": "-1",
                                           "retention.bytes": "-1"}) == [
        "audit.batches.v1 has cleanup.policy=compact, the audit retention needs delete"]
