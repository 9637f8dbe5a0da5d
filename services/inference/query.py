"""A query's arguments checked and normalised; each refusal names the offending field."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from services.inference.answer.modes import MODES
from services.inference.config.live import Served
from services.inference.search.timefilter import parse_window
from services.inference.settings import InferenceSettings
from shared.contract.access import Access
from shared.errors import InvalidInput

MAX_FILTER_CHARS = 256
MAX_STOP_SEQUENCES = 4
MAX_STOP_CHARS = 64
# What a query made without naming its caller's access reads: public documents (fail closed).
PUBLIC_ONLY = Access.of(None, ())


@dataclass(frozen=True)
class QueryParams:
    question: str
    top_k: int
    since: float | None
    until: float | None
    domain: str | None
    source: str | None
    max_new_tokens: int  # 0: no limit beyond the answer's own length
    temperature: float
    stop: tuple[str, ...]
    answer_mode: str = ""  # "": the server's default; else one of answer.modes.MODES
    # The configuration version and variant the query was routed to (config/live.py);
    # None: the settings alone.
    served: Served | None = field(default=None, compare=False)
    # What the caller may read (api/principal.py): every shard filters with it, and the
    # answer cache keeps each scope's answers apart.
    access: Access = PUBLIC_ONLY

    def settings(self, default: InferenceSettings) -> InferenceSettings:
        """The settings this query is served with: its variant's, else `default`."""
        return default if self.served is None else self.served.settings


def parse_params(
    settings: InferenceSettings, *, question: str, top_k: int = 0, since: str = "",
    until: str = "", domain: str = "", source: str = "", max_new_tokens: int = 0,
    temperature: float = 0.0, stop: tuple[str, ...] = (), answer_mode: str = "", now: float,
    access: Access = PUBLIC_ONLY,
) -> QueryParams:
    """Validated parameters; raises InvalidInput(reason, field) for the first bad argument."""
    text = question.strip()
    if not text:
        raise InvalidInput("empty_question", "question", "the question is empty")
    if len(text) > settings.max_question_chars:
        msg = f"{len(text)} characters, the limit is {settings.max_question_chars}"
        raise InvalidInput("question_too_long", "question", msg)
    if top_k < 0 or top_k > settings.max_top_k:
        msg = f"top_k must be 1..{settings.max_top_k} (0 for the default), got {top_k}"
        raise InvalidInput("top_k_out_of_range", "top_k", msg)
    start, end = parse_window(since, until, now)
    return QueryParams(
        question=text, top_k=top_k or settings.default_top_k, since=start, until=end,
        domain=_filter(domain, "domain"), source=_filter(source, "source"),
        max_new_tokens=_max_new_tokens(max_new_tokens),
        temperature=_temperature(temperature), stop=_stop(stop),
        answer_mode=_answer_mode(answer_mode), access=access,
    )


def _filter(value: str, field: str) -> str | None:
    if len(value) > MAX_FILTER_CHARS:
        msg = f"longer than {MAX_FILTER_CHARS} characters"
        raise InvalidInput("filter_too_long", field, msg)
    return value.strip() or None


def _answer_mode(value: str) -> str:
    mode = value.strip().lower()
    if mode and mode not in MODES:
        msg = f"one of {', '.join(MODES)} (empty: the server's default), got {value[:32]!r}"
        raise InvalidInput("unknown_answer_mode", "answer_mode", msg)
    return mode


def _max_new_tokens(value: int) -> int:
    if value < 0:
        raise InvalidInput("negative", "max_new_tokens", f"got {value}")
    return value


def _temperature(value: float) -> float:
    if not math.isfinite(value) or not 0.0 <= value <= 2.0:
        raise InvalidInput("temperature_out_of_range", "temperature", f"0..2, got {value}")
    return value


def _stop(values: tuple[str, ...]) -> tuple[str, ...]:
    if len(values) > MAX_STOP_SEQUENCES:
        msg = f"at most {MAX_STOP_SEQUENCES} stop sequences, got {len(values)}"
        raise InvalidInput("too_many_stop_sequences", "stop", msg)
    if any(not s or len(s) > MAX_STOP_CHARS for s in values):
        msg = f"each stop sequence must be 1..{MAX_STOP_CHARS} characters"
        raise InvalidInput("bad_stop_sequence", "stop", msg)
    return tuple(values)
