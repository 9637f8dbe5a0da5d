"""Shuffled, duplicated Debezium changes through the real mesh: only the newest is indexed."""

from __future__ import annotations

import json
import random

import pytest

from services.cli.mesh import Endpoints as RunningMesh
from tests.support.mesh import produce, read_topic, uid
from tests.support.polling import eventually
from tests.support.sealed import opened

pytestmark = pytest.mark.integration

VERSIONS = 4


def change(doc_id: str, lsn: int, op: str = "u") -> bytes:
    row = {"id": doc_id, "title": "Runbook",
           "body": f"Settlement runbook revision {lsn} for the nightly batch."}
    return json.dumps({"payload": {
        "op": op, "before": None, "after": row, "ts_ms": 1_700_000_000_000 + lsn,
        "source": {"connector": "postgresql", "db": "ops", "table": "runbooks", "lsn": lsn},
    }}).encode()


def expected(arrival: list[int]) -> tuple[list[int], int]:
    """Which LSNs become versions, in order, and how many are stale: a change applies only
    when it is newer than every one before it; a repeat of an applied one (the newest or an
    older one, as a replay after a crash sends it) is a silent duplicate."""
    applied: list[int] = []
    stale = 0
    for lsn in arrival:
        if not applied or lsn > applied[-1]:
            applied.append(lsn)
        elif lsn not in applied:
            stale += 1
    return applied, stale


def test_shuffled_versions_end_with_the_newest_version_only(mesh: RunningMesh) -> None:
    rng = random.Random(14)
    rows = [uid("ordered") for _ in range(3)]
    docs = [f"ops.runbooks/{row}" for row in rows]  # a row's id lives in its table's space
    plans: dict[str, list[int]] = {}
    for row, doc_id in zip(rows, docs, strict=True):
        lsns = [10 * (v + 1) for v in range(VERSIONS)]
        arrival = lsns + rng.sample(lsns, 2)  # every version, two of them again
        rng.shuffle(arrival)
        if arrival[0] == lsns[-1]:  # the newest first would make everything else stale
            arrival.append(arrival.pop(0))
        plans[doc_id] = arrival
        produce(mesh, [change(row, lsn) for lsn in arrival], key=row.encode())

    def normalized() -> dict[str, list[dict]] | None:
        seen: dict[str, list[dict]] = {d: [] for d in docs}
        for r in read_topic(mesh, "docs.normalized.v1"):
            if r.key is not None and r.key.decode() in seen:
                seen[r.key.decode()].append(json.loads(r.value))
        done = all(seen[d] and seen[d][-1]["position"]["key"] == [10 * VERSIONS] for d in docs)
        return seen if done else None

    versions = eventually(normalized, "the newest version of each document on docs.normalized.v1")
    for doc_id, arrival in plans.items():
        applied, _ = expected(arrival)
        assert [v["position"]["key"][0] for v in versions[doc_id]] == applied, arrival
        assert [v["version"] for v in versions[doc_id]] == list(range(1, len(applied) + 1))

    def stale_letters() -> dict[str, int] | None:
        counts = {d: 0 for d in docs}
        for r in read_topic(mesh, "deadletter.v1"):
            letter = json.loads(r.value)
            if letter["key"] in counts and letter["reason"] == "stale_version":
                counts[letter["key"]] += 1
        return counts if counts == {d: expected(plans[d])[1] for d in docs} else None

    eventually(stale_letters, "one stale_version dead letter per older change")

    def indexed() -> dict[str, dict] | None:
        last: dict[str, dict] = {}
        for r in read_topic(mesh, "chunks.embedded.v1"):
            if r.key is not None and r.key.decode() in docs:
                last[r.key.decode()] = opened(mesh, r.value)  # sealed: read as the mesh does
        newest = all(d in last and last[d]["version"] == len(expected(plans[d])[0]) for d in docs)
        return last if newest else None

    last = eventually(indexed, "the newest version of each document on chunks.embedded.v1")
    for doc_id in docs:
        text = " ".join(c["text"] for c in last[doc_id]["chunks"])
        assert f"revision {10 * VERSIONS} " in text
        assert not any(f"revision {10 * v} " in text for v in range(1, VERSIONS))
