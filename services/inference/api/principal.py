"""Who is calling: the principal the authenticator (auth.py) verified, bound to the call.

The authenticator wraps every Inference handler so that, while it runs, `current()` is the
caller: its subject, its kind and the Access every search of the call is made with. Code
outside a call (the SLO guard's probes, the model switch) does not read it: it names its own
Access. Nothing bound (a handler reached without the authenticator) reads public documents
only: fail closed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from shared.contract.access import Access

OPEN, SERVICE, USER, ANONYMOUS = "open", "service", "user", "anonymous"


@dataclass(frozen=True)
class Principal:
    subject: str  # a user token's sub; "service" for the static token; "" open or anonymous
    kind: str  # OPEN (no auth configured), SERVICE (static token), USER (JWT), ANONYMOUS
    access: Access


OPEN_PRINCIPAL = Principal("", OPEN, Access.everything())
ANONYMOUS_PRINCIPAL = Principal("", ANONYMOUS, Access.of(None, ()))

_current: ContextVar[Principal] = ContextVar("streamrag_principal",
                                             default=ANONYMOUS_PRINCIPAL)


def current() -> Principal:
    """The caller of the call being handled (ANONYMOUS_PRINCIPAL outside any)."""
    return _current.get()


@contextlib.contextmanager
def bound(principal: Principal) -> Iterator[Principal]:
    """`principal` is current() inside the block, and no longer after it."""
    token = _current.set(principal)
    try:
        yield principal
    finally:
        with contextlib.suppress(ValueError):  # a stream closed from another context
            _current.reset(token)
