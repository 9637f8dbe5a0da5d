"""The embedding batch limits come from two settings, and nothing else tunes the batching."""

from __future__ import annotations

from services.embedding.settings import EmbeddingSettings
from shared.batching.queue import BatchLimits


def test_limits_are_the_token_and_document_settings() -> None:
    assert EmbeddingSettings().limits() == BatchLimits(max_tokens=2048, max_requests=64)
    one = EmbeddingSettings(batch_max_docs=1, max_batch_tokens=16384).limits()
    assert one == BatchLimits(max_tokens=16384, max_requests=1)
