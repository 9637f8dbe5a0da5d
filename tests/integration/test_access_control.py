"""Permission-aware retrieval on the real mesh, end to end, with signed tokens.

An inference worker with JWT users (HS256) and a service token runs beside the session
mesh; documents labelled payments, hr and public go through ingest, redaction, chunking,
embedding and the retrieval shards. Each principal sees only what its groups grant (the
shards filter; nothing is dropped afterwards), a token without groups sees only public
documents, a missing or expired token is UNAUTHENTICATED, and a new version of a document
without the payments label takes it away from the payments principal. grpcurl, by
reflection alone, is refused without a token and served with one.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from services.cli.mesh import Endpoints, free_port
from services.cli.procs import Child, service_argv, spawn, stop
from shared.contract.codec import decode
from shared.contract.query_audit import AuditPrincipalSettings, principal_hash
from shared.contract.records import QueryAudit
from shared.contract.topics import AUDIT_QUERIES
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from tests.support.grpc_worker import wait_serving
from tests.support.grpcurl import grpcurl_binary
from tests.support.mesh import GUARD_ENV, produce, read_topic, streamrag_audit, uid
from tests.support.polling import eventually
from tests.support.tokens import AUDIENCE, SECRET, bearer, hs256

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]
SERVICE_TOKEN = "access-control-service-token"
FEEDBACK_KEY = "access-control-feedback-receipt-key-0123456789"
QUESTION = "what did the quarterly ledger reconciliation find"
TEXTS = {
    "pay": "The quarterly ledger reconciliation for the payments team found a duplicate "
           "refund batch of forty transfers.",
    "hr": "The quarterly ledger reconciliation for the people team found an unpaid "
          "parental leave claim.",
    "pub": "The quarterly ledger reconciliation calendar is published for every team on "
           "the first Monday.",
}
ACLS = {"pay": ["payments"], "hr": ["hr"], "pub": ["public"]}
TIMEOUT_S = 30


@dataclass(frozen=True)
class Worker:
    target: str
    child: Child
    ids: dict[str, str]  # "pay" | "hr" | "pub" -> doc id
    source: str

    def doc_ids(self, token: str | None, top_k: int = 20) -> set[str]:
        """The document ids a Retrieve with `token` returns, by their short names."""
        metadata = bearer(token) if token else None
        with grpc.insecure_channel(self.target) as channel:
            found = pb_grpc.InferenceStub(channel).Retrieve(
                pb.RetrieveRequest(question=QUESTION, source=self.source, top_k=top_k),
                metadata=metadata, timeout=TIMEOUT_S)
        names = {v: k for k, v in self.ids.items()}
        return {names.get(c.doc_id, c.doc_id) for c in found.chunks}


def _document(doc_id: str, name: str, source: str, acl: list[str]) -> bytes:
    return json.dumps({"id": doc_id, "text": TEXTS[name], "source": source,
                       "title": "Quarterly reconciliation", "acl": acl}).encode()


def _worker_env(mesh: Endpoints, work: Path, port: int) -> dict[str, str]:
    return {**GUARD_ENV,  # like the mesh's own inference, should the guard move here
            "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
            "STREAMRAG_INFERENCE_GRPC_PORT": str(port),
            "STREAMRAG_DATA_DIR": str(work / "data"),
            "STREAMRAG_INFERENCE_GENERATOR_BUNDLED": "false",
            "STREAMRAG_INFERENCE_DEVICE": "cpu",
            "STREAMRAG_INFERENCE_SHARD_TIMEOUT_S": "5",
            "STREAMRAG_INFERENCE_AUTH_TOKEN": SERVICE_TOKEN,
            "STREAMRAG_INFERENCE_JWT_SECRET": SECRET,
            "STREAMRAG_INFERENCE_JWT_AUDIENCE": AUDIENCE,
            "STREAMRAG_INFERENCE_FEEDBACK_KEY": FEEDBACK_KEY}


@pytest.fixture(scope="module")
def worker(mesh: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    work = tmp_path_factory.mktemp("access-control")
    port = free_port()
    child = spawn("inference-jwt", service_argv("inference"), work / "run",
                  _worker_env(mesh, work, port))
    target = f"127.0.0.1:{port}"
    try:
        source = uid("acl-src")
        ids = {name: uid(f"acl-{name}") for name in TEXTS}
        for name, doc_id in ids.items():
            produce(mesh, [_document(doc_id, name, source, ACLS[name])], key=doc_id.encode())
        wait_serving(target, child, 180)
        w = Worker(target, child, ids, source)
        eventually(lambda: w.doc_ids(SERVICE_TOKEN) == set(TEXTS),
                   "all three documents searchable by the service account", 120)
        yield w
    finally:
        stop([child], 15)


def test_each_principal_reads_only_what_its_groups_grant(worker: Worker) -> None:
    assert worker.doc_ids(hs256("ann", ["payments"])) == {"pay", "pub"}
    assert worker.doc_ids(hs256("bob", ["hr"])) == {"hr", "pub"}
    assert worker.doc_ids(hs256("cy", ["payments", "hr"])) == {"pay", "hr", "pub"}
    assert worker.doc_ids(hs256("dee")) == {"pub"}  # no groups: public only
    assert worker.doc_ids(hs256("eve", ["finance"])) == {"pub"}
    # Top k is filled with permitted chunks only (no cut after the search): a caller who
    # may read one of the three still gets one when it asks for one.
    assert worker.doc_ids(hs256("dee"), top_k=1) == {"pub"}


def test_an_answer_quotes_and_cites_only_readable_documents(worker: Worker) -> None:
    with grpc.insecure_channel(worker.target) as channel:
        answer = pb_grpc.InferenceStub(channel).Query(
            pb.QueryRequest(question=QUESTION, source=worker.source, top_k=5,
                            answer_mode="extractive"),
            metadata=bearer(hs256("bob", ["hr"])), timeout=TIMEOUT_S)
    cited = {c.doc_id for c in answer.citations}
    assert cited <= {worker.ids["hr"], worker.ids["pub"]} and worker.ids["hr"] in cited
    assert "refund" not in answer.answer and "refund" not in " ".join(
        c.text for c in answer.citations)


def test_missing_and_expired_tokens_are_unauthenticated(worker: Worker) -> None:
    for token, reason in [(None, "missing_token"),
                          (hs256("ann", ["payments"], exp_in=-600), "expired"),
                          (hs256("ann", ["payments"], secret="x" * 40), "bad_signature")]:
        with pytest.raises(grpc.RpcError) as err:
            worker.doc_ids(token)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        trailing = dict(err.value.trailing_metadata() or ())
        assert trailing.get("streamrag-reason") == reason


def test_a_revoked_group_loses_the_document(mesh: Endpoints, worker: Worker) -> None:
    payments, finance = hs256("ann", ["payments"]), hs256("fay", ["finance"])
    assert worker.doc_ids(payments) == {"pay", "pub"}
    doc_id = worker.ids["pay"]
    produce(mesh, [_document(doc_id, "pay", worker.source, ["finance"])], key=doc_id.encode())
    eventually(lambda: worker.doc_ids(finance) == {"pay", "pub"},
               "the relabelled version to reach the finance principal", 60)
    assert worker.doc_ids(payments) == {"pub"}


@pytest.fixture(scope="module")
def grpcurl() -> Path:
    return grpcurl_binary()


def _grpcurl(binary: Path, worker: Worker, *flags: str) -> subprocess.CompletedProcess[str]:
    request = {"question": QUESTION, "source": worker.source, "top_k": 20}
    return subprocess.run(
        [str(binary), "-plaintext", "-max-time", "20", *flags, "-d", json.dumps(request),
         worker.target, "streamrag.v1.Inference/Retrieve"],
        capture_output=True, text=True, timeout=60, check=False)


def test_grpcurl_is_refused_without_a_token_and_served_with_one(grpcurl: Path,
                                                                worker: Worker) -> None:
    refused = _grpcurl(grpcurl, worker)
    assert refused.returncode != 0
    assert "Unauthenticated" in refused.stderr and "missing_token" in refused.stderr
    token = hs256("bob", ["hr"])
    served = _grpcurl(grpcurl, worker, "-H", f"authorization: Bearer {token}")
    assert served.returncode == 0, served.stderr
    docs = {c["doc_id"] for c in json.loads(served.stdout)["chunks"]}
    assert docs == {worker.ids["hr"], worker.ids["pub"]}


def test_a_users_answer_is_audited_under_its_hashed_subject_and_proven(
        mesh: Endpoints, worker: Worker) -> None:
    """Who was shown what, for a real principal: the call's audit names the subject only as
    its HMAC, records the caller's grants and what it was shown (its readable documents
    only), and `streamrag audit prove --query` proves it on chain."""
    subject = uid("auditee")
    with grpc.insecure_channel(worker.target) as channel:
        answer = pb_grpc.InferenceStub(channel).Query(
            pb.QueryRequest(question=QUESTION, source=worker.source, top_k=5,
                            answer_mode="extractive"),
            metadata=bearer(hs256(subject, ["hr"])), timeout=TIMEOUT_S)
    hashed = principal_hash(subject, AuditPrincipalSettings().principal_key)

    def audited() -> list[QueryAudit] | None:
        found = [decode(QueryAudit, r.value) for r in read_topic(mesh, AUDIT_QUERIES.name)
                 if subject.encode() in r.value or hashed.encode() in r.value]
        return found or None
    [audit] = eventually(audited, "the user's query audit", 60)
    assert subject not in audit.model_dump_json()  # the subject only as its HMAC
    assert (audit.principal, audit.principal_kind, audit.method) == (hashed, "user", "Query")
    assert set(audit.scope.split(",")) == {"hr", "public", f"user:{hashed}"}
    assert list(audit.shown) == [c.chunk_id for c in answer.citations]
    assert list(audit.docs) == [f"{c.doc_id}@v{c.version}" for c in answer.citations]
    assert {c.doc_id for c in answer.citations} <= {worker.ids["hr"], worker.ids["pub"]}
    assert worker.ids["hr"] in {c.doc_id for c in answer.citations}
    assert list(audit.cited) == list(answer.cited_chunk_ids) and audit.cited

    def proven() -> Any:
        code, proof = streamrag_audit(mesh, "prove", "--query", audit.query_id)
        return proof if code == 0 else None
    proof = eventually(proven, "the user's audit anchored and proven", 90)
    assert all(proof["checks"].values()) and proof["record"]["principal"] == hashed


def test_a_click_reaches_another_replica_with_its_receipt_and_only_for_its_caller(
        mesh: Endpoints, worker: Worker, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Two inference replicas sharing the feedback key, as compose and Kubernetes run them:
    a chunk shown to bob by one is clicked on the other with its citation's receipt and
    lands on feedback.v1; without the receipt, or with it under ann's token, NOT_FOUND."""
    work = tmp_path_factory.mktemp("access-control-replica")
    port = free_port()
    replica = spawn("inference-jwt-replica", service_argv("inference"), work / "run",
                    _worker_env(mesh, work, port))
    try:
        target = f"127.0.0.1:{port}"
        wait_serving(target, replica, 180)
        ann, bob = bearer(hs256("ann", ["payments"])), bearer(hs256("bob", ["hr"]))
        with grpc.insecure_channel(worker.target) as channel:
            answer = pb_grpc.InferenceStub(channel).Query(
                pb.QueryRequest(question=QUESTION, source=worker.source, top_k=5,
                                answer_mode="extractive"),
                metadata=bob, timeout=TIMEOUT_S)
        [hr] = [c for c in answer.citations if c.doc_id == worker.ids["hr"]]
        with grpc.insecure_channel(target) as channel:
            api = pb_grpc.InferenceStub(channel)

            def click(receipt: str, who: Any) -> Any:
                return api.Feedback(pb.FeedbackRequest(
                    chunk_id=hr.chunk_id, kind=pb.FEEDBACK_KIND_SKIP, receipt=receipt),
                    metadata=who, timeout=TIMEOUT_S)
            refusals = []
            for receipt, who in [("", bob), (hr.feedback_receipt, ann)]:
                with pytest.raises(grpc.RpcError) as err:
                    click(receipt, who)
                refusals.append((err.value.code(),
                                 dict(err.value.trailing_metadata() or ()).get("streamrag-reason")))
            assert click(hr.feedback_receipt, bob).accepted
    finally:
        stop([replica], 15)
    assert refusals == [(grpc.StatusCode.NOT_FOUND, "unknown_chunk")] * 2
    skips = eventually(lambda: [r for r in read_topic(mesh, "feedback.v1")
                                if r.key == hr.chunk_id.encode()
                                and json.loads(r.value)["kind"] == "skip"],
                       "the replica's skip on feedback.v1", 60)
    assert len(skips) == 1
