"""Bring-up's topic check: created with the settings' counts and replication, and an
existing topic of another count stops bring-up naming the topic, both counts and the fix."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.contract.topics import (
    AUDIT_BATCHES,
    CHUNKS_EMBEDDED,
    DEADLETTER,
    FEEDBACK,
    SEARCH_REQUESTS,
    all_topic_specs,
)
from shared.errors import InfrastructureError
from shared.kafka import admin
from shared.kafka.admin import new_topic, partition_problems, replication_problems
from shared.settings import KafkaSettings, PartitionSettings

SIX = all_topic_specs(PartitionSettings(partitions_documents=6))


class FakeAdmin:
    """The admin client calls ensure_topics makes, against topics planted by the test."""

    def __init__(self, topics: dict[str, tuple[int, int]]) -> None:
        self.topics = dict(topics)  # name -> (partitions, replicas)
        self.created: list[Any] = []
        self.refuse: dict[str, tuple[int, str | None]] = {}  # name -> (error code, message)

    async def list_topics(self) -> list[str]:
        return list(self.topics)

    async def create_topics(self, new: list[Any]) -> Any:
        self.created += new
        errors = [(t.name, *self.refuse.get(t.name, (0, None))) for t in new]
        for name, code, _ in errors:
            if code == 36:  # there all along: the listing lagged
                spec = next(t for t in new if t.name == name)
                self.topics[name] = (spec.num_partitions, spec.replication_factor)
        return SimpleNamespace(topic_errors=errors)

    async def describe_topics(self, names: list[str]) -> list[dict[str, Any]]:
        return [{"topic": n, "partitions": [{"partition": p, "replicas": [1] * self.topics[n][1]}
                                            for p in range(self.topics[n][0])]} for n in names]

    async def describe_configs(self, resources: list[Any]) -> list[Any]:
        return []  # no evidence topic is planted

    async def close(self) -> None:
        pass


def run_ensure(fake: FakeAdmin, kafka: KafkaSettings, specs: Any,
               monkeypatch: pytest.MonkeyPatch) -> list[str]:
    async def connected(*_: Any) -> FakeAdmin:
        return fake
    monkeypatch.setattr(admin, "_connected_admin", connected)
    return asyncio.run(admin.ensure_topics(kafka, specs))


def test_a_planted_count_mismatch_stops_bring_up_naming_topic_counts_and_the_grow_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    specs = tuple(s for s in SIX if s.name in (CHUNKS_EMBEDDED.name, SEARCH_REQUESTS.name))
    fake = FakeAdmin({CHUNKS_EMBEDDED.name: (4, 1), SEARCH_REQUESTS.name: (6, 1)})
    with pytest.raises(InfrastructureError) as raised:
        run_ensure(fake, KafkaSettings(), specs, monkeypatch)
    assert str(raised.value) == (
        "bring-up stopped, existing topics differ from the settings: "
        "STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS=6, but chunks.embedded.v1 has 4 partitions: run "
        "`streamrag topics --grow 6` (docs/design/growing-partitions.md), or set "
        "STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS=4")
    assert fake.created == []  # nothing created, nothing altered


def test_missing_topics_are_created_with_the_counts_replication_and_min_insync(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kafka = KafkaSettings(replication_factor=3, min_insync_replicas=2)
    specs = tuple(s for s in SIX if s.name in (CHUNKS_EMBEDDED.name, DEADLETTER.name,
                                                FEEDBACK.name))
    fake = FakeAdmin({FEEDBACK.name: (4, 3)})  # there already, as configured
    created = run_ensure(fake, kafka, specs, monkeypatch)
    assert created == [CHUNKS_EMBEDDED.name, DEADLETTER.name]
    made = {t.name: t for t in fake.created}
    assert {n: (t.num_partitions, t.replication_factor) for n, t in made.items()} == {
        CHUNKS_EMBEDDED.name: (6, 3), DEADLETTER.name: (1, 3)}
    assert {t.topic_configs["min.insync.replicas"] for t in fake.created} == {"2"}


def test_a_shrink_is_refused_since_kafka_cannot_remove_partitions() -> None:
    (problem,) = partition_problems(tuple(s for s in SIX if s.name == FEEDBACK.name),
                                    {FEEDBACK.name: 8})
    assert problem == (
        "STREAMRAG_KAFKA_PARTITIONS_TELEMETRY=4, but feedback.v1 has 8 partitions: Kafka "
        "cannot remove partitions: set STREAMRAG_KAFKA_PARTITIONS_TELEMETRY=8, or move the "
        "data to a new topic generation (.v2 topics created with 4)")


def test_one_line_per_group_and_count_naming_every_topic_in_it() -> None:
    found = {s.name: 1 if s.group == "single" else 4 for s in SIX}  # as made by default
    (problem,) = partition_problems(SIX, found)
    documents = [s.name for s in SIX if s.group == "documents"]
    assert problem.startswith(f"STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS=6, but "
                              f"{', '.join(documents)} have 4 partitions: run `streamrag "
                              f"topics --grow 6`")
    assert len(documents) == 10  # eight topics and ingest's two changelogs


@pytest.mark.parametrize(("spec", "advice"), [
    (DEADLETTER, "the contract says 1, but deadletter.v1 has 4 partitions: one reader must "
                 "see all of it: recreate it with one partition"),
    (AUDIT_BATCHES, "set STREAMRAG_KAFKA_PARTITIONS_AUDIT=2: `streamrag topics --grow` grows "
                    "the document topics only"),
    (FEEDBACK, "kafka-topics.sh --alter --partitions 4"),
])
def test_only_the_document_topics_are_sent_to_the_grow_command(spec: Any, advice: str) -> None:
    have = 4 if spec.group == "single" else 2
    (problem,) = partition_problems((spec,), {spec.name: have})
    assert advice in problem
    assert "--grow 4" not in problem


def test_topics_as_configured_have_no_problem_and_unknown_ones_are_not_judged() -> None:
    found = {s.name: s.partitions for s in SIX}
    assert partition_problems(SIX, found) == []
    assert partition_problems(SIX, {}) == []  # not described: created, not compared


def test_fewer_replicas_than_the_setting_is_a_problem_more_is_not() -> None:
    kafka = KafkaSettings(replication_factor=3, min_insync_replicas=2)
    specs = (CHUNKS_EMBEDDED, FEEDBACK)
    assert replication_problems(specs, {CHUNKS_EMBEDDED.name: 1, FEEDBACK.name: 5}, kafka) == [
        "topic chunks.embedded.v1 has 1 replicas, STREAMRAG_KAFKA_REPLICATION_FACTOR=3: add "
        "replicas with kafka-reassign-partitions.sh"]


def test_new_topic_keeps_the_contracts_configs_beside_min_insync() -> None:
    made = new_topic(AUDIT_BATCHES, KafkaSettings(replication_factor=3, min_insync_replicas=2))
    assert made.topic_configs == {**AUDIT_BATCHES.broker_config(), "min.insync.replicas": "2"}
    assert (made.num_partitions, made.replication_factor) == (4, 3)


@given(st.dictionaries(st.sampled_from([s.name for s in SIX]), st.integers(1, 12)))
def test_exactly_the_topics_unlike_their_spec_are_named_once_with_both_counts(
        found: dict[str, int]) -> None:
    problems = partition_problems(SIX, found)
    specs = {s.name: s for s in SIX}
    wrong = {n for n, have in found.items() if have != specs[n].partitions}
    assert bool(problems) == bool(wrong)
    named = [n for p in problems for n in p.split(", but ")[1].split(" ha")[0].split(", ")]
    assert sorted(named) == sorted(wrong)  # each once
    for line in problems:
        (name, *_) = line.split(", but ")[1].split(" ha")[0].split(", ")
        have = found[name]
        assert f" {have} partitions: " in line
        assert (f"={specs[name].partitions}, but " in line
                or line.startswith("the contract says 1, but "))


def test_a_topic_the_broker_says_exists_is_not_created_and_another_refusal_is_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Kafka's metadata can lag a creation a moment ago: list_topics misses the topic and
    # CreateTopics answers TOPIC_ALREADY_EXISTS (36); that is not a creation.
    fake = FakeAdmin({})
    specs = all_topic_specs()
    fake.refuse = {specs[0].name: (36, "Topic already exists.")}
    created = run_ensure(fake, KafkaSettings(), specs, monkeypatch)
    assert specs[0].name not in created
    assert set(created) == {s.name for s in specs[1:]}
    fake = FakeAdmin({})
    fake.refuse = {specs[1].name: (41, "Not controller")}
    with pytest.raises(InfrastructureError, match=f"{specs[1].name}: NotControllerError"):
        run_ensure(fake, KafkaSettings(), specs, monkeypatch)
