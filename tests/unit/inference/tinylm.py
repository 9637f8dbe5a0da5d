"""A tiny causal LM built at test time: random GPT-2 weights, the real MiniLM tokenizer."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

from shared.embedder import default_model_path


def build_tiny_lm(folder: Path, seed: int = 7) -> Path:
    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    torch.manual_seed(seed)
    # Untied head: with tied embeddings a random model just repeats its last token.
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=256, n_embd=32, n_layer=2,
                        n_head=2, bos_token_id=tokenizer.cls_token_id,
                        eos_token_id=tokenizer.sep_token_id, tie_word_embeddings=False)
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
