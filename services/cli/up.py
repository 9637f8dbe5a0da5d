"""`streamrag up`: run the whole mesh on the embedded defaults, prove it with a demo query.

It keeps the mesh running: a process that exits is restarted (services/cli/supervise.py);
only Ctrl-C or SIGTERM stops the mesh.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time
from pathlib import Path

import grpc

from services.cli.mesh import Mesh
from services.cli.produce import records, send
from services.cli.ready import Metadata, bearer
from services.cli.render import render_answer
from services.cli.settings import MeshSettings
from shared.errors import StreamragError
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc
from shared.settings import KafkaSettings, LedgerSettings

log = logging.getLogger("streamrag.up")
DEMO = Path(__file__).parent / "demo"
DEMO_QUESTION = "What caused the payments outage?"
# What the demo corpus must leave searchable, and what its delete must have removed.
DEMO_EXPECTED = {"incident-2026-11-28-payments", "runbook-kafka-lag", "release-notes-3-14",
                 "helpdesk.kb_articles/kb-417", "T-9921"}
DEMO_DELETED = "runbook-obsolete-failover"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("up", help="start the embedded mesh, run the demo, keep it running")
    p.add_argument("--no-demo", action="store_true", help="skip producing the demo corpus")
    p.add_argument("--exit-after-demo", action="store_true",
                   help="stop everything once the demo answer is printed")
    p.add_argument("--processes", action="store_true",
                   help="one process per service (as docker-compose runs them) instead of "
                        "every service in one worker process")


def produce_demo(kafka: KafkaSettings) -> int:
    args = argparse.Namespace(source="demo", domain=None)
    sent = 0
    for name in ("docs.jsonl", "cdc.jsonl"):
        sent += asyncio.run(send(kafka, records(DEMO / name, args), progress=False))
    sent += asyncio.run(send(kafka, records(DEMO / "tickets.jsonl", args),
                             [("streamrag-source", b"tickets")], progress=False))
    # The delete goes last so it is also the last version of that document.
    sent += asyncio.run(send(kafka, records(DEMO / "deletes.jsonl", args), progress=False))
    return sent


EXIT_FAILED = 1  # the mesh could not start (the message names the setting or file to fix)
ANSWER_TIMEOUT_S = 300  # a generative answer on a CPU can take minutes


def wait_demo_answer(target: str, timeout_s: float, metadata: Metadata = (),
                     ) -> inference_pb2.QueryResponse:
    deadline = time.monotonic() + timeout_s
    with grpc.insecure_channel(target) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        while True:
            # The probe retrieves only: an answer over 50 sources, generated on a CPU,
            # could outlast its timeout.
            request = inference_pb2.RetrieveRequest(question=DEMO_QUESTION, top_k=50)
            try:
                probe = stub.Retrieve(request, timeout=10, metadata=metadata)
            except grpc.RpcError as exc:  # a busy machine: say so and keep trying
                print(f"  demo query not answered yet ({exc.code().name})", flush=True)
                found: set[str] = set()
                partial = True
            else:
                found, partial = {c.doc_id for c in probe.chunks}, probe.partial
            if found >= DEMO_EXPECTED and DEMO_DELETED not in found and not partial:
                return stub.Query(inference_pb2.QueryRequest(question=DEMO_QUESTION, top_k=3),
                                  timeout=ANSWER_TIMEOUT_S, metadata=metadata)
            if time.monotonic() > deadline:
                missing = sorted(DEMO_EXPECTED - found)
                raise TimeoutError(f"demo corpus not searchable after {timeout_s:.0f}s; "
                                   f"missing {missing}")
            time.sleep(0.5)


def run(args: argparse.Namespace) -> int:
    settings = MeshSettings()
    if args.processes:
        settings = settings.model_copy(update={"processes": True})
    faces = {"STREAMRAG_INFERENCE_HTTP_PORT": str(settings.inference_http_port),
             "STREAMRAG_INFERENCE_MCP_PORT": str(settings.inference_mcp_port)}
    mesh = Mesh(settings, KafkaSettings(), LedgerSettings(), faces)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    # Ctrl-C stops the mesh even where `up` was started with SIGINT ignored, as a shell
    # starts a background job (`streamrag up &`, nohup): Python then keeps it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    try:
        mesh.start_infrastructure()
        mesh.start_services()
        mesh.wait_ready()
        log.info("mesh ready (every shard answers) after %.1fs", time.monotonic() - started)
        print(mesh.timeline_table(), flush=True)
        if not args.no_demo:
            sent = produce_demo(mesh.kafka)
            produced = time.monotonic()
            log.info("produced %d demo records; waiting until they are searchable", sent)
            answer = wait_demo_answer(settings.inference_target, settings.ready_timeout_s,
                                      bearer(mesh.probe_token()))
            print(f"\nQ: {DEMO_QUESTION}\n{render_answer(answer)}")
            print(f"\nfirst answer {time.monotonic() - started:.1f}s after start; demo corpus "
                  f"searchable {time.monotonic() - produced:.1f}s after producing it")
        if args.exit_after_demo:
            return 0
        print(f"\nmesh running: logs in {mesh.run_dir / 'logs'}; try `streamrag query "
              "\"...\"` in another shell", end="")
        if settings.inference_http_port:
            print(f", or curl http://127.0.0.1:{settings.inference_http_port}/v1/query "
                  "(OpenAPI at /openapi.json)", end="")
        if settings.inference_mcp_port:
            print(f"; MCP clients: http://127.0.0.1:{settings.inference_mcp_port}/mcp",
                  end="")
        print(". A process that exits is restarted; Ctrl-C stops everything.")
        while True:  # the supervisor thread restarts what exits; only a signal ends this
            time.sleep(1)
    except KeyboardInterrupt:
        print("\nstopping the mesh ...")
        return 0
    except StreamragError as exc:  # a setting or the machine: one line that names it
        print(f"streamrag up: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    finally:
        mesh.stop()
