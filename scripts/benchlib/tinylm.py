"""A causal LM built at test time: random GPT-2 weights, the real MiniLM tokenizer.

Tests use the tiny shape; scripts/bench_query --generator small builds one that costs
what GPT-2 small costs (no weights can be downloaded here; its text is meaningless).
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

from shared.encoder.embedder import default_model_path

# GPT-2 shapes (embedding width, layers, heads, positions): "small" costs what GPT-2 small
# costs per token (~110M parameters with this vocabulary), for benchmarks.
SHAPES = {"tiny": (32, 2, 2, 256), "small": (768, 12, 12, 1024)}


def build_tiny_lm(folder: Path, seed: int = 7, shape: str = "tiny") -> Path:
    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    torch.manual_seed(seed)
    n_embd, n_layer, n_head, n_positions = SHAPES[shape]
    # Untied head: with tied embeddings a random model just repeats its last token.
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=n_positions, n_embd=n_embd,
                        n_layer=n_layer, n_head=n_head, bos_token_id=tokenizer.cls_token_id,
                        eos_token_id=tokenizer.sep_token_id, tie_word_embeddings=False)
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
