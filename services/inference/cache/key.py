"""What an answer depends on besides the index: the cache key of a Query or Retrieve."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from services.inference.query import QueryParams
from shared.contract.access import Access


@dataclass(frozen=True)
class CacheKey:
    call: str  # "query" (Query and StreamQuery share answers) or "retrieve"
    question: str  # normalised: question_text()
    top_k: int
    since: float | None  # absolute: a relative window resolved at the call, as searched
    until: float | None
    domain: str | None
    source: str | None
    answer_mode: str  # as requested ("" the server's default); "" for Retrieve
    max_new_tokens: int
    temperature: float
    stop: tuple[str, ...]
    scope: str  # what the caller may read (Access.scope()), hashed: answers never cross it
    encoder: str  # the question encoder's model id and epoch (switch.py)
    config: str  # the serving configuration's version


def question_text(question: str, exact_case: bool) -> str:
    """Spaces collapsed, and lower case unless `exact_case` (a generated answer's prompt
    carries the question as typed; the encoder and BM25 see it lower-cased either way)."""
    words = " ".join(question.split())
    return words if exact_case else words.lower()


def scope_of(access: Access) -> str:
    """The cache's name of what a caller may read: its grants hashed ("*" for all access),
    so two callers share answers only when they read exactly the same documents."""
    scope = access.scope()
    if scope == "*":
        return scope
    return hashlib.blake2b(scope.encode(), digest_size=16).hexdigest()


def config_version(settings_json: str) -> str:
    """The serving configuration's fingerprint (every setting: any may change an answer)."""
    return hashlib.blake2b(settings_json.encode(), digest_size=16).hexdigest()


def key_for(call: str, params: QueryParams, *, encoder: str, config: str,
            exact_case: bool) -> CacheKey:
    """The key of a call; its scope is the query's own access, so no caller can be handed
    a key (or an answer) made for another's."""
    answering = call == "query"
    return CacheKey(
        call=call, question=question_text(params.question, exact_case), top_k=params.top_k,
        since=params.since, until=params.until, domain=params.domain, source=params.source,
        answer_mode=params.answer_mode if answering else "",
        max_new_tokens=params.max_new_tokens if answering else 0,
        temperature=params.temperature if answering else 0.0,
        stop=params.stop if answering else (), scope=scope_of(params.access), encoder=encoder,
        config=config)
