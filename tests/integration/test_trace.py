"""`streamrag trace DOC_ID` on the real mesh: one document produced the way a user does,
followed hop by hop from docs.raw.v1 to searchable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from services.cli.mesh import Endpoints
from tests.support.mesh import chunks_of, produce, uid

pytestmark = pytest.mark.integration
PIPELINE = ["docs.raw.v1", "docs.parsed.v1", "docs.normalized.v1", "docs.redacted.v1",
            "chunks.v1", "chunks.embedded.v1", "searchable"]


def streamrag_trace(mesh: Endpoints, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
           "STREAMRAG_MESH_INFERENCE_TARGET": mesh.grpc_target}
    return subprocess.run([sys.executable, "-m", "services.cli.main", "trace", *args],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


def test_trace_follows_a_document_to_searchable(mesh: Endpoints) -> None:
    doc_id, source = uid("trace"), uid("trace-src")
    produced = time.time() * 1000
    produce(mesh, [json.dumps({"id": doc_id, "source": source, "title": "Traced",
                               "text": "Lighthouse keepers log the weather every hour."}
                              ).encode()])  # unkeyed: trace finds it by its payload
    done = streamrag_trace(mesh, doc_id, "--wait", "--json", "--timeout", "25")
    traced = time.time() * 1000
    assert done.returncode == 0, done.stdout + done.stderr
    assert chunks_of(mesh, "lighthouse weather log", doc_id, source=source)

    [journey] = json.loads(done.stdout)["journeys"]
    hops = journey["hops"]
    assert [h["source"] for h in hops] + [hops[-1]["target"]] == PIPELINE
    assert (journey["version"], journey["end"]) == (1, "searchable")
    for h in hops:
        assert h["total_ms"] >= 0, h
        assert all(h[k] is None or h[k] >= 0 for k in ("waiting_ms", "working_ms")), h
        if h["waiting_ms"] is not None:
            assert h["waiting_ms"] + h["working_ms"] == h["total_ms"]
    assert hops[0]["waiting_ms"] is not None  # ingest_time splits the parse hop
    # The hops add up to the document's own end to end: from its raw record (produced just
    # before the trace started) to when the trace saw retrieval serve it.
    raw_at = hops[0]["at_ms"] - hops[0]["total_ms"]
    assert sum(h["total_ms"] for h in hops) == journey["end_to_end_ms"]
    assert produced - 50 <= raw_at <= produced + 5_000
    assert raw_at + journey["end_to_end_ms"] <= traced + 50

    table = streamrag_trace(mesh, doc_id, "--timeout", "15")
    assert table.returncode == 0, table.stdout + table.stderr
    assert f"{doc_id} v1 (upsert): searchable" in table.stdout
    assert "chunks.embedded.v1 -> searchable" in table.stdout
    print(done.stdout, table.stdout, sep="\n")
