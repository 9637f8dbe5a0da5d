"""The SLO guard fails safe on the session mesh, in the two ways it once failed.

- A machine-wide slowdown (every variant's calls delayed alike, over the p99 objective) is
  reported as a breach every variant shares; no version is written, and the main variant is
  never set to weight 0 (it once was: all traffic went to an untested canary).
- A canary whose calls hang past the objective and past their callers' timeouts (they never
  finish, so no latency is ever recorded for them) is seen while they hang, and stopped.

The delays come from the test-only fault in tests/support/faults (the session mesh loads it;
inference_delays names its file). Windows of 2 s, 2 breaking ones, p99 objective 3 s judged
from 5 calls (tests/support/mesh.py GUARD_ENV)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from services.cli.incidents import newest
from services.cli.mesh import Endpoints
from services.inference.config.routing import route
from shared.contract.query_config import QueryConfig
from shared.contract.records import GuardIncident
from shared.kafka.config_log import KafkaConfigLog, current, rollback, set_config
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from shared.settings import KafkaSettings
from tests.support.mesh import GUARD_P99_MS
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
WINDOW_S = 2.0
QUESTION = "where does the zorbulant kelpfinch nest"
WEIGHTS = {"stable": 85, "canary": 15}
SHIP = ["stable.weight=85", "canary.weight=15", "canary.default_top_k=3"]


def now_config(kafka: KafkaSettings) -> QueryConfig | None:
    return current(asyncio.run(KafkaConfigLog(kafka).read()))


def incidents(kafka: KafkaSettings, since: float) -> list[GuardIncident]:
    return [i for i in asyncio.run(newest(kafka, 50)) if i.at >= since]


def callers(variant: str, n: int) -> list[str]:
    """Client ids the configuration routes to `variant` (as inference routes them)."""
    ids = (f"fail-safe-{variant}-{i}" for i in range(10_000))
    return [c for c in ids if route(WEIGHTS, f"client:{c}", QUESTION) == variant][:n]


@contextmanager
def load(mesh: Endpoints, per_variant: dict[str, tuple[int, float]],
         ) -> Iterator[Counter[tuple[str, str]]]:
    """Callers of Retrieve in threads until the block ends: per variant, how many and each
    call's timeout (the client's deadline). Yields the outcomes by (variant, status)."""
    outcomes: Counter[tuple[str, str]] = Counter()
    stop = threading.Event()

    def call_on(stub: pb_grpc.InferenceStub, variant: str, client: str, timeout_s: float,
                offset_s: float) -> None:
        # Callers started together would call in bursts, leaving windows with no call at
        # all; steady traffic, as a mesh has, spreads them over a window.
        stop.wait(offset_s)
        while not stop.is_set():
            try:
                reply = stub.Retrieve(pb.RetrieveRequest(question=QUESTION, client_id=client),
                                      timeout=timeout_s)
                # counted under the variant that answered: one that finished before inference
                # applied the configuration routed by it is not the canary's
                outcomes[(reply.variant or variant, "OK")] += 1
            except grpc.RpcError as exc:
                outcomes[(variant, exc.code().name)] += 1
                time.sleep(0.05)

    with grpc.insecure_channel(mesh.grpc_target) as channel:
        stub = pb_grpc.InferenceStub(channel)
        threads = [threading.Thread(target=call_on, args=(stub, v, c, timeout_s,
                                                          i * WINDOW_S / n), daemon=True)
                   for v, (n, timeout_s) in per_variant.items()
                   for i, c in enumerate(callers(v, n))]
        for t in threads:
            t.start()
        try:
            yield outcomes
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)


def applied(mesh: Endpoints, version: int) -> None:
    """Waits until inference answers under configuration `version`: the load starts on the
    configuration it is about, not on the one before it (inference reads the log a little
    later, more so on a loaded machine)."""
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        stub = pb_grpc.InferenceStub(channel)
        eventually(lambda: stub.Retrieve(
            pb.RetrieveRequest(question=QUESTION, client_id="fail-safe-probe"),
            timeout=30).config_version >= version, f"configuration {version} applied", 60)


@contextmanager
def shipped_canary(mesh: Endpoints, settle: bool = True,
                   ) -> Iterator[tuple[KafkaConfigLog, QueryConfig, QueryConfig]]:
    """A baseline (`settle`: one the guard has judged stable), then stable 85 / canary 15;
    the baseline's content again afterwards, whatever the guard did."""
    log = KafkaConfigLog(KafkaSettings(bootstrap=mesh.bootstrap))
    baseline = asyncio.run(set_config(log, [], [], "itest", "fail-safe test: baseline"))
    if settle:
        time.sleep(3 * WINDOW_S + 2.5)  # two clean windows under it, and the close's lag
    canary = asyncio.run(set_config(log, SHIP, [], "itest", "fail-safe test: canary"))
    try:
        applied(mesh, canary.version)
        yield log, baseline, canary
    finally:
        last = current(asyncio.run(log.read()))
        if last is None or last.content() != baseline.content():
            asyncio.run(rollback(log, baseline.version, "itest", "fail-safe test: cleanup"))


