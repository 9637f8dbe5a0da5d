"""The stage against real parts: a tiny random BERT cross-encoder loaded from its folder.

The folder is built here (tests/support/tinyreranker.py: random weights, the real MiniLM
tokenizer) and loaded the way the service loads one, from STREAMRAG_INFERENCE_RERANKER_PATH.
Every score is checked against the same model run directly on one pair at a time, with no
padding and no batching, so the service's tokenising, grouping and padding must not change it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from scripts.benchlib.tinyreranker import build_tiny_reranker
from services.inference.rerank.model import CrossEncoder, RerankerLoadError
from services.inference.rerank.stage import RerankStage
from services.inference.runtime import load_reranker
from services.inference.settings import InferenceSettings
from services.inference.telemetry.metrics import InferenceMetrics
from shared.batching.queue import BatchLimits
from shared.encoder.passage import passage
from tests.unit.inference.fakes import hit

QUESTION = "why did the payment gateway time out at checkout"
TEXTS = ("Lunch was late again on Friday.",
         "The payment gateway timed out at checkout because its certificate expired.",
         "Disk usage on the broker reached ninety percent. " * 8,
         "Checkout failed.",
         "Rotating the logs freed the disk and usage fell to forty percent.",
         "Certificates were renewed and the gateway recovered within minutes.")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_reranker(tmp_path_factory.mktemp("reranker") / "tiny-cross-encoder")


def direct(folder: Path, pairs: list[tuple[str, str]]) -> list[float]:
    """Each pair's score from the model itself: one pair per forward pass, nothing padded."""
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    out = []
    with torch.inference_mode():
        for question, text in pairs:
            enc = tokenizer(question, text, truncation=True, max_length=256,
                            return_tensors="pt")
            out.append(float(model(**enc).logits[0, 0]))
    return out


def test_the_service_loader_reads_the_folder_from_the_settings(folder: Path) -> None:
    scorer = load_reranker(InferenceSettings(reranker_path=folder, device="cpu"))
    assert isinstance(scorer, CrossEncoder)
    assert scorer.model_id == "tiny-cross-encoder" and str(scorer.device) == "cpu"
    assert load_reranker(InferenceSettings()) is None  # off by default


def test_scores_match_the_model_run_pair_by_pair_whatever_the_grouping(folder: Path) -> None:
    pairs = [(QUESTION, t) for t in TEXTS]
    expected = direct(folder, pairs)
    assert max(expected) - min(expected) > 0.05  # distinct enough that the order is defined
    for budget, several in ((100_000, False), (120, True)):
        scorer = CrossEncoder(folder, "cpu", token_budget=budget)
        rows: list[int] = []
        scorer.model.register_forward_hook(
            lambda m, args, kw, out, rows=rows: rows.append(len(kw["input_ids"])),
            with_kwargs=True)
        got = scorer.score(pairs)
        np.testing.assert_allclose(got, expected, atol=1e-5)
        assert sum(rows) == len(pairs) and (len(rows) > 1) == several, (budget, rows)
    assert CrossEncoder(folder, "cpu").score([]).shape == (0,)


def test_the_stage_reorders_hits_by_the_models_scores(folder: Path) -> None:
    hits = [hit(f"c{i}", 1.0 - i / 10, text) for i, text in enumerate(TEXTS)]
    expected = direct(folder, [(QUESTION, passage("t", t)) for t in TEXTS])
    best_first = [f"c{i}" for i in np.argsort(expected, kind="stable")[::-1]]
    assert best_first != [h.chunk_id for h in hits]  # the model does change the order

    async def go() -> tuple[list[str], tuple[float | None, ...], list[int]]:
        stage = RerankStage(5, BatchLimits(16_384, 8), 16, 256, InferenceMetrics())
        stage.attach(CrossEncoder(folder, "cpu"))
        stage.start()
        try:
            outs = await asyncio.gather(*(stage.rerank(QUESTION, hits, top_k=4)
                                          for _ in range(3)))
        finally:
            await stage.stop()
        assert all(o == outs[0] for o in outs)
        return [h.chunk_id for h in outs[0].hits], outs[0].scores, stage.batcher.batches
    order, scores, batches = asyncio.run(go())
    head = sorted(range(5), key=lambda i: -expected[i])  # the first 5 are the candidates
    assert order == [f"c{i}" for i in head][:4]
    np.testing.assert_allclose(scores, [expected[i] for i in head][:4], atol=1e-5)
    assert sum(batches) == 3  # three queries through the batcher, however they were cut


def test_cuda_asked_for_on_a_machine_without_one_falls_back_to_the_cpu(folder: Path) -> None:
    if torch.cuda.is_available():
        scorer = CrossEncoder(folder, "cuda")
        assert scorer.device.type == "cuda" and scorer.dtype == torch.float16
        return
    scorer = CrossEncoder(folder, "cuda")
    assert scorer.device.type == "cpu" and scorer.dtype == torch.float32
    assert scorer.score([(QUESTION, TEXTS[1])]).shape == (1,)


def test_unreadable_weights_fail_at_load_naming_the_variable(folder: Path,
                                                             tmp_path: Path) -> None:
    broken = build_tiny_reranker(tmp_path / "broken")
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(RerankerLoadError, match="STREAMRAG_INFERENCE_RERANKER_PATH=.*broken"):
        CrossEncoder(broken, "cpu")
