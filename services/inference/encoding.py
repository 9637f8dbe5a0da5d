"""The query encoder as the engine sees it: its protocol, one call per batch, a token estimate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np


class TextEncoder(Protocol):
    model_id: str
    dim: int

    @property
    def device(self) -> object: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def estimate_tokens(text: str) -> int:
    """A cheap token estimate for the batcher's limit (wordpieces run ~1.3 per word, plus
    the two special tokens): tokenizing every text twice would cost more than it saves."""
    return len(text.split()) * 4 // 3 + 2


def encode_batch(encoder: TextEncoder, requests: Sequence[Sequence[str]]) -> list[np.ndarray]:
    """One encoder call for a whole batch; a text several requests share is encoded once."""
    distinct = list(dict.fromkeys(t for texts in requests for t in texts))
    vectors = encoder.encode(distinct)
    row = {t: i for i, t in enumerate(distinct)}
    return [vectors[[row[t] for t in texts]] for texts in requests]
