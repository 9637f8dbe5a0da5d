"""The topic contract every service meets on: topic names and partitioning (`topics`), the
record schemas (`records`) and their wire encoding (`codec`), size limits (`sizes`), dead
letters (`dlq`), evidence retention, Kafka ACLs and audit signatures. A service that reads or
writes a topic needs nothing else from here; what a stage does with a record that fails is
the worker's (shared/worker/boundary.py), and the exception tree is shared/errors.py."""
