"""The cost of forgetting on the embedded mesh: one document, and a person mentioned by many.

    scripts/bench_forget                      # 1,000 documents mention the person
    scripts/bench_forget --docs 200 --rounds 3

It starts its own one-process mesh (embedded broker, anvil, the workers) on free ports,
produces --docs documents that all name one e-mail address (and as many that name nobody,
for the baseline), waits until redaction has indexed them all (pii.subjects.v1), then
times, as a user runs it, `streamrag forget --subject EMAIL` (every document that mentions
the person): from the command's start until every receipt is written and its audit batch
anchored (the command's own exit), and checks that no forgotten document answers. The
baseline in the same run is a plain delete of as many documents (a `{"op": "delete"}`
record each, which drops them from the index but destroys no key and writes no receipt),
timed until none answers; the table gives the ratio. First, on the mesh with nothing else
to do, `streamrag forget DOC` of one document, and the command's start alone (`--help`).
Targets (the forgetting issue): one document in seconds; a person with 1,000 documents in
under a minute on the 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
from tqdm import tqdm

from scripts.benchlib.paths import ANVIL, RESULTS
from services.cli.mesh import Endpoints, isolated
from services.cli.produce import send
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc
from shared.settings import KafkaSettings

EMAIL = "Ottoline.Brackenbury@example.net"


def cli(mesh: Endpoints, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
           "STREAMRAG_DATA_DIR": str(mesh.run_dir / "data")}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "services.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=1800, check=False)
    return time.monotonic() - started, done


def produce(mesh: Endpoints, values: list[tuple[str, dict[str, Any]]]) -> None:
    asyncio.run(send(KafkaSettings(bootstrap=mesh.bootstrap),
                     ((k.encode(), json.dumps(v).encode()) for k, v in values),
                     progress=False))


def retrieved(mesh: Endpoints, source: str,
              question: str = "meeting notes with the customer contact") -> set[str]:
    """Doc ids Retrieve returns from `source` (its top 50, the most it gives)."""
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        reply = stub.Retrieve(inference_pb2.RetrieveRequest(
            question=question, top_k=50, source=source), timeout=30)
    return {c.doc_id for c in reply.chunks}


def wait_for(what: str, check: Any, timeout_s: float, total: int | None = None) -> float:
    started = time.monotonic()
    with tqdm(total=total, desc=what, unit="doc", disable=None) as bar:
        while True:
            got = check()
            if total is not None:
                bar.n = min(total, got)
                bar.refresh()
            if (got >= total) if total is not None else got:
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(f"{what}: not done in {timeout_s:.0f} s")
            time.sleep(1.0)


def one_round(mesh: Endpoints, docs: int, run: str) -> dict[str, Any]:
    source, plain = f"people-{run}", f"plain-{run}"
    ids = [f"{source}-{i}" for i in range(docs)]
    single = f"single-{run}"
    deleted = [f"{plain}-{i}" for i in range(docs)]
    out: dict[str, Any] = {"docs": docs}
    # One document on a mesh with nothing else to do.
    produce(mesh, [(single, {"id": single, "source": single,
                             "text": "Meeting notes with the customer contact, nobody named."})])
    wait_for("single indexed", lambda: single in retrieved(mesh, single), 600)
    time.sleep(5)
    took, done = cli(mesh, "forget", single, "--json")
    assert done.returncode == 0, done.stderr
    [receipt] = json.loads(done.stdout)
    out["one_document_s"] = took
    out["one_receipt_s"], out["one_anchored_s"] = (receipt["receipt_after_s"],
                                                   receipt["anchored_after_s"])
    out["command_start_s"], _ = cli(mesh, "forget", "--help")  # the interpreter's share
    note = "Meeting notes with the customer contact {email} about order {n}."
    produce(mesh, [(d, {"id": d, "source": source, "text": note.format(email=EMAIL, n=i)})
                   for i, d in enumerate(ids)]
            + [(d, {"id": d, "source": plain, "text": f"Meeting notes with the customer "
                    f"contact about delivery {i}."}) for i, d in enumerate(deleted)])
    wait_for("indexed", lambda: len(retrieved(mesh, source)) + len(retrieved(mesh, plain)),
             1800, total=min(50, docs) + min(50, docs))
    # Every one indexed by redaction (the subject index lists them all).
    wait_for("subject index", lambda: _mentioning(mesh), 1800, total=docs)
    # The backlog through every stage (the last document produced answers), so the forget
    # is timed on a mesh with nothing else to do.
    wait_for("backlog", lambda: deleted[-1] in retrieved(mesh, plain, f"delivery {docs - 1}"),
             1800)
    time.sleep(5)
    took, done = cli(mesh, "forget", "--subject", EMAIL, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    receipts = json.loads(done.stdout)
    out["subject_s"], out["subject_docs"] = took, len(receipts)
    out["subject_receipts_s"] = max(r["receipt_after_s"] for r in receipts)
    out["subject_anchored_s"] = max(r["anchored_after_s"] for r in receipts)
    out["keys_destroyed"] = sum(len(r["receipt"]["keys_destroyed"]) for r in receipts)
    out["still_answered"] = len(retrieved(mesh, source) & set(ids))
    started = time.monotonic()
    produce(mesh, [(d, {"id": d, "op": "delete", "source": plain}) for d in deleted])
    wait_for("plain deletes", lambda: not retrieved(mesh, plain), 1800)
    out["delete_s"] = time.monotonic() - started
    return out


def _mentioning(mesh: Endpoints) -> int:
    _, done = cli(mesh, "subjects", EMAIL, "--json")
    return len(json.loads(done.stdout)["matches"]) if done.returncode in (0, 1) else 0


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench_forget", description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1000,
                    help="documents that mention the person (default 1000)")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as tmp, isolated(Path(tmp), ANVIL) as mesh:
        for _ in range(args.rounds):
            rounds.append(one_round(mesh, args.docs, uuid.uuid4().hex[:6]))
            print(json.dumps(rounds[-1]), flush=True)
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    print(f"\nforgetting on the one-process mesh, {args.docs} documents mention the person, "
          f"{args.rounds} round(s), medians")
    print(f"{'what':<44}{'docs':>6}{'seconds':>10}{'target':>12}")
    print(f"{'forget DOC (receipt anchored)':<44}{1:>6}{med['one_document_s']:>10.1f}"
          f"{'seconds':>12}")
    print(f"{'  receipt read / anchored, after sending':<44}{'':>6}"
          f"{med['one_receipt_s']:>5.1f} /{med['one_anchored_s']:>4.1f}{'':>12}")
    print(f"{'forget --subject (every receipt anchored)':<44}{med['subject_docs']:>6.0f}"
          f"{med['subject_s']:>10.1f}{'< 60 s':>12}")
    print(f"{'  last receipt read / anchored':<44}{'':>6}"
          f"{med['subject_receipts_s']:>5.1f} /{med['subject_anchored_s']:>4.1f}{'':>12}")
    print(f"{'baseline: plain delete until none answers':<44}{args.docs:>6}"
          f"{med['delete_s']:>10.1f}{'':>12}")
    print(f"{'of which starting the command (--help)':<44}{'':>6}"
          f"{med['command_start_s']:>10.1f}{'':>12}")
    print(f"ratio forget --subject / plain delete: {med['subject_s'] / med['delete_s']:.2f}x; "
          f"keys destroyed {med['keys_destroyed']:.0f}; forgotten documents still answered: "
          f"{med['still_answered']:.0f}")
    out = RESULTS / "forget.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "rounds": rounds}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
