"""The exception tree of streamrag.

StreamragError
├── InvalidInput          bad data from outside: dead-lettered, never retried
├── ConfigError           a setting is missing or wrong: fail at start
└── InfrastructureError   broker, model, ledger or index failures: retry or crash loudly
    └── ModelMismatchError  a vector from another embedding model or dimension

Services hang their own errors from these (services/ledger/errors.py lists the ledger's).
How an agent treats each while handling a record (InvalidInput: dead letter; any other
Exception: internal_error dead letter; InfrastructureError, OSError, Kafka/Faust errors:
stop the worker) is decided in one place, shared/worker/boundary.py.
"""

from __future__ import annotations


class StreamragError(Exception):
    """Root of every error streamrag raises on purpose."""


class InvalidInput(StreamragError):
    """A record that no retry can fix: it goes to the dead-letter topic.

    `reason` is a stable machine-readable code (snake_case); `field` names the
    offending field where there is one; `detail` is for humans and must never
    contain raw payload text (it may reach logs).
    """

    def __init__(self, reason: str, field: str | None = None, detail: str = "") -> None:
        self.reason = reason
        self.field = field
        self.detail = detail
        where = f" (field {field})" if field else ""
        super().__init__(f"{reason}{where}{': ' + detail if detail else ''}")


class ConfigError(StreamragError):
    """A setting is missing or invalid."""


class InfrastructureError(StreamragError):
    """Something the service depends on failed; not the input's fault."""


class ModelMismatchError(InfrastructureError):
    """A vector was produced by a different model id or dimension than the index holds."""