def test_a_slowdown_every_variant_shares_is_reported_and_moves_no_traffic(
        mesh: Endpoints, inference_delays: Path) -> None:
    kafka = KafkaSettings(bootstrap=mesh.bootstrap)
    with shipped_canary(mesh, settle=False) as (_, _, canary):
        since = time.time()
        # Every call a second over the objective, whichever variant serves it.
        inference_delays.write_text(json.dumps({"*": GUARD_P99_MS / 1000 + 1.0}))
        try:
            with load(mesh, {"stable": (12, 60.0), "canary": (12, 60.0)}) as outcomes:
                report = eventually(lambda: next(
                    (i for i in incidents(kafka, since) if i.kind == "shared"), None),
                    "the shared breach reported", 90)
                reported_s = time.time() - since
                time.sleep(3 * WINDOW_S)  # more windows of it: still nothing written
                after = now_config(kafka)
                seen = incidents(kafka, since)
        finally:
            inference_delays.unlink(missing_ok=True)
    assert after is not None and after.version == canary.version, after
    assert after.variants["stable"].weight == 85 and after.variants["canary"].weight == 15
    assert all(i.tier == 0 and i.version is None for i in seen), seen
    assert not [i for i in seen if i.kind in ("stop", "rollback")]
    assert (report.variant, report.tier, report.version) == ("stable", 0, None)
    assert "traffic unchanged" in report.note
    assert len(report.windows) == 2 and any(w.shared == ("p99",) for w in report.windows)
    assert all(w.slow == w.calls > 0 for w in report.windows)  # every call over 3 s
    assert outcomes[("stable", "OK")] > 0 and outcomes[("canary", "OK")] > 0
    reports = [(i.kind, round(i.at - since, 1), [(w.calls, w.slow) for w in i.windows])
               for i in seen]
    print(f"\nslo guard: a shared slowdown reported {reported_s:.1f}s after it began; "
          f"calls {dict(outcomes)}; reports {reports}")


def test_a_canary_whose_calls_hang_is_stopped(mesh: Endpoints, inference_delays: Path) -> None:
    kafka = KafkaSettings(bootstrap=mesh.bootstrap)
    with shipped_canary(mesh) as (_, _, canary):
        since = time.time()
        # The canary's calls hang far past their callers' timeouts, as a generative canary's
        # with a large max_new_tokens did; the stable's are served as usual.
        inference_delays.write_text(json.dumps({"canary": 600}))
        try:
            with load(mesh, {"stable": (3, 60.0), "canary": (16, 6.0)}) as outcomes:
                stopped = eventually(
                    lambda: (c := now_config(kafka)) is not None
                    and c.version > canary.version and c, "the guard's version", 90)
                stopped_s = time.time() - since
                tier1 = eventually(lambda: next(
                    (i for i in incidents(kafka, since) if i.kind == "stop"), None),
                    "the stop on guard.incidents.v1", 15)
        finally:
            inference_delays.unlink(missing_ok=True)
    assert stopped.author == "slo-guard" and stopped.rollback_of is None
    assert stopped.variants["canary"].weight == 0 and stopped.variants["stable"].weight == 85
    assert (tier1.variant, tier1.tier, tier1.version) == ("canary", 1, stopped.version)
    # p99 from the calls in flight past the objective; the cancelled ones are errors too
    assert all("p99" in w.breaches and w.overdue > 0 for w in tier1.windows), tier1
    assert outcomes[("canary", "OK")] == 0  # not one canary call finished
    print(f"\nslo guard: a hanging canary stopped {stopped_s:.1f}s after its calls began to "
          f"hang; calls {dict(outcomes)}")
