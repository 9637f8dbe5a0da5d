"""Retrieval over Kafka: scatter requests to every shard, gather and merge their replies,
the time-window filter, hybrid fusion, and the feedback boost."""
