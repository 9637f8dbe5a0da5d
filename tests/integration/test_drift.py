"""Semantic drift on the real mesh: a source that streams SciFact abstracts and then
incident reports gets a drift event for the switch, seen through the Stats RPC and
`streamrag status --json`, the way a user sees it; on the multi-process mesh and in
one-process mode. The session meshes run 3 s drift windows (tests/support/mesh.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import grpc
import pytest

from scripts.benchlib.drift import SCIFACT, incident_reports, scifact_slices
from services.cli.mesh import Endpoints
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from tests.support.mesh import MESH_ENV, produce, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
WINDOW_S = float(MESH_ENV["STREAMRAG_RETRIEVAL_DRIFT_WINDOW_S"])
PER_WINDOW = 8


def doc(source: str, n: int, text: str) -> bytes:
    title, _, body = text.partition(". ")
    return json.dumps({"id": f"{source}-{n}", "source": source, "domain": "papers",
                       "title": title[:120], "text": body or text}).encode()


def drift_state(mesh: Endpoints, source: str) -> pb.DriftState | None:
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        resp = pb_grpc.InferenceStub(channel).Stats(
            pb.StatsRequest(window=pb.STATS_WINDOW_MINUTE, source=source), timeout=10)
    return resp.drift[0] if resp.drift else None


def test_a_switch_of_collection_raises_one_drift_event_named_by_its_words(
        each_mode: Endpoints) -> None:
    mesh = each_mode
    source = uid("drift")
    if SCIFACT is None:
        pytest.skip("SciFact is not on this machine: set STREAMRAG_SCIFACT_DIR")
    papers, incidents = scifact_slices()[1][:4 * PER_WINDOW], incident_reports(PER_WINDOW, 7)
    batches = [papers[i:i + PER_WINDOW] for i in range(0, len(papers), PER_WINDOW)]
    batches.append(incidents)
    starts = []
    for k, texts in enumerate(batches):
        # each batch at the start of a window of its own (ingest time is read time)
        time.sleep(WINDOW_S - time.time() % WINDOW_S + 0.1)
        starts.append(time.time() // WINDOW_S * WINDOW_S)
        produce(mesh, [doc(source, k * PER_WINDOW + i, t) for i, t in enumerate(texts)])

    state = eventually(lambda: (s := drift_state(mesh, source)) is not None
                       and s.latest.window_start >= starts[-1] and s,
                       "the switched window's drift report in Stats", timeout_s=60)
    event = state.last_event
    assert event.status == "drift", state
    assert event.window_start == starts[-1]  # the switched window, nothing earlier
    assert event.z > event.threshold and event.docs >= PER_WINDOW // 2
    assert {"incident", "on-call", "ticket", "customer"} & set(event.terms), event.terms
    assert all(d.doc_id.startswith(source) and int(d.doc_id.rsplit("-", 1)[1]) >= 32
               for d in event.documents)

    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
           "STREAMRAG_MESH_RUN_DIR": str(mesh.run_dir),
           "STREAMRAG_MESH_INFERENCE_TARGET": mesh.grpc_target}
    out = subprocess.run([sys.executable, "-m", "services.cli.main", "status", "--json"],
                         capture_output=True, text=True, env=env, timeout=60)
    shown = [d for d in json.loads(out.stdout)["stream_stats"]["drift"]
             if d["source"] == source]
    assert shown and shown[0]["last_event"]["status"] == "drift"
