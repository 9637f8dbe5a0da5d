"""Inference's Faust side: the gRPC runtime, started and stopped with the worker.

No agents or tables yet, so the worker runs producer-only: a consumer with nothing to
subscribe to makes aiokafka refuse to start ("provide either topics or pattern"). Drop
`producer_only` when the first agent (query-latency tables) arrives.
"""

from __future__ import annotations

from typing import Any

from services.inference.app import app, kafka, settings
from services.inference.runtime import InferenceRuntime

app.producer_only = True


@app.service
class Runtime(InferenceRuntime):
    """Faust builds this in its own loop when the app starts; bound to this app's settings."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(settings, kafka, **kwargs)
