"""The query-path configuration record of config.query.v1, and the one check both ends run.

A QueryConfig holds the knobs that may change per query without re-indexing (Knobs: unset
ones keep the inference settings' value), optional weighted variants (each a set of
overrides of the base knobs), its version and its author. The CLI refuses a bad record
before producing it; every inference instance refuses it again when read (anyone may
produce to a topic). docs/design/query-config.md says how versions, history and routing work.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shared.contract.codec import decode
from shared.contract.records import Record
from shared.errors import InvalidInput

KEY_PREFIX = "query/"  # every version its own key: compaction keeps the whole history
MAX_VARIANTS = 8  # bounds the variant label's values on the metrics
VARIANT_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
BASE = "base"  # the variant of every query when a configuration defines none


class Knobs(BaseModel):
    """Per-query settings; each unset one keeps InferenceSettings' value of the same name."""

    # strict: a "5" for 5 or a 1 for true is refused, not coerced.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
    default_top_k: int | None = Field(default=None, ge=1, le=1000)
    hybrid: bool | None = None
    fusion_method: Literal["rrf", "normalised"] | None = None
    rrf_k: int | None = Field(default=None, ge=1, le=10_000)
    dense_weight: float | None = Field(default=None, ge=0, le=100)
    lexical_weight: float | None = Field(default=None, ge=0, le=100)
    feedback_weight: float | None = Field(default=None, ge=0, le=10)
    feedback_max_boost: float | None = Field(default=None, ge=0, le=10)
    # Off: the cross-encoder is skipped even where one is loaded (on without one: no effect).
    rerank: bool | None = None
    answer_mode: Literal["extractive", "generative", "auto"] | None = None
    default_max_new_tokens: int | None = Field(default=None, ge=1, le=4096)
    max_new_tokens_cap: int | None = Field(default=None, ge=1, le=4096)
    shard_timeout_s: float | None = Field(default=None, gt=0, le=60)

    def set(self) -> dict[str, object]:
        """The knobs this record sets."""
        return self.model_dump(exclude_none=True)


class Variant(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    weight: int = Field(ge=0, le=10_000)
    overrides: Knobs = Knobs()


class QueryConfig(Record):
    """One version of the query-path configuration (config.query.v1, key query/<version>)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
    version: int = Field(ge=1, le=2**53)
    author: str = Field(min_length=1, max_length=128)
    at: float  # seconds since the epoch, when it was written
    note: str = Field(default="", max_length=512)
    rollback_of: int | None = None  # the version whose content this one restores
    knobs: Knobs = Knobs()
    variants: dict[str, Variant] = Field(default_factory=dict)

    @field_validator("variants")
    @classmethod
    def _variants(cls, variants: dict[str, Variant]) -> dict[str, Variant]:
        if len(variants) > MAX_VARIANTS:
            raise ValueError(f"at most {MAX_VARIANTS} variants")
        bad = [n for n in variants if not VARIANT_NAME.match(n)]
        if bad:
            raise ValueError("variant names are 1-32 of a-z, 0-9, _ and -, a letter first")
        if variants and sum(v.weight for v in variants.values()) == 0:
            raise ValueError("the variants' weights add up to 0")
        return variants

    @model_validator(mode="after")
    def _limits(self) -> QueryConfig:
        for name, knobs in [("knobs", self.knobs), *((f"variants.{n}", merged(self, n))
                                                    for n in self.variants)]:
            cap, default = knobs.max_new_tokens_cap, knobs.default_max_new_tokens
            if cap is not None and default is not None and default > cap:
                raise ValueError(f"{name}: default_max_new_tokens above max_new_tokens_cap")
        return self

    def content(self) -> dict[str, object]:
        """What a rollback restores: the knobs and variants, not the version's metadata."""
        return self.model_dump(include={"knobs", "variants"})


def merged(config: QueryConfig, variant: str) -> Knobs:
    """The knobs of one variant: the base's with the variant's overrides on top."""
    overrides = config.variants[variant].overrides.set() if variant in config.variants else {}
    return Knobs.model_validate({**config.knobs.set(), **overrides})


def key_of(version: int) -> bytes:
    return f"{KEY_PREFIX}{version:012d}".encode()


def parse(raw: bytes | None) -> QueryConfig:
    """A record as read from the topic; InvalidInput(reason, field) when it is refused."""
    return decode(QueryConfig, raw)


def check_next(config: QueryConfig, current: int) -> QueryConfig:
    """`config` if it may follow version `current`: versions only increase."""
    if config.version <= current:
        msg = f"version {config.version} does not follow the applied version {current}"
        raise InvalidInput("stale_version", "version", msg)
    return config
