"""Which answer path a query takes: extractive, generative, or auto (the server decides).

`auto` writes a generated answer when a generator is loaded, its queue has room and the
estimated generation time fits in what is left of the query's deadline; otherwise it
quotes (extractive), and the reason is reported with the answer. Asking for `generative`
where no generator is loaded is the caller's error (FAILED_PRECONDITION), never a silent
change of mode.

Pure: the generator's state comes in as numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.inference.errors import NoGeneratorError

EXTRACTIVE, GENERATIVE, AUTO = "extractive", "generative", "auto"
MODES = (EXTRACTIVE, GENERATIVE, AUTO)


@dataclass(frozen=True)
class GeneratorLoad:
    """What `auto` needs to know of a loaded generator."""
    overloaded: bool  # a new job would wait behind at least one full batch
    estimate_s: float  # queue wait, prefill and max_new_tokens steps at the recent pace


@dataclass(frozen=True)
class ModeChoice:
    mode: str  # EXTRACTIVE or GENERATIVE
    reason: str  # why: "requested", "default", "no_generator", "overload", "deadline", "fits"


def choose(requested: str, default: str, load: GeneratorLoad | None,
           time_left_s: float | None) -> ModeChoice:
    """The path for one query. `requested` is "" (the server's `default`) or one of MODES;
    `load` is None without a generator; `time_left_s` is None without a deadline."""
    wanted = requested or default
    why = "requested" if requested else "default"
    if wanted == EXTRACTIVE:
        return ModeChoice(EXTRACTIVE, why)
    if load is None:
        if wanted == GENERATIVE:
            raise NoGeneratorError("no generator is loaded on this instance (set "
                                   "STREAMRAG_INFERENCE_GENERATOR_PATH, or install the "
                                   "bundled model with scripts/install)")
        return ModeChoice(EXTRACTIVE, "no_generator")
    if wanted == GENERATIVE:
        return ModeChoice(GENERATIVE, why)
    if load.overloaded:
        return ModeChoice(EXTRACTIVE, "overload")
    if time_left_s is not None and load.estimate_s > time_left_s:
        return ModeChoice(EXTRACTIVE, "deadline")
    return ModeChoice(GENERATIVE, "fits")
