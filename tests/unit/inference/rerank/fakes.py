"""Fake cross-encoders for the rerank tests: scores read from the passage, calls recorded."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np


class TableScorer:
    """Scores a pair by the number after "score=" in its passage (0 when there is none):
    a test writes the cross-encoder's verdict into the texts it searches."""

    model_id = "fake/table"
    device = "cpu"

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, str]]] = []

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.calls.append(list(pairs))
        found = [re.search(r"score=(-?[0-9.]+)", p) for _, p in pairs]
        return np.array([float(m.group(1)) if m else 0.0 for m in found], dtype=np.float32)


class GatedScorer(TableScorer):
    """Blocks inside score (past the warm-up) until released: lets requests queue up."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.entered.set()
        self.gate.wait(5)
        return super().score(pairs)


def model_folder(parent: Path, config: object = None, weights: bool = True,
                 tokenizer: bool = True) -> Path:
    """A folder shaped like a one-label cross-encoder, for the settings check (nothing in
    it is a real model: tests that load one use tests/support/tinyreranker.py)."""
    path = parent / "ce"
    path.mkdir()
    config = {"id2label": {"0": "LABEL_0"}} if config is None else config
    (path / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    if weights:
        (path / "model.safetensors").write_bytes(b"\0")
    if tokenizer:
        (path / "tokenizer.json").write_text("{}")
    return path
