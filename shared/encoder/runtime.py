"""Which runtime runs the sentence encoder: torch (CPU fp32 or CUDA fp16) or ONNX Runtime (CPU).

Both return the same vectors (cosine >= 0.9999, tests/unit/shared/test_encoder_runtime.py).
ONNX Runtime is the faster one for the short, small batches of the query path and about
even with torch on full 254-token chunk batches (scripts/bench_encoder), so each service
picks its own default. ONNX is CPU-only here: a CUDA device always runs torch, and so does
a machine without onnxruntime (or without onnx when the graph must first be exported), with
a warning rather than a crash. Imports of torch and onnxruntime happen in load_encoder.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import Field, model_validator
from pydantic_settings import BaseSettings

from shared.encoder.model import MODEL_ID

log = logging.getLogger(__name__)
Runtime = Literal["torch", "onnx"]


class SentenceEncoder(Protocol):
    model_id: str
    dim: int
    runtime: str
    tokenizer: Any

    @property
    def device(self) -> object: ...

    def encode(self, texts: Sequence[str], max_batch_tokens: int = 8192) -> np.ndarray: ...


class EncoderSettings(BaseSettings):
    """The encoder fields of a service's settings (it sets the env prefix and defaults)."""

    # Where the encoder runs: auto (CUDA, fp16 on torch, when present, else CPU fp32), cpu,
    # or a torch device such as cuda:1.
    device: str = "auto"
    # Which runtime encodes: torch, or ONNX Runtime (CPU only; a CUDA device or a machine
    # without onnxruntime runs torch, with a warning).
    encoder_runtime: Runtime = "torch"
    # Intra-op threads of one forward pass; 0: the runtime's default (one per core).
    encoder_threads: int = Field(default=0, ge=0)
    # ONNX: forward passes of one batch run side by side on this many threads (0: one per
    # usable core), all on the one session; torch ignores it. A question is one pass, so
    # only embedding (long batches) defaults to more than one.
    encoder_workers: int = Field(default=1, ge=0)
    # Where the exported ONNX graph (~90 MB) is cached, shared by every service and mesh
    # that runs from the same directory; exported once per model.
    model_cache_dir: Path = Path(".run/models")
    # A local sentence-transformers model folder (unset: all-MiniLM-L6-v2 from its wheel).
    model_path: Path | None = None
    # The id the model's vectors travel under; it names the model's index in retrieval, so
    # another folder must come with its own id (vectors never mix).
    model_id: str | None = None

    @model_validator(mode="after")
    def _model_named(self) -> EncoderSettings:
        if self.model_path is not None and not self.model_id:
            raise ValueError("a model_path needs its own model_id (..._MODEL_ID): the id keeps "
                             "its vectors apart from every other model's")
        return self

    def encoder_model_id(self) -> str:
        return self.model_id or MODEL_ID

    def encoder_may_run_torch(self, model_path: Path | None, int8: bool = False) -> bool:
        """Whether `load_encoder` with these settings runs torch for `model_path`, or may
        (a GPU is there): a process none of whose stages may run it can forgo torch
        (shared/worker/lean_imports.py; the ONNX export then runs in a child process)."""
        if self.encoder_runtime == "torch" or (self.device != "cpu" and _gpu_present()):
            return True
        return not onnx_ready(model_path, self.model_cache_dir, int8)


def onnx_available(need_export: bool) -> bool:
    names = ["onnxruntime", *(["onnx"] if need_export else [])]
    return all(importlib.util.find_spec(n) is not None for n in names)


def onnx_ready(model_path: Path | None, cache_dir: Path, int8: bool) -> bool:
    """ONNX Runtime is installed, and so is onnx if the graph must first be exported."""
    from shared.encoder.model import default_model_path
    from shared.encoder.onnx import graph_path, int8_path

    graph = graph_path(model_path or default_model_path(), cache_dir)
    cached = (int8_path(graph) if int8 else graph).exists()
    return onnx_available(need_export=not cached)


def choose(runtime: Runtime, cuda: bool, onnx_ready: bool) -> Runtime:
    """The runtime that will run: onnx only on CPU and when its packages are installed."""
    if runtime == "onnx" and (cuda or not onnx_ready):
        return "torch"
    return runtime


def _gpu_present() -> bool:
    """An NVIDIA device node: without one torch cannot see CUDA, so it need not be loaded."""
    return any(Path("/dev").glob("nvidia[0-9]*"))


def _wants_cuda(device: str) -> bool:
    # Importing torch only to learn there is no GPU costs an ONNX-only process ~380 MB.
    # A process that forwent torch (shared/worker/lean_imports.py) has None in its place.
    if device == "cpu" or (sys.modules.get("torch") is None and not _gpu_present()):
        return False
    import torch

    return torch.cuda.is_available() and (device == "auto" or device.startswith("cuda"))


def load_encoder(runtime: Runtime = "torch", device: str = "auto", threads: int = 0,
                 cache_dir: Path = Path(".run/models"),
                 model_path: Path | None = None, model_id: str | None = None,
                 int8: bool = False, workers: int = 1) -> SentenceEncoder:
    """The encoder on the runtime `choose` allows; a fallback to torch is logged. `int8`:
    ONNX runs its int8 copy of the graph (shared/encoder/onnx.py); torch ignores it, and
    `workers` (ONNX's forward passes side by side) too."""
    cuda = runtime == "onnx" and _wants_cuda(device)
    ready = runtime != "onnx" or cuda or onnx_ready(model_path, cache_dir, int8)
    chosen = choose(runtime, cuda, ready)
    if chosen != runtime and cuda:  # the GPU is the faster choice: not worth a warning
        log.info("encoder on CUDA: torch (ONNX Runtime runs on CPU only here)")
    elif chosen != runtime:
        log.warning("encoder runtime %s requested but onnxruntime (or onnx) is not installed: "
                    "using torch", runtime)
    if chosen == "onnx":
        from shared.encoder.onnx import OnnxEncoder

        return OnnxEncoder(cache_dir, model_path, threads, model_id=model_id or MODEL_ID,
                           int8=int8, workers=workers)
    from shared.encoder.embedder import Encoder

    return Encoder(model_path, device, threads=threads, model_id=model_id or MODEL_ID)
