"""A cross-encoder built at test time: random BERT weights, the real MiniLM tokenizer.

No cross-encoder weights can be had offline here, so tests (and scripts that measure the
stage's cost) build one of the shape they need: BertForSequenceClassification with one
output, saved beside the tokenizer of the packaged all-MiniLM-L6-v2, loadable exactly as a
downloaded ms-marco cross-encoder folder is. Its scores mean nothing, but they are
deterministic and spread apart (a wide initialiser), so an order by them is well defined.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

from shared.encoder.embedder import default_model_path

# (hidden width, layers, heads): "minilm" costs what ms-marco-MiniLM-L-6-v2 costs per pair.
SHAPES = {"tiny": (32, 2, 2), "minilm": (384, 6, 12)}


def build_tiny_reranker(folder: Path, seed: int = 11, shape: str = "tiny",
                        labels: int = 1) -> Path:
    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    torch.manual_seed(seed)
    hidden, layers, heads = SHAPES[shape]
    # num_labels goes to PretrainedConfig through **kwargs, which transformers' hints omit
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden,  # type: ignore[call-arg]
                        num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=4 * hidden, max_position_embeddings=512,
                        num_labels=labels, initializer_range=0.5 if shape == "tiny" else 0.02)
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
