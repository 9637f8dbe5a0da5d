"""Batching shared by the services.

partitions  micro-batches of a Faust stream grouped by partition (redaction, chunking)
queue       the request queue in front of a model: one task cuts a batch whenever the
            backend is free, bounded by padded tokens and by requests (embedding, inference)
padding     padded-token arithmetic: what a batch of sequences costs one forward pass
"""

from shared.batching.partitions import current_event, partition_batches

__all__ = ["current_event", "partition_batches"]
