"""The cross-encoder runtime: a Hugging Face sequence-classification model scoring pairs.

Loaded from a local folder (no network) with AutoTokenizer and
AutoModelForSequenceClassification on the `device` setting: CUDA in fp16 when present (or
asked for and present), else the CPU in fp32; "cuda" on a machine without one falls back to
the CPU, as the encoder does. Pairs are tokenized once to learn their lengths, then run in
length-sorted groups that fit the token budget (shared.batching.padding), so a batch of
short pairs does not pay for the longest one. Synchronous and not thread-safe: the stage's
batcher calls it from one worker thread at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, BatchEncoding

from services.inference.rerank.folder import VARIABLE, check_model_dir
from shared.batching.padding import budget_groups
from shared.encoder.embedder import pick_device
from shared.errors import InfrastructureError


class RerankerLoadError(InfrastructureError):
    """The reranker folder passed the settings check but its model could not be loaded."""


class CrossEncoder:
    def __init__(self, path: Path, device: str = "auto", max_length: int = 256,
                 token_budget: int = 8192) -> None:
        check_model_dir(path)
        self.device = pick_device(device)
        self.dtype = torch.float16 if self.device.type == "cuda" else torch.float32
        self.max_length, self.token_budget = max_length, token_budget
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            model = AutoModelForSequenceClassification.from_pretrained(
                str(path), dtype=self.dtype, local_files_only=True)
        except Exception as exc:  # whatever the loaders raise (OSError, SafetensorError ...)
            msg = f"{VARIABLE}={path}: cannot load a cross-encoder ({type(exc).__name__}: {exc})"
            raise RerankerLoadError(msg) from exc
        if model.config.num_labels != 1:
            msg = f"{VARIABLE}={path}: {model.config.num_labels} labels; one is needed"
            raise RerankerLoadError(msg)
        self.model = model.to(self.device).eval()
        limit = getattr(model.config, "max_position_embeddings", max_length)
        self.max_length = min(max_length, int(limit))
        self.model_id = path.name

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One float32 relevance score per (question, passage) pair, in input order."""
        out = np.zeros(len(pairs), dtype=np.float32)
        if not pairs:
            return out
        lengths = [len(ids) for ids in self._tokens(pairs, padding=False)["input_ids"]]
        order = sorted(range(len(pairs)), key=lambda i: lengths[i])
        for group in budget_groups(order, lengths, self.token_budget):
            batch = self._tokens([pairs[i] for i in group], padding=True, tensors="pt")
            with torch.inference_mode():
                logits = self.model(**batch.to(self.device)).logits
            out[group] = logits[:, 0].float().cpu().numpy()
        return out

    def _tokens(self, pairs: Sequence[tuple[str, str]], padding: bool,
                tensors: str | None = None) -> BatchEncoding:
        # longest_first: the question is cut only when it alone exceeds max_length.
        return self.tokenizer([q for q, _ in pairs], [p for _, p in pairs], padding=padding,
                              truncation="longest_first", max_length=self.max_length,
                              return_tensors=tensors)
