"""The QueryAudit of one answered call, built from what the caller was sent (pure).

The caller's subject is recorded as an HMAC-SHA256 under the audit principal key, never as
itself: subjects can be e-mail addresses, and raw PII goes nowhere downstream. Whoever holds
the key (an auditor) hashes a subject and finds its records; without it the hash names no
one. The static service token names no one: its calls are recorded with principal "" and
kind "service" (a user token whose sub is "service" is another principal). The question is
recorded as its sha256 only.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import SecretStr

from services.inference.api.principal import SERVICE
from shared.contract.access import USER_PREFIX, Access
from shared.contract.query_audit import principal_hash, question_sha256
from shared.contract.records import QueryAudit


def recorded_scope(access: Access, key: SecretStr) -> str:
    """Access.scope() with every user:<subject> grant as user:<its hash>."""
    if access.all_access:
        return access.scope()
    grants = (USER_PREFIX + principal_hash(g.removeprefix(USER_PREFIX), key)
              if g.startswith(USER_PREFIX) else g for g in access.grants)
    return ",".join(sorted(grants))


def query_audit(*, query_id: str, method: str, question: str, subject: str, kind: str,
                access: Access, key: SecretStr, at: float,
                shown: Iterable[tuple[str, str, int]], cited: Iterable[str],
                answer_mode: str, variant: str = "", config_version: int = 0,
                finished: bool = True) -> QueryAudit:
    """The unsigned record; `shown`: (chunk id, doc id, version) of each chunk sent."""
    chunks = list(shown)
    return QueryAudit(
        query_id=query_id, method=method,
        principal=principal_hash("" if kind == SERVICE else subject, key),
        principal_kind=kind, scope=recorded_scope(access, key), at=at,
        question_sha256=question_sha256(question), answer_mode=answer_mode,
        shown=tuple(c for c, _, _ in chunks), docs=tuple(f"{d}@v{v}" for _, d, v in chunks),
        cited=tuple(cited), finished=finished, variant=variant,
        config_version=config_version)
