"""Retrieval over Kafka: scatter requests to every shard, gather and merge their replies,
the time-window filter, and the feedback rerank."""
