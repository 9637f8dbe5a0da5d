"""The inference service's own failures; neither is the caller's fault.

shared.errors.InfrastructureError     (the API answers UNAVAILABLE)
 +-- NotReadyError                    the encoder is loading or the reply reader is not reading
 +-- NoShardsError                    no retrieval shard returned a usable reply in time
shared.batching.queue.QueueFullError  (RESOURCE_EXHAUSTED) comes from the batchers.
 +-- GenerationBusyError              a generation asked for by name that the queued work
                                      would keep past the call's deadline
shared.errors.InvalidInput            (INVALID_ARGUMENT)
 +-- OutOfRangeError                  (OUT_OF_RANGE) a valid ask beyond what is kept
 +-- NoGeneratorError                 (FAILED_PRECONDITION) generative asked, none loaded
 +-- NotFoundError                    (NOT_FOUND) a chunk the caller cannot name: absent, or
 |                                    not readable by it (the two are indistinguishable)
 +-- PermissionDeniedError            (PERMISSION_DENIED) a call only all-access callers make
"""

from __future__ import annotations

from shared.batching.queue import QueueFullError
from shared.errors import InfrastructureError, InvalidInput


class NotReadyError(InfrastructureError):
    """The encoder is still loading or the reply consumer is not reading."""


class NoShardsError(InfrastructureError):
    """No retrieval shard returned a usable reply in time."""


class GenerationBusyError(QueueFullError):
    """Generation was asked for, and the jobs queued ahead would keep it past the call's
    deadline: refused at once rather than queued to fail later."""


class OutOfRangeError(InvalidInput):
    """A well-formed request for what the server no longer keeps (a window past retention)."""


class NoGeneratorError(InvalidInput):
    """A generated answer was asked of an instance that has no generator loaded."""

    def __init__(self, detail: str) -> None:
        super().__init__("no_generator", "answer_mode", detail)


class NotFoundError(InvalidInput):
    """Nothing the caller may read by that name (a chunk that does not exist, or one it may
    not read: the answer is the same)."""


class PermissionDeniedError(InvalidInput):
    """A call whose answer would count documents the caller may not read."""
