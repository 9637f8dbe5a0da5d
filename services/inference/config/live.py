"""The configuration this instance serves: the newest valid version read, per variant.

`offer` takes a record as read from config.query.v1 and applies it when it is valid and
newer than the applied one; otherwise it is refused with a reason, logged without its
content, counted, and never applied. `serve` routes a query (routing.py) and hands back
the variant's settings: InferenceSettings with the variant's knobs in place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from services.inference.config.routing import route
from services.inference.settings import InferenceSettings
from shared.contract.query_config import BASE, QueryConfig, check_next, merged, parse
from shared.errors import InvalidInput

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Served:
    """What one query is served with."""

    version: int  # 0: no configuration record applied, the settings alone
    variant: str  # BASE when the configuration defines no variants
    settings: InferenceSettings
    rerank: bool = True


@dataclass(frozen=True)
class Refusal:
    reason: str
    field: str | None
    detail: str


class LiveConfig:
    def __init__(self, settings: InferenceSettings,
                 on_applied: Callable[[int], None] = lambda version: None,
                 on_refused: Callable[[Refusal], None] = lambda refusal: None) -> None:
        self.settings = settings
        self._on_applied, self._on_refused = on_applied, on_refused
        self.config: QueryConfig | None = None
        self._served: dict[str, Served] = {BASE: Served(0, BASE, settings)}
        self._weights: dict[str, int] = {}

    @property
    def version(self) -> int:
        return 0 if self.config is None else self.config.version

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(self._served)

    def offer(self, raw: bytes | None) -> Refusal | None:
        """Apply the record if valid and newer; the refusal (already logged) otherwise."""
        try:
            config = check_next(parse(raw), self.version)
            served = {name: self._build(config, name)
                      for name in (list(config.variants) or [BASE])}
        except InvalidInput as exc:
            refusal = Refusal(exc.reason, exc.field, exc.detail)
            log.warning("query configuration refused: %s (field %s): %s", refusal.reason,
                        refusal.field, refusal.detail)
            self._on_refused(refusal)
            return refusal
        self.config, self._served = config, served
        self._weights = {n: v.weight for n, v in config.variants.items() if v.weight > 0}
        log.info("query configuration version %d by %s applied (%s)", config.version,
                 config.author, ", ".join(f"{n} {w}" for n, w in self._weights.items())
                 or "no variants")
        self._on_applied(config.version)
        return None

    def serve(self, caller: str, question: str) -> Served:
        """The variant (and its settings) of a query from `caller` asking `question`."""
        return self._served[route(self._weights, caller, question) or BASE]

    def forced(self, variant: str) -> Served | None:
        """The settings of `variant` whatever the routing (the SLO guard's probes)."""
        return self._served.get(variant)

    def _build(self, config: QueryConfig, variant: str) -> Served:
        knobs = merged(config, variant).set()
        rerank = bool(knobs.pop("rerank", True))
        top_k = knobs.get("default_top_k", self.settings.default_top_k)
        if not isinstance(top_k, int) or top_k > self.settings.max_top_k:
            msg = f"{top_k} is above this instance's max_top_k {self.settings.max_top_k}"
            raise InvalidInput("out_of_range", f"{variant}.default_top_k", msg)
        cap = knobs.get("max_new_tokens_cap", self.settings.max_new_tokens_cap)
        default = knobs.get("default_max_new_tokens", self.settings.default_max_new_tokens)
        if isinstance(cap, int) and isinstance(default, int) and default > cap:
            msg = f"default_max_new_tokens {default} is above max_new_tokens_cap {cap}"
            raise InvalidInput("out_of_range", f"{variant}.default_max_new_tokens", msg)
        # Every knob was checked against its range by the record's own model, as strictly
        # as the settings' fields, so the copy needs no second validation.
        return Served(config.version, variant, self.settings.model_copy(update=knobs), rerank)
