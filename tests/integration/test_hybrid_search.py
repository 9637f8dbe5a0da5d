"""Hybrid search through the real mesh: a word only BM25 can match lifts its document."""

from __future__ import annotations

import json

import grpc
import numpy as np
import pytest

from services.cli.mesh import Endpoints
from services.inference.search.fusion import fuse
from services.inference.settings import InferenceSettings
from shared.contract.records import SearchHit
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from tests.support.mesh import produce, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
QUESTION = "why did the checkout payment fail with code QX7Z"
NEEDLE = ("Vault maintenance", "Rotate the card vault token every ninety days (runbook QX7Z).")
# On the question's topic in other words: the model prefers them, BM25 cannot match them.
OTHERS = [("Incident review",
           "Card purchases at the till were declined because the processor timed out."),
          ("Card processor outage", "Purchases in the online shop were refused for an hour."),
          ("Release notes", "The basket page now shows the order summary first.")]


def test_the_mesh_fuses_dense_and_bm25_ranks_as_the_default_settings_say(
        mesh: Endpoints) -> None:
    domain = uid("hybrid")
    ids = [uid("doc") for _ in range(4)]
    produce(mesh, [json.dumps({"id": i, "title": t, "text": x, "source": "hybrid-test",
                               "domain": domain}).encode()
                   for i, (t, x) in zip(ids, [NEEDLE, *OTHERS], strict=True)])
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        stub = pb_grpc.InferenceStub(channel)

        def retrieve() -> list[pb.Citation]:
            return list(stub.Retrieve(pb.RetrieveRequest(question=QUESTION, domain=domain,
                                                         top_k=4), timeout=15).chunks)

        eventually(lambda: len(retrieve()) == 4, "all four documents searchable")
        got = retrieve()
        # What the fusion must give: inner products of the question's vector as inference
        # encodes it (Embed: the question encoder, int8 by default) with the chunks' as the
        # embedding stage stores them (the fp32 chunk encoder; a chunk's input is
        # "title\ntext"), and a BM25 score for the needle only (the only shared word).
        texts = [f"{t}\n{x}" for t, x in [NEEDLE, *OTHERS]]
        vectors = stub.Embed(pb.EmbedRequest(texts=[QUESTION]), timeout=30).vectors
    from shared.encoder.embedder import Encoder

    question = np.array(list(vectors[0].values), dtype=np.float32)
    dense = [float(s) for s in Encoder(device="cpu").encode(texts) @ question]
    hits = [SearchHit(chunk_id=i, doc_id=i, version=1, score=d, event_time=0, text="",
                      domain=domain, source="s", lexical=1.0 if i == ids[0] else 0.0)
            for i, d in zip(ids, dense, strict=True)]
    want = fuse(hits, 4, InferenceSettings().fusion())
    by_dense = [i for _, i in sorted(zip(dense, ids, strict=True), reverse=True)]
    assert [h.doc_id for h in want] != by_dense  # the premise: BM25 changes the order
    assert by_dense[0] != ids[0]
    assert [c.doc_id for c in got] == [h.doc_id for h in want]
    assert [c.score for c in got] == pytest.approx([h.score for h in want], abs=1e-3)
    assert got[[c.doc_id for c in got].index(ids[0])].text == NEEDLE[1]
