"""The SLO guard on the session mesh: a canary whose search always times out is stopped,
then rolled back, by inference itself; the incident is on guard.incidents.v1 and in
`streamrag status --json`. Windows of 2 s, 2 breaking ones (tests/support/mesh.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import grpc
import pytest

from services.cli.incidents import newest
from services.cli.mesh import Endpoints
from shared.contract.query_config import QueryConfig
from shared.contract.records import GuardIncident
from shared.kafka.config_log import KafkaConfigLog, current, rollback, set_config
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from shared.settings import KafkaSettings
from tests.support.mesh import GUARD_PROBES, GUARD_WORDS, produce
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
WINDOW_S = 2.0


def now_config(kafka: KafkaSettings) -> QueryConfig | None:
    return current(asyncio.run(KafkaConfigLog(kafka).read()))


def incidents(kafka: KafkaSettings, variant: str, since: float) -> list[GuardIncident]:
    """The guard's actions on `variant` since `since` (its tier-0 reports left out)."""
    return [i for i in asyncio.run(newest(kafka, 50))
            if i.variant == variant and i.at >= since and i.tier >= 1]


def test_a_bad_canary_is_stopped_and_rolled_back_by_the_guard(mesh: Endpoints) -> None:
    kafka = KafkaSettings(bootstrap=mesh.bootstrap)
    log = KafkaConfigLog(kafka)
    for word, probe in zip(GUARD_WORDS, GUARD_PROBES, strict=True):
        doc = {"id": probe["doc_id"], "text": f"The zorbulant kelpfinch {word} nests on "
               f"the basalt cliffs; {word} eggs hatch in spring.", "source": "guard-test",
               "domain": "guard", "event_time": "2026-11-28T00:05:00Z", "title": word}
        produce(mesh, [json.dumps(doc).encode()], key=doc["id"].encode())
    # The configuration as found, written again as a version the guard can judge stable.
    baseline = asyncio.run(set_config(log, [], [], "itest", "slo guard test: baseline"))
    written_at = time.monotonic()
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        stub = pb_grpc.InferenceStub(channel)

        def found(probe: dict[str, str]) -> bool:
            r = stub.Retrieve(pb.RetrieveRequest(question=probe["question"]), timeout=15)
            return probe["doc_id"] in [c.doc_id for c in r.chunks]

        eventually(lambda: all(found(p) for p in GUARD_PROBES), "the probe documents found")
    # Two clean windows under the baseline (and the close's lag) make it stable.
    time.sleep(max(0.0, 3 * WINDOW_S + 2.5 - (time.monotonic() - written_at)))
    shipped = time.time()
    canary = asyncio.run(set_config(log, ["stable.weight=90", "canary.weight=10",
                                          "canary.shard_timeout_s=0.001"], [], "itest",
                                    "slo guard test: a canary whose search times out"))
    try:
        stopped = eventually(
            lambda: (c := now_config(kafka)) is not None and c.version > canary.version and c,
            "the guard's first version", 30)
        detected_s = time.time() - shipped
        assert stopped.author == "slo-guard" and stopped.rollback_of is None
        assert stopped.variants["canary"].weight == 0
        assert stopped.variants["stable"].weight == 90
        rolled = eventually(lambda: (c := now_config(kafka)) is not None
                            and c.rollback_of is not None and c, "the guard's rollback", 30)
        rolled_s = time.time() - shipped
        assert rolled.author == "slo-guard" and rolled.rollback_of == baseline.version
        assert rolled.content() == baseline.content()
        both = eventually(lambda: len(found := incidents(kafka, "canary", shipped)) >= 2
                          and found, "both incidents on guard.incidents.v1", 15)
        tier1, tier2 = both[-2:]
        assert (tier1.tier, tier1.kind, tier1.version, tier1.from_version) == (
            1, "stop", stopped.version, canary.version)
        assert tier1.diff == {"variants.canary.weight": (10, 0)}
        assert len(tier1.windows) == 2
        assert all(w.probe_hit_rate == 0.0 and w.reference_probe_hit_rate == 1.0
                   and w.breaches == ("probe_hit_rate",) for w in tier1.windows)
        assert (tier2.tier, tier2.version, tier2.rollback_of) == (2, rolled.version,
                                                                  baseline.version)
        assert tier2.incident == tier1.incident
        print(f"\nslo guard: stopped routing {detected_s:.1f}s after the canary shipped, "
              f"rolled back after {rolled_s:.1f}s")
    finally:
        last = now_config(kafka)
        if last is None or last.content() != baseline.content():
            asyncio.run(rollback(log, baseline.version, "itest", "slo guard test: cleanup"))
    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap}
    status = subprocess.run([sys.executable, "-m", "services.cli.main", "status", "--json"],
                            capture_output=True, text=True, env=env, timeout=60, check=False)
    shown = json.loads(status.stdout)["guard_incidents"]
    assert {(i["incident"], i["tier"]) for i in shown} >= {(tier1.incident, 1),
                                                         (tier2.incident, 2)}
