"""Embed, Feedback, auth, TLS, a full queue, deadline_ms, metrics and the generative path."""

from __future__ import annotations

import asyncio
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from services.cli.mesh import free_port
from services.inference.runtime import InferenceRuntime
from services.inference.settings import InferenceSettings
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.settings import KafkaSettings
from tests.support.polling import eventually_async
from tests.unit.inference.fakes import FakeSearch, GatedEncoder, WordEncoder
from tests.unit.inference.serving import (
    CHUNKS,
    SERVING,
    full_encoder_queue,
    health,
    serving,
    stub,
    until_status,
)


def test_embed_returns_the_encoders_vectors_in_order() -> None:
    async def go() -> pb.EmbedResponse:
        async with serving(FakeSearch(CHUNKS)) as (_, channel):
            return await stub(channel).Embed(pb.EmbedRequest(texts=["disk full", "lunch"]))
    response = asyncio.run(go())
    expected = WordEncoder().encode(["disk full", "lunch"])
    got = np.array([list(v.values) for v in response.vectors], dtype=np.float32)
    assert (response.model_id, response.dim) == ("fake/words", 64)
    np.testing.assert_allclose(got, expected, atol=1e-6)


@pytest.mark.parametrize(("texts", "reason"), [([], "texts_count_out_of_range"),
                                               (["x"] * 65, "texts_count_out_of_range"),
                                               (["ok", "  "], "bad_text")])
def test_bad_embed_requests_name_the_field(texts: list[str], reason: str) -> None:
    async def go() -> grpc.aio.AioRpcError:
        async with serving(FakeSearch(CHUNKS)) as (_, channel):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub(channel).Embed(pb.EmbedRequest(texts=texts))
            return err.value
    err = asyncio.run(go())
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "invalid texts" in err.details()
    assert ("streamrag-reason", reason) in tuple(err.trailing_metadata())


def test_feedback_reaches_the_sink_and_bad_kinds_are_refused() -> None:
    sent: list[tuple[str, str]] = []
    tagged: list[tuple[str, int]] = []

    async def sink(chunk_id: str, kind: str, variant: str, config_version: int) -> None:
        sent.append((chunk_id, kind))
        tagged.append((variant, config_version))

    async def go() -> grpc.aio.AioRpcError:
        async with serving(FakeSearch(CHUNKS), runtime_kw={"feedback_sink": sink}) as (
                _, channel):
            ok = await stub(channel).Feedback(pb.FeedbackRequest(
                chunk_id="c-fix", kind=pb.FEEDBACK_KIND_CLICK, variant="canary",
                config_version=3))
            assert ok.accepted
            await stub(channel).Feedback(pb.FeedbackRequest(
                chunk_id="c-lunch", kind=pb.FEEDBACK_KIND_SKIP))
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub(channel).Feedback(pb.FeedbackRequest(chunk_id="c-fix"))
            return err.value
    err = asyncio.run(go())
    assert sent == [("c-fix", "click"), ("c-lunch", "skip")]
    assert tagged == [("canary", 3), ("", 0)]  # the variant reported, else none
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "invalid kind" in err.details()


class CountsView:
    def __init__(self, counts: dict[str, tuple[int, int]]) -> None:
        self.table = counts

    def counts(self, chunk_id: str) -> tuple[int, int]:
        return self.table.get(chunk_id, (0, 0))


@pytest.mark.parametrize(("weight", "expected"), [
    (0.0, ["c-disk", "c-fix", "c-lunch"]),  # weight 0: retrieval order
    (0.05, ["c-lunch", "c-fix", "c-disk"]),  # 10 clicks lift lunch, 3 skips sink disk
])
def test_feedback_weight_boosts_and_demotes_chunks(weight: float, expected: list[str]) -> None:
    view = CountsView({"c-lunch": (10, 0), "c-disk": (0, 3)})

    async def go() -> pb.QueryResponse:
        settings = InferenceSettings(grpc_port=0, grace_s=0, feedback_weight=weight,
                                     feedback_max_boost=0.6)
        runtime = InferenceRuntime(settings, KafkaSettings(), search=FakeSearch(CHUNKS),
                                   encoder_factory=WordEncoder, feedback_view=view)
        await runtime.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
                await until_status(channel, SERVING)
                return await stub(channel).Query(pb.QueryRequest(question="disk", top_k=3))
        finally:
            await runtime.stop()
    response = asyncio.run(go())
    assert [c.chunk_id for c in response.citations] == expected
    # The scores shown stay the retrieval scores; only the order moves.
    assert {c.chunk_id: c.score for c in response.citations}["c-disk"] == pytest.approx(0.9)


