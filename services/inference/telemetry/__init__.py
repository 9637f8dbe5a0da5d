"""What the inference service reports: Prometheus metrics and the per-minute latency table."""
