"""The inference service's own failures; neither is the caller's fault.

shared.errors.InfrastructureError     (the API answers UNAVAILABLE)
 +-- NotReadyError                    the encoder is loading or the reply reader is not reading
 +-- NoShardsError                    no retrieval shard returned a usable reply in time
shared.batching.queue.QueueFullError  (RESOURCE_EXHAUSTED) comes from the batchers.
"""

from __future__ import annotations

from shared.errors import InfrastructureError


class NotReadyError(InfrastructureError):
    """The encoder is still loading or the reply consumer is not reading."""


class NoShardsError(InfrastructureError):
    """No retrieval shard returned a usable reply in time."""
