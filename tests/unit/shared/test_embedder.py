"""The encoder's weights are loaded once per process and shared; tokenizers are not."""

from __future__ import annotations

import numpy as np

from shared.encoder.embedder import Encoder


def test_two_encoders_share_the_weights_but_not_the_tokenizer() -> None:
    # One-process mode: the embedding stage and inference's query encoder are two Encoders.
    first, second = Encoder(device="cpu"), Encoder(device="cpu")
    assert first.model is second.model
    assert first.tokenizer is not second.tokenizer  # not thread-safe: one per user
    texts = ["The payment gateway certificate expired.", "Rotate certificates yearly."]
    a, b = first.encode(texts), second.encode(texts)
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert float(a[0] @ a[1]) < 0.9
