"""A sentence encoder built at test time: random BERT weights, the real MiniLM tokenizer.

Another model id and dimension than all-MiniLM-L6-v2, for the model-switch tests (no
second embedding model can be downloaded here; its vectors are meaningless but real).
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from shared.encoder.model import default_model_path

TINY_ID = "test/tiny-bert-32"
TINY_DIM = 32


def build_tiny_encoder(folder: Path, seed: int = 11) -> Path:
    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=TINY_DIM, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=512)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
