"""What an answer depends on besides the index: the cache key of a Query or Retrieve."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from services.inference.query import QueryParams


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
    scope: str  # the caller's credential, hashed ("" with no token)
    encoder: str  # the question encoder's model id and epoch (switch.py)
    config: str  # the serving configuration's version


def question_text(question: str, exact_case: bool) -> str:
    """Spaces collapsed, and lower case unless `exact_case` (a generated answer's prompt
    carries the question as typed; the encoder and BM25 see it lower-cased either way)."""
    words = " ".join(question.split())
    return words if exact_case else words.lower()


def scope_of(authorization: str) -> str:
    """A caller's scope from its credential, never the credential itself."""
    if not authorization:
        return ""
    return hashlib.blake2b(authorization.encode(), digest_size=16).hexdigest()


def config_version(settings_json: str) -> str:
    """The serving configuration's fingerprint (every setting: any may change an answer)."""
    return hashlib.blake2b(settings_json.encode(), digest_size=16).hexdigest()


def key_for(call: str, params: QueryParams, *, scope: str, encoder: str, config: str,
            exact_case: bool) -> CacheKey:
    answering = call == "query"
    return CacheKey(
        call=call, question=question_text(params.question, exact_case), top_k=params.top_k,
        since=params.since, until=params.until, domain=params.domain, source=params.source,
        answer_mode=params.answer_mode if answering else "",
        max_new_tokens=params.max_new_tokens if answering else 0,
        temperature=params.temperature if answering else 0.0,
        stop=params.stop if answering else (), scope=scope, encoder=encoder, config=config)
