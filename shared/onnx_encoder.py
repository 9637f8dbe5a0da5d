"""The sentence encoder on ONNX Runtime (CPU): the same weights, exported once, pooled in-graph.

The graph is exported from the torch model at first use (torch + onnx needed then, not
after) with mean pooling and L2 normalisation inside it, and cached under a data dir,
keyed by a hash of the weights and the export code's version, so a changed model never
reuses a stale graph. Concurrent first starts each write a private temp file and rename it
into place. Inputs are length-sorted and grouped by a padded-token budget, as on torch.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from shared.batching.padding import encode_in_groups
from shared.encoder_model import MODEL_ID, default_model_path, load_tokenizer

log = logging.getLogger(__name__)
EXPORT_VERSION = 1  # bump when the exported graph changes (inputs, pooling, opset)
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def graph_path(model_path: Path, cache_dir: Path) -> Path:
    """Where the graph of `model_path`'s weights is cached: named by their hash."""
    digest = hashlib.sha256(f"v{EXPORT_VERSION}".encode())
    for name in ("model.safetensors", "config.json"):
        with (model_path / name).open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return cache_dir / f"encoder-{digest.hexdigest()[:16]}.onnx"


def export(model_path: Path, target: Path) -> None:
    """Export the model with pooling to `target` (atomically: temp file, then rename)."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    model = AutoModel.from_pretrained(str(model_path), dtype=torch.float32).eval()

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    sample = load_tokenizer(model_path)(["warm-up", "a second sample"], padding=True,
                                        return_tensors="pt")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".onnx.tmp", dir=target.parent)
    os.close(fd)
    try:
        axes = {name: {0: "batch", 1: "tokens"} for name in INPUTS}
        # The tracer warns about branches on shapes that are constant for an encoder (no
        # cache, no causal mask); the cosine test against torch is what checks the graph.
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(Pooled(), tuple(sample[n] for n in INPUTS), tmp,
                              input_names=list(INPUTS), output_names=["embedding"],
                              dynamic_axes={**axes, "embedding": {0: "batch"}},
                              opset_version=OPSET, dynamo=False)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class OnnxEncoder:
    runtime = "onnx"
    device = "cpu"
    dtype = "float32"

    def __init__(self, cache_dir: Path, model_path: Path | None = None, threads: int = 0,
                 max_length: int = 256, model_id: str = MODEL_ID) -> None:
        import onnxruntime as ort

        path = model_path or default_model_path()
        graph = graph_path(path, cache_dir)
        if not graph.exists():
            log.info("exporting the encoder to ONNX at %s (once per model)", graph)
            export(path, graph)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads  # 0: one per physical core
        options.inter_op_num_threads = 1
        # Spinning threads keep a core busy after each call: on a machine shared by several
        # stages that is stolen time, and on an idle mesh it is idle CPU.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(graph), options,
                                            providers=["CPUExecutionProvider"])
        self.graph = graph
        self.tokenizer = load_tokenizer(path)
        self.model_id, self.max_length = model_id, max_length
        self.dim = int(self.session.get_outputs()[0].shape[1])

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        return [len(ids) for ids in enc["input_ids"]]

    def encode(self, texts: Sequence[str], max_batch_tokens: int = 8192) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text, in input order."""
        lengths = self.token_lengths(texts) if texts else []
        return encode_in_groups(texts, lengths, max_batch_tokens, self.dim, self._forward)

    def _forward(self, texts: list[str]) -> np.ndarray:
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="np")
        feeds = {name: enc[name].astype(np.int64) for name in INPUTS}
        return np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)
