"""Batching shared by the services.

partitions  table writes for an event of a micro-batch (the micro-batches themselves are
            shared.kafka.checkpoint.batches: they are what a commit covers)
queue       the request queue in front of a model: one task cuts a batch whenever the
            backend is free, bounded by padded tokens and by requests (embedding, inference)
padding     padded-token arithmetic: what a batch of sequences costs one forward pass
"""

from shared.batching.partitions import current_event

__all__ = ["current_event"]
