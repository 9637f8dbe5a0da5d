"""The audit retention governs every topic a proof needs, and only those; the text retention
every topic that carries a document's text; bring-up names an evidence topic the broker
keeps for less, and a text topic it keeps for longer."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.contract.retention import DAY_MS, AuditRetentionSettings
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
from shared.kafka.admin import contract_specs, evidence_config_problems, text_config_problems


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
    # Unredacted text keeps the raw retention (a day by default), not the audit's.
    assert specs[DOCS_NORMALIZED.name].broker_config()["retention.ms"] == str(DAY_MS)
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


def test_the_text_retention_reaches_every_copy_of_the_text_and_nothing_else() -> None:
    specs = {s.name: s for s in contract_specs(
        AuditRetentionSettings(retention_ms=FOREVER, text_retention_ms=60_000))}
    texts = {n for n, s in specs.items() if s.text}
    # Every topic whose records carry a document's words, raw, redacted or chunked, and
    # the keys of who the words mention (the subject index).
    assert texts == {"docs.raw.v1", "docs.parsed.v1", "docs.normalized.v1", "docs.redacted.v1",
                     "pii.subjects.v1", "chunks.v1", "chunks.embedded.v1",
                     "search.replies.v1", "deadletter.raw.v1"}
    for name in texts:
        cfg = specs[name].broker_config()
        assert cfg["retention.ms"] == "60000" and cfg["segment.ms"] == "60000", name
        assert "delete" in cfg["cleanup.policy"].split(","), name
    # The compacted chunk topics keep each document's newest version, and none past its age.
    assert specs[CHUNKS.name].broker_config()["cleanup.policy"] == "compact,delete"
    assert specs["pii.subjects.v1"].broker_config()["cleanup.policy"] == "compact,delete"
    for kept in (AUDIT_BATCHES, AUDIT_QUERIES, LEDGER_ANCHORS):  # what proves the leaves
        assert specs[kept.name].broker_config()["retention.ms"] == str(FOREVER)
    others = {n: s.broker_config() for n, s in specs.items() if not s.text}
    plain = {n: s.broker_config() for n, s in
             ((s.name, s) for s in contract_specs(AuditRetentionSettings(retention_ms=FOREVER)))
             if not s.text}
    assert others == plain  # the text retention changes no topic without text
    unset = {s.name: s for s in contract_specs(AuditRetentionSettings(retention_ms=90_000))}
    assert unset[DOCS_REDACTED.name].retention_ms == 90_000  # unset: the audit retention
    assert unset[DOCS_NORMALIZED.name].broker_config()["retention.ms"] == str(DAY_MS)
    assert unset[CHUNKS.name].broker_config()["cleanup.policy"] == "compact"


def test_a_text_retention_longer_than_a_topic_s_own_keeps_the_shorter() -> None:
    two_weeks = 2 * WEEK_MS
    specs = {s.name: s for s in contract_specs(
        AuditRetentionSettings(retention_ms=FOREVER, text_retention_ms=two_weeks))}
    assert specs[DOCS_NORMALIZED.name].broker_config()["retention.ms"] == str(DAY_MS)
    assert specs["search.replies.v1"].broker_config()["retention.ms"] == str(3_600_000)
    assert specs[CHUNKS.name].broker_config()["retention.ms"] == str(two_weeks)


def test_an_existing_text_topic_that_would_outlive_the_text_retention_is_named() -> None:
    specs = {s.name: s for s in contract_specs(
        AuditRetentionSettings(retention_ms=FOREVER, text_retention_ms=60_000))}
    assert text_config_problems(specs[CHUNKS.name], {"cleanup.policy": "compact,delete",
                                                    "retention.ms": "60000"}) == []
    assert text_config_problems(specs[CHUNKS.name], {"cleanup.policy": "compact"}) == [
        "chunks.v1 has cleanup.policy=compact, the text retention needs compact,delete",
        "chunks.v1 has retention.ms=(not set), the text retention needs at most 60000"]
    assert text_config_problems(specs[DOCS_NORMALIZED.name], {
        "cleanup.policy": "delete", "retention.ms": str(WEEK_MS)}) == [
        f"docs.normalized.v1 has retention.ms={WEEK_MS}, the text retention needs at most 60000"]
    assert text_config_problems(specs[DOCS_NORMALIZED.name], {
        "cleanup.policy": "delete", "retention.ms": "30000"}) == []  # shorter is fine
    forever = {s.name: s for s in contract_specs(AuditRetentionSettings())}
    assert text_config_problems(forever[DOCS_NORMALIZED.name], {"retention.ms": "-1"}) == []


def test_a_finite_retention_rolls_segments_within_it_so_records_can_expire() -> None:
    specs = {s.name: s for s in contract_specs(
        AuditRetentionSettings(retention_ms=FOREVER, text_retention_ms=8_000))}
    assert specs[DOCS_REDACTED.name].broker_config()["segment.ms"] == "8000"
    assert "segment.ms" not in specs[AUDIT_BATCHES.name].broker_config()  # forever: no roll
    assert specs[DOCS_NORMALIZED.name].broker_config()["segment.ms"] == "8000"
    unset = {s.name: s for s in contract_specs(AuditRetentionSettings())}
    assert unset[DOCS_NORMALIZED.name].broker_config()["segment.ms"] == str(DAY_MS)
    assert "segment.ms" not in unset[CHUNKS.name].broker_config()  # compacted, no expiry


@pytest.mark.parametrize("bad", ["0", "-5"])
def test_a_text_retention_that_keeps_nothing_is_refused_by_name(
        bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRAG_AUDIT_TEXT_RETENTION_MS", bad)
    with pytest.raises(ValidationError, match="STREAMRAG_AUDIT_TEXT_RETENTION_MS"):
        AuditRetentionSettings()


def test_the_client_s_raw_bytes_are_kept_a_day_by_default_and_as_set(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The client's bytes and the unredacted copies ingest makes of them.
    raw = {"docs.raw.v1", "deadletter.raw.v1", "docs.parsed.v1", "docs.normalized.v1"}
    specs = {s.name: s for s in contract_specs(AuditRetentionSettings())}
    assert {n for n, s in specs.items() if s.raw} == raw
    for name in raw:
        assert specs[name].broker_config()["retention.ms"] == str(24 * 3_600_000)
    assert specs[DOCS_REDACTED.name].broker_config()["retention.ms"] == str(FOREVER)
    monkeypatch.setenv("STREAMRAG_RAW_RETENTION_MS", "7200000")
    specs = {s.name: s for s in contract_specs(AuditRetentionSettings())}
    assert {specs[n].broker_config()["retention.ms"] for n in raw} == {"7200000"}
    # A shorter text retention still wins: no copy of the text outlives it.
    monkeypatch.setenv("STREAMRAG_AUDIT_TEXT_RETENTION_MS", "60000")
    specs = {s.name: s for s in contract_specs(AuditRetentionSettings())}
    assert {specs[n].broker_config()["retention.ms"] for n in raw} == {"60000"}
    monkeypatch.setenv("STREAMRAG_RAW_RETENTION_MS", "0")
    with pytest.raises(ValidationError, match="STREAMRAG_RAW_RETENTION_MS"):
        AuditRetentionSettings()