def test_bearer_token_is_required_except_for_health() -> None:
    async def go() -> None:
        async with serving(FakeSearch(CHUNKS), wait=False, auth_token="s3cret") as (_, channel):
            assert await health(channel) in (SERVING, 2)  # health stays open
            for metadata in [(), (("authorization", "Bearer wrong"),)]:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub(channel).Info(pb.InfoRequest(), metadata=metadata)
                assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
                assert "bearer token" in err.value.details()
            info = await stub(channel).Info(pb.InfoRequest(),
                                            metadata=(("authorization", "Bearer s3cret"),))
            assert info.shards == 4
    asyncio.run(go())


def test_tls_serves_only_over_tls(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)

    async def go() -> None:
        settings = InferenceSettings(grpc_port=0, grace_s=0, tls_cert=cert, tls_key=key)
        runtime = InferenceRuntime(settings, KafkaSettings(), search=FakeSearch(CHUNKS),
                                   encoder_factory=WordEncoder)
        await runtime.start()
        try:
            creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
            async with grpc.aio.secure_channel(f"localhost:{runtime.port}", creds) as channel:
                assert (await stub(channel).Info(pb.InfoRequest())).shards == 4
            async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub(channel).Info(pb.InfoRequest(), timeout=2)
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        finally:
            await runtime.stop()
    asyncio.run(go())


def test_full_queue_is_resource_exhausted_saying_so() -> None:
    async def go() -> tuple[grpc.aio.AioRpcError, list[Any]]:
        async with full_encoder_queue(FakeSearch(CHUNKS)) as (runtime, channel, release):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub(channel).Query(pb.QueryRequest(question="disk"))
            assert runtime.metrics.sample("streamrag_inference_failures_total",
                                          {"method": "Query", "reason": "queue_full"}) == 1
            return err.value, await release()
    err, done = asyncio.run(go())
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "queue full: 2 requests already waiting" in err.details()
    assert len(done) == 3 and all(len(r.vectors) == 1 for r in done)


def test_deadline_ms_is_honoured_and_a_cancelled_wait_frees_its_slot() -> None:
    encoder = GatedEncoder()

    async def go() -> None:
        async with serving(FakeSearch(CHUNKS), lambda: encoder, queue_capacity=4,
                           embed_max_batch=1) as (runtime, channel):
            blocker = asyncio.ensure_future(stub(channel).Embed(pb.EmbedRequest(texts=["a"])))
            await eventually_async(lambda: runtime.engine.embedder.batches,
                                   "the blocking request's batch")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub(channel).Query(pb.QueryRequest(question="disk", deadline_ms=200))
            assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert "deadline_ms 200 passed" in err.value.details()
            assert len(runtime.engine.embedder.queue) == 0  # the timed-out query left it
            encoder.gate.set()
            assert len((await blocker).vectors) == 1
            assert runtime.engine.embedder.batches == [1]  # the query was never encoded
    asyncio.run(go())


def test_queries_that_queue_behind_a_busy_encoder_share_its_next_batch() -> None:
    port = free_port()
    encoder = GatedEncoder()

    async def go() -> tuple[list[int], str]:
        async with serving(FakeSearch(CHUNKS), lambda: encoder,
                           metrics_port=port) as (runtime, channel):
            embedder = runtime.engine.embedder
            requests = [asyncio.ensure_future(
                stub(channel).Query(pb.QueryRequest(question=f"disk {i}"))) for i in range(6)]
            # The first batch holds the encoder; the others queue behind it (no wait timer).
            await eventually_async(
                lambda: embedder.batches and len(embedder.queue) >= 6 - embedder.batches[0],
                "the other questions queued behind the first batch")
            encoder.gate.set()
            answers = await asyncio.gather(*requests)
            assert all(a.citations for a in answers)
            text = await asyncio.to_thread(
                lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read())
            return runtime.engine.embedder.batches, text.decode()
    batches, text = asyncio.run(go())
    questions = batches[:1] if batches[0] == 6 else batches[:2]  # the first, then the rest
    assert sum(questions) == 6 and max(questions) > 1
    assert sum(batches) == 12  # and the 6 answers' sentences
    assert 'streamrag_inference_batch_size_count{batcher="embed"}' in text
    assert 'streamrag_inference_request_seconds_count{method="Query"} 6.0' in text
