"""The generative answer path against the real mesh: a second inference worker with an LM.

A real `python -m services.inference` process runs next to the session mesh with a tiny
random-weight GPT-2 (tests/support/tinylm.py) as its generator, on its own gRPC
port and data dir. It retrieves through the mesh's real broker and retrieval shards, and
answers by generating. Its text is meaningless, but greedy decoding is deterministic: the
test loads the same weights itself and decodes the prompt the service must have built
(instruction, the retrieved citations, the question) with plain Hugging Face calls and no
KV cache, so every answer is checked token for token, not just for being non-empty.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from scripts.benchlib.tinylm import build_tiny_lm
from services.cli.mesh import Endpoints, free_port
from services.cli.procs import Child, service_argv, spawn, stop
from services.inference.answer.generative.prompt import pack_prompt
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from tests.support.grpc_worker import wait_serving
from tests.support.mesh import chunks_of, produce, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
DOC = ("The nightly ledger export stalled because the object store bucket ran out of quota; "
       "raising the quota fixed it.")
QUESTION = "why did the nightly ledger export stall"
# Four questions of different lengths: batched together, their prompts need left padding.
QUESTIONS = (QUESTION, "what fixed the ledger export",
             "which bucket ran out of quota during the nightly export", "ledger quota")
CAPS = (3, 5, 7, 9)  # max_new_tokens per concurrent call, one per question
MAX_NEW_CAP = 24  # the worker's max_new_tokens_cap
PROMPT_BUDGET = 200  # prompt tokens; under the tiny model's 256 positions
TIMEOUT_S = 60  # per call: the machine may be busy with other suites


@dataclass(frozen=True)
class Generative:
    """The generative worker and the document it can retrieve."""

    target: str
    metrics_url: str
    lm_dir: Path
    child: Child
    doc_id: str
    source: str


class Reference:
    """The same tiny model, decoded greedily here without the service's code."""

    def __init__(self, folder: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
        self.eos = self.tokenizer.sep_token_id  # tinylm's eos_token_id

    def prompt(self, question: str, citations: Any) -> str:
        """The prompt the service builds from the question and the retrieved chunks."""
        def count(text: str) -> int:
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        prompt, packed = pack_prompt(question, [c.text for c in citations], count,
                                     PROMPT_BUDGET)
        assert packed == tuple(range(1, len(citations) + 1))  # every citation fits
        return prompt

    def prompt_tokens(self, prompt: str) -> int:
        return len(self.tokenizer(prompt)["input_ids"])

    def greedy(self, prompt: str, max_new: int) -> tuple[str, int, str]:
        """(text, completion tokens, finish reason) of greedy decoding, one token a pass."""
        import torch

        ids = self.tokenizer(prompt, return_tensors="pt")["input_ids"]
        new: list[int] = []
        with torch.inference_mode():
            while len(new) < max_new:
                token = int(self.model(input_ids=ids).logits[0, -1].argmax())
                if token == self.eos:
                    return self.decode(new), len(new), "stop"
                new.append(token)
                ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        return self.decode(new), len(new), "length"

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_lm(tmp_path_factory.mktemp("tiny-lm"))


@pytest.fixture(scope="module")
def reference(lm_dir: Path) -> Reference:
    return Reference(lm_dir)


@pytest.fixture(scope="module")
def generative(mesh: Endpoints, lm_dir: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Generative]:
    """A second inference worker with the tiny LM, and one document both workers can find."""
    work = tmp_path_factory.mktemp("generative")
    port, metrics_port = free_port(), free_port()
    env = {"STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
           "STREAMRAG_INFERENCE_GRPC_PORT": str(port),
           "STREAMRAG_INFERENCE_METRICS_PORT": str(metrics_port),
           "STREAMRAG_DATA_DIR": str(work / "data"),
           "STREAMRAG_INFERENCE_GENERATOR_PATH": str(lm_dir),
           "STREAMRAG_INFERENCE_ANSWER_MODE": "generative",
           # Its model has random weights, so no answer is grounded: these tests are about
           # decoding and batching, and serve what it writes (the replacement of unsupported
           # answers is tests/unit/inference/answer/test_supported_answers.py).
           "STREAMRAG_INFERENCE_GENERATION_MIN_SUPPORT": "0",
           # The reference decodes on the CPU in fp32; so must the worker, to match it.
           "STREAMRAG_INFERENCE_DEVICE": "cpu",
           "STREAMRAG_INFERENCE_PROMPT_TOKEN_BUDGET": str(PROMPT_BUDGET),
           "STREAMRAG_INFERENCE_MAX_NEW_TOKENS_CAP": str(MAX_NEW_CAP),
           "STREAMRAG_INFERENCE_SHARD_TIMEOUT_S": "5",
           # Every call generates: these tests compare decoding and batching, which a
           # repeated question answered from the answer cache would skip.
           "STREAMRAG_INFERENCE_ANSWER_CACHE": "false"}
    child = spawn("inference-generative", service_argv("inference"), work / "run", env)
    target = f"127.0.0.1:{port}"
    try:
        wait_serving(target, child, 240)
        doc_id, source = uid("gen"), uid("gen-src")
        produce(mesh, [json.dumps({"id": doc_id, "text": DOC, "source": source,
                                   "title": "Ledger export stall"}).encode()],
                key=doc_id.encode())
        # Searchable through the mesh's own (extractive) instance first ...
        eventually(lambda: chunks_of(mesh, QUESTION, doc_id, source=source),
                   "the document to become searchable")
        g = Generative(target, f"http://127.0.0.1:{metrics_port}/metrics", lm_dir, child,
                       doc_id, source)
        # ... then through the generative one (its reply reader is already positioned).
        eventually(lambda: _retrieves(g), "the generative worker to retrieve the document")
        yield g
    finally:
        stop([child], 15)


def _retrieves(g: Generative) -> bool:
    with grpc.insecure_channel(g.target) as channel:
        answer = pb_grpc.InferenceStub(channel).Query(request(g, max_new_tokens=1),
                                                      timeout=TIMEOUT_S)
    return g.doc_id in {c.doc_id for c in answer.citations}


@pytest.fixture(scope="module")
def stub(generative: Generative) -> Iterator[Any]:
    with grpc.insecure_channel(generative.target) as channel:
        yield pb_grpc.InferenceStub(channel)


def request(g: Generative, question: str = QUESTION, max_new_tokens: int = 12,
            **kw: Any) -> pb.QueryRequest:
    return pb.QueryRequest(question=question, source=g.source, top_k=5,
                           max_new_tokens=max_new_tokens, **kw)


def check_finish(reason: str, completion_tokens: int, cap: int) -> None:
    """"length" spends exactly the cap; random weights may still say EOS ("stop") early."""
    assert reason in ("length", "stop")
    if reason == "length":
        assert completion_tokens == cap
    else:
        assert completion_tokens < cap


def test_info_reports_the_generator(generative: Generative, stub: Any) -> None:
    info = stub.Info(pb.InfoRequest(), timeout=TIMEOUT_S)
    assert info.answer_mode == "generative" and info.ready
    assert info.generator_model == generative.lm_dir.name
    assert info.generator_device == "cpu" == info.device
    assert info.shards == 4 and info.dim > 0 and info.model_id
    assert info.limits.max_new_tokens == MAX_NEW_CAP


def test_query_generates_over_the_retrieved_chunks(generative: Generative, stub: Any,
                                                   reference: Reference) -> None:
    answer = stub.Query(request(generative), timeout=TIMEOUT_S)
    assert answer.answer_mode == "generative" and not answer.partial
    assert not answer.missing_shards and not answer.shard_errors
    assert generative.doc_id in {c.doc_id for c in answer.citations}
    assert {c.source for c in answer.citations} == {generative.source}
    assert DOC in {c.text for c in answer.citations}
    prompt = reference.prompt(QUESTION, answer.citations)
    text, tokens, reason = reference.greedy(prompt, 12)
    assert answer.answer == text and text.strip()
    assert (answer.finish_reason, answer.usage.completion_tokens) == (reason, tokens)
    check_finish(answer.finish_reason, answer.usage.completion_tokens, 12)
    assert answer.usage.unit == "tokens"
    assert answer.usage.prompt_tokens == reference.prompt_tokens(prompt)
    assert set(answer.cited_chunk_ids) <= {c.chunk_id for c in answer.citations}
    assert answer.timings.answer_ms > 0 and answer.timings.total_ms >= answer.timings.answer_ms


def test_stream_query_streams_citations_deltas_then_the_end(generative: Generative,
                                                             stub: Any) -> None:
    req = request(generative, max_new_tokens=10)
    answer = stub.Query(req, timeout=TIMEOUT_S)
    events = list(stub.StreamQuery(req, timeout=TIMEOUT_S))
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[0] == "start" and kinds[-1] == "end", kinds
    assert set(kinds[1:-1]) == {"delta"}, kinds
    start, end = events[0].start, events[-1].end
    assert start.answer_mode == "generative" and not start.partial
    assert [c.chunk_id for c in start.citations] == [c.chunk_id for c in answer.citations]
    assert generative.doc_id in {c.doc_id for c in start.citations}
    deltas = [e.delta for e in events[1:-1]]
    assert all(deltas)
    # Greedy, same prompt: the stream says exactly what Query said, token by token.
    assert "".join(deltas) == answer.answer
    assert (end.finish_reason, end.usage.completion_tokens, end.usage.prompt_tokens) == (
        answer.finish_reason, answer.usage.completion_tokens, answer.usage.prompt_tokens)
    assert end.usage.unit == "tokens"
    check_finish(end.finish_reason, end.usage.completion_tokens, 10)
    if end.finish_reason == "length":
        assert len(deltas) > 1  # streamed as decoded, not one lump at the end
    assert list(end.cited_chunk_ids) == list(answer.cited_chunk_ids)


def _generate_batches(g: Generative) -> tuple[float, float]:
    """(batches run, requests in them) of the worker's generation batcher so far."""
    with urllib.request.urlopen(g.metrics_url, timeout=10) as page:
        text = page.read().decode()
    values = {s.name: s.value for family in text_string_to_metric_families(text)
              for s in family.samples if s.labels.get("batcher") == "generate"}
    return (values.get("streamrag_inference_batch_size_count", 0.0),
            values.get("streamrag_inference_batch_size_sum", 0.0))


async def _stream_all(target: str, requests: list[pb.QueryRequest]) -> list[list[Any]]:
    async with grpc.aio.insecure_channel(target) as channel:
        aio_stub = pb_grpc.InferenceStub(channel)

        async def one(req: pb.QueryRequest) -> list[Any]:
            return [e async for e in aio_stub.StreamQuery(req, timeout=TIMEOUT_S)]
        return list(await asyncio.gather(*(one(r) for r in requests)))


def test_concurrent_streams_share_a_batch_and_each_stops_at_its_own_cap(
        generative: Generative, reference: Reference) -> None:
    requests = [request(generative, q, cap) for q, cap in zip(QUESTIONS, CAPS, strict=True)]
    # The calls meet in one batch when one's retrieval ends while another is generating
    # (it joins the running batch, or the next one is cut with everything queued); on a
    # busy machine a round may miss, so allow a few.
    for _ in range(3):
        batches_before, _ = _generate_batches(generative)
        results = asyncio.run(_stream_all(generative.target, requests))
        batches_after, _ = _generate_batches(generative)
        for events, question, cap in zip(results, QUESTIONS, CAPS, strict=True):
            kinds = [e.WhichOneof("event") for e in events]
            assert kinds[0] == "start" and kinds[-1] == "end" and len(kinds) >= 3, kinds
            start, end = events[0].start, events[-1].end
            assert generative.doc_id in {c.doc_id for c in start.citations}
            check_finish(end.finish_reason, end.usage.completion_tokens, cap)
            # Each row decoded its own prompt: left padding and dropping finished rows
            # changed nothing in the others.
            prompt = reference.prompt(question, start.citations)
            text, tokens, reason = reference.greedy(prompt, cap)
            assert "".join(e.delta for e in events[1:-1]) == text, (question, cap)
            assert (end.finish_reason, end.usage.completion_tokens) == (reason, tokens)
            assert end.usage.prompt_tokens == reference.prompt_tokens(prompt)
        if batches_after - batches_before < len(requests):
            return  # at least two of the four calls were generated together
    pytest.fail("three rounds of four concurrent calls never shared a generation batch")


def test_stop_sequence_cuts_the_answer_before_it(generative: Generative, stub: Any) -> None:
    full = stub.Query(request(generative, max_new_tokens=16), timeout=TIMEOUT_S)
    words = full.answer.split()
    assert len(words) >= 4, full.answer
    stop_at = words[len(words) // 2]
    expected = full.answer[: full.answer.find(stop_at)]
    cut = stub.Query(request(generative, max_new_tokens=16, stop=[stop_at]), timeout=TIMEOUT_S)
    assert cut.answer == expected and stop_at not in cut.answer
    assert cut.finish_reason == "stop"
    assert cut.usage.completion_tokens < full.usage.completion_tokens
    events = list(stub.StreamQuery(request(generative, max_new_tokens=16, stop=[stop_at]),
                                   timeout=TIMEOUT_S))
    assert "".join(e.delta for e in events[1:-1]) == expected
    assert events[-1].end.finish_reason == "stop"


def test_max_new_tokens_above_the_cap_is_held_to_it(generative: Generative, stub: Any,
                                                    reference: Reference) -> None:
    answer = stub.Query(request(generative, max_new_tokens=MAX_NEW_CAP + 50),
                        timeout=TIMEOUT_S)
    text, tokens, reason = reference.greedy(reference.prompt(QUESTION, answer.citations),
                                            MAX_NEW_CAP)
    assert (answer.answer, answer.finish_reason, answer.usage.completion_tokens) == (
        text, reason, tokens)
    check_finish(answer.finish_reason, answer.usage.completion_tokens, MAX_NEW_CAP)
