"""The sentence encoder (all-MiniLM-L6-v2) shared by the embedding and inference services.

CUDA in fp16 when a GPU is present, fp32 on CPU (never fp16 on CPU). Inputs are
length-sorted and grouped by a padded-token budget (shared.batching.padding) to cut
padding; outputs are mean-pooled and L2-normalised, returned in input order.

The weights are loaded once per process (path, device, dtype): in one-process mode the
embedding stage and inference's query encoder share them. Each Encoder keeps its own
tokenizer, since a fast tokenizer must not be called from two threads at once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shared.batching.padding import encode_in_groups
from shared.encoder.model import MODEL_ID, default_model_path, offline_hub

offline_hub()

import torch  # noqa: E402
from transformers import AutoModel, AutoTokenizer  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.disable_progress_bar()  # worker logs are for events, not weight-loading bars


_models: dict[tuple[str, str, torch.dtype], Any] = {}
_models_lock = threading.Lock()


def shared_model(path: str, device: torch.device, dtype: torch.dtype) -> Any:
    """The model at `path` on `device`, loaded by the first caller in this process."""
    with _models_lock:
        key = (path, str(device), dtype)
        if key not in _models:
            _models[key] = AutoModel.from_pretrained(path, dtype=dtype).to(device).eval()
        return _models[key]


def pick_device(requested: str = "auto") -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        return torch.device("cpu")  # fall back cleanly rather than crash on a CPU host
    return torch.device(requested)


class Encoder:
    runtime = "torch"

    def __init__(self, model_path: Path | None = None, device: str = "auto",
                 max_length: int = 256, model_id: str = MODEL_ID, threads: int = 0) -> None:
        path = str(model_path or default_model_path())
        if threads:
            torch.set_num_threads(threads)  # per process: torch has no per-model setting
        self.device = pick_device(device)
        self.dtype = torch.float16 if self.device.type == "cuda" else torch.float32
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = shared_model(path, self.device, self.dtype)
        self.model_id = model_id
        self.dim = int(self.model.config.hidden_size)
        self.max_length = max_length

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length,
                             add_special_tokens=True)
        return [len(ids) for ids in enc["input_ids"]]

    def encode(self, texts: Sequence[str], max_batch_tokens: int = 8192) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text, in input order."""
        lengths = self.token_lengths(texts) if texts else []
        return encode_in_groups(texts, lengths, max_batch_tokens, self.dim, self._forward)

    @torch.inference_mode()
    def _forward(self, texts: list[str]) -> np.ndarray:
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt").to(self.device)
        hidden = self.model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        pooled = torch.nn.functional.normalize(pooled.float(), p=2, dim=1)
        return pooled.cpu().numpy()

