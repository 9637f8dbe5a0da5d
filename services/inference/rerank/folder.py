"""What a reranker folder must hold, checked when the settings are built (no model loaded).

A Hugging Face sequence-classification folder with one output (a relevance score): its
config.json, weights and tokenizer files. A wrong path fails the service at start with the
variable's name, not at the first query.
"""

from __future__ import annotations

import json
from pathlib import Path

VARIABLE = "STREAMRAG_INFERENCE_RERANKER_PATH"
WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
           "pytorch_model.bin.index.json")
TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "vocab.txt")


def check_model_dir(path: Path) -> None:
    """Raise ValueError naming the variable when `path` is not a one-label cross-encoder."""
    def bad(why: str) -> ValueError:
        return ValueError(f"{VARIABLE}={path}: {why}")
    if not path.is_dir():
        raise bad("not a directory")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise bad("no config.json (expected a Hugging Face model folder)")
    if not any((path / name).is_file() for name in WEIGHTS):
        raise bad(f"no weights ({' or '.join(WEIGHTS)})")
    if not any((path / name).is_file() for name in TOKENIZER):
        raise bad(f"no tokenizer ({' or '.join(TOKENIZER)})")
    try:
        config = json.loads(config_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"config.json is not readable JSON ({type(exc).__name__})") from exc
    if not isinstance(config, dict):
        raise bad("config.json is not a JSON object")
    # transformers writes id2label (some folders num_labels too); its default is two labels.
    labels = config.get("num_labels") or len(config.get("id2label") or {}) or 2
    if labels != 1:
        raise bad(f"a cross-encoder with one output (a relevance score) is needed; "
                  f"this model has {labels} labels")
