"""Query audit on the real mesh: each answered gRPC call leaves a signed record on
audit.queries.v1 naming what was shown and cited, the ledger anchors it on anvil, and
`streamrag audit prove --query` proves it; a forged record is dead-lettered and fails."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import grpc
import pytest
from aiokafka import AIOKafkaProducer
from pydantic import SecretStr

from services.cli.mesh import Endpoints as RunningMesh
from shared.contract.audit_signing import DEV_QUERY_SIGNER, sign
from shared.contract.codec import encode
from shared.contract.query_audit import parse_batch_id
from shared.contract.records import DeadLetter, QueryAudit
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc
from tests.support.mesh import chunks_of, produce, query, read_topic, streamrag_audit, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
STRANGER_KEY = SecretStr("0x" + "42" * 32)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def audits(mesh: RunningMesh) -> list[tuple[Any, QueryAudit]]:
    out = []
    for r in read_topic(mesh, "audit.queries.v1"):
        try:
            out.append((r, QueryAudit.model_validate_json(r.value)))
        except ValueError:
            continue
    return out


def send_forged(mesh: RunningMesh, records: list[bytes]) -> None:
    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=mesh.bootstrap)
        await producer.start()
        try:
            for value in records:
                await producer.send_and_wait("audit.queries.v1", value, key=b"forged")
        finally:
            await producer.stop()
    asyncio.run(go())


@pytest.fixture(scope="module")
def asked(mesh: RunningMesh) -> dict[str, Any]:
    """Three questions answered over gRPC (Query, StreamQuery, Retrieve) about a fresh
    document, and what each reply showed and cited."""
    doc_id, tag = uid("qaudit"), uid("kiln")
    text = (f"The {tag} kiln overheated on Tuesday because its thermocouple failed. "
            f"Replacing the {tag} thermocouple fixed the kiln.")
    produce(mesh, [json.dumps({"id": doc_id, "text": text, "source": "qaudit"}).encode()],
            key=doc_id.encode())
    eventually(lambda: chunks_of(mesh, f"why did the {tag} kiln overheat", doc_id),
               "the document to become searchable")
    questions = {m: f"{m}: what fixed the {tag} kiln?" for m in
                 ("Query", "StreamQuery", "Retrieve")}
    replies: dict[str, Any] = {"Query": query(mesh, questions["Query"], top_k=3)}
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        streamed = list(stub.StreamQuery(inference_pb2.QueryRequest(
            question=questions["StreamQuery"], top_k=3), timeout=15))
        replies["StreamQuery"] = (streamed[0].start, streamed[-1].end)
        replies["Retrieve"] = stub.Retrieve(inference_pb2.RetrieveRequest(
            question=questions["Retrieve"], top_k=3), timeout=15)
    return {"doc_id": doc_id, "questions": questions, "replies": replies}


def mine(mesh: RunningMesh, asked: dict[str, Any]) -> dict[str, tuple[Any, QueryAudit]]:
    hashes = {sha(q): m for m, q in asked["questions"].items()}
    return {hashes[a.question_sha256]: (r, a) for r, a in audits(mesh)
            if a.question_sha256 in hashes}


def test_each_answered_call_is_audited_with_what_it_showed_and_cited(
        mesh: RunningMesh, asked: dict[str, Any]) -> None:
    found = eventually(lambda: (lambda m: m if len(m) == 3 else None)(mine(mesh, asked)),
                       "an audit record for each of the three calls")
    replies = asked["replies"]
    shown = {"Query": replies["Query"].citations,
             "StreamQuery": replies["StreamQuery"][0].citations,
             "Retrieve": replies["Retrieve"].chunks}
    cited = {"Query": list(replies["Query"].cited_chunk_ids),
             "StreamQuery": list(replies["StreamQuery"][1].cited_chunk_ids), "Retrieve": []}
    for method, (record, audit) in found.items():
        assert audit.method == method and record.key == audit.query_id.encode()
        assert list(audit.shown) == [c.chunk_id for c in shown[method]]
        assert list(audit.docs) == [f"{c.doc_id}@v{c.version}" for c in shown[method]]
        assert asked["doc_id"] in {c.doc_id for c in shown[method]}
        assert list(audit.cited) == cited[method]
        assert (audit.principal, audit.principal_kind, audit.scope) == ("", "open", "*")
        assert audit.signer == DEV_QUERY_SIGNER
        assert asked["questions"][method].encode() not in record.value  # only its hash
    assert cited["Query"] and set(cited["Query"]) <= set(found["Query"][1].shown)
    assert found["Query"][1].answer_mode == replies["Query"].answer_mode != ""
    assert found["Retrieve"][1].answer_mode == ""


def test_each_audit_is_anchored_and_proven_on_chain(mesh: RunningMesh,
                                                    asked: dict[str, Any]) -> None:
    found = eventually(lambda: (lambda m: m if len(m) == 3 else None)(mine(mesh, asked)),
                       "the three audit records")
    for method, (record, audit) in found.items():
        def proven(qid: str = audit.query_id) -> Any:
            code, proof = streamrag_audit(mesh, "prove", "--query", qid)
            return proof if code == 0 else None
        proof = eventually(proven, f"the {method} audit to be anchored and proven",
                           timeout_s=90)
        assert proof["checks"] == {"signed_by_known_signer": True, "anchored": True,
                                   "proof_holds": True, "leaf_count_matches": True,
                                   "anchor_on_chain_matches": True}
        name = parse_batch_id(proof["batch_id"])
        assert name is not None and name.partition == record.partition
        assert name.first <= record.offset <= name.last
        assert proof["record"]["cited"] == list(audit.cited)
        assert proof["on_chain"]["root"] == proof["root"]
        assert proof["on_chain"]["signer"] == DEV_QUERY_SIGNER
        assert proof["tx_hash"].startswith("0x") and proof["block_number"] > 0
        anchors = {json.loads(r.value)["batch_id"]: json.loads(r.value)
                   for r in read_topic(mesh, "ledger.anchors.v1")}
        assert anchors[proof["batch_id"]]["tx_hash"] == proof["tx_hash"]
        # An auditor who knows the question finds the id to prove.
        code, listed = streamrag_audit(mesh, "queries", "--question",
                                       asked["questions"][method])
        assert code == 0 and [q["query_id"] for q in listed] == [audit.query_id]


def test_a_forged_record_is_dead_lettered_and_fails_its_proof(
        mesh: RunningMesh, asked: dict[str, Any]) -> None:
    found = eventually(lambda: mine(mesh, asked).get("Query"), "the Query's audit record")
    real = found[1]
    stranger = sign(real.model_copy(update={"query_id": uid("forged"), "cited": ("c-x",)}),
                    STRANGER_KEY)
    # The real record's id and signature, another citation: the signature no longer holds.
    tampered = real.model_copy(update={"cited": ("c-planted",)})
    payloads = [encode(stranger), encode(tampered)]
    send_forged(mesh, payloads)

    def dead_lettered() -> Any:
        letters = [DeadLetter.model_validate_json(r.value)
                   for r in read_topic(mesh, "deadletter.v1")]
        hashes = {hashlib.sha256(p).hexdigest() for p in payloads}
        got = {(d.stage, d.reason) for d in letters if d.payload_sha256 in hashes}
        return got if len(got) == 2 else None
    assert eventually(dead_lettered, "both forgeries to be dead-lettered") == {
        ("ledger", "unknown_signer"), ("ledger", "bad_signature")}

    code, proof = streamrag_audit(mesh, "prove", "--query", stranger.query_id)
    assert code == 1
    assert proof["checks"]["signed_by_known_signer"] is False
    assert proof["checks"]["proof_holds"] is False
    # The real record's id still proves the real record, never the planted citation.
    code, proof = streamrag_audit(mesh, "prove", "--query", real.query_id)
    assert code == 0 and proof["copies"] == 2
    assert proof["record"]["cited"] == list(real.cited) != ["c-planted"]
    code, _ = streamrag_audit(mesh, "prove", "--query", "no-such-query")
    assert code == 2
    # Every anchored query batch still verifies: a forgery is no leaf of any batch.
    code, report = streamrag_audit(mesh, "verify", "--queries")
    assert code == 0 and report["ok"], report
    assert {b["batch_id"]: b["problems"] for b in report["batches"]}[proof["batch_id"]] == []
    assert not any(stranger.query_id in u for u in report["unanchored"])
