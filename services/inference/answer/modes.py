"""Which answer path a query takes: extractive, generative, or auto (the server decides).

`auto` writes a generated answer when a generator is loaded, its queue has room, the
estimated generation time fits in what is left of the query's deadline and in the latency
objective (STREAMRAG_INFERENCE_AUTO_LATENCY_OBJECTIVE_MS: a second on a CPU, none on a
GPU), and the model's recent generated answers were mostly kept (not replaced as
unsupported by the citation check); otherwise it quotes (extractive), and the reason is
reported with the answer: "overload", "deadline", "latency_objective", "quality".

The time it judged by is the generation's budget: a generation still running at its end
gives way to the quoted answer (the engine enforces it), so auto never waits past its
deadline on a wrong estimate. Asking for `generative` where no generator is loaded is the
caller's error (FAILED_PRECONDITION), never a silent change of mode; asking for it while
work already queued would outlast the call's deadline is refused at once
(RESOURCE_EXHAUSTED): the queue admits work at the pace it decodes, not more.

A call that sets no deadline is judged by the server's default one (120 s,
STREAMRAG_INFERENCE_DEFAULT_DEADLINE_MS: the deadline its guard enforces), less what the
call has used, in every mode; auto alone judges it by at most its own shorter auto
deadline (30 s), so a default caller is not kept waiting on a long generation
(`time_to_judge`).

Pure: the generator's state comes in as numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.inference.errors import GenerationBusyError, NoGeneratorError

EXTRACTIVE, GENERATIVE, AUTO = "extractive", "generative", "auto"
MODES = (EXTRACTIVE, GENERATIVE, AUTO)


@dataclass(frozen=True)
class GeneratorLoad:
    """What `auto` needs to know of a loaded generator."""
    overloaded: bool  # a new job would wait behind at least one full batch
    estimate_s: float  # queue wait, prefill and max_new_tokens steps at the recent pace
    waiting: int = 0  # jobs queued for a row now


@dataclass(frozen=True)
class ModeChoice:
    mode: str  # EXTRACTIVE or GENERATIVE
    # why: "requested", "default", "no_generator", "overload", "deadline",
    # "latency_objective", "quality", "fits"
    reason: str
    # auto's generation must end within this many seconds, else the quoted answer is served
    # ("deadline: ..."); None: no bound but the call's own deadline (asked for by name).
    budget_s: float | None = None


def time_to_judge(wanted: str, time_left_s: float | None, elapsed_s: float,
                  auto_deadline_s: float, default_deadline_s: float | None) -> float | None:
    """The seconds left that a query wanting `wanted` (one of MODES) is judged by.

    `time_left_s` is what is left of the call's own deadline (None: it set none);
    `elapsed_s` how long the call has run; `default_deadline_s` the server's deadline for a
    call that sets none (None: no default)."""
    if time_left_s is not None:
        return time_left_s
    left = None if default_deadline_s is None else max(default_deadline_s - elapsed_s, 0.0)
    if wanted == AUTO:
        return auto_deadline_s if left is None else min(auto_deadline_s, left)
    return left


def choose(requested: str, default: str, load: GeneratorLoad | None,
           time_left_s: float | None, objective_s: float | None = None,
           quality_ok: bool = True) -> ModeChoice:
    """The path for one query. `requested` is "" (the server's `default`) or one of MODES;
    `load` is None without a generator; `time_left_s` is None without a deadline;
    `objective_s` auto's latency objective (None: none); `quality_ok` False when most of
    the recent generated answers were replaced as unsupported (auto then quotes)."""
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
    late = time_left_s is not None and load.estimate_s > time_left_s
    if wanted == GENERATIVE:
        if late and load.waiting:
            raise GenerationBusyError(
                f"{load.waiting} generations queued: this one would take about "
                f"{load.estimate_s:.1f}s, the call has {time_left_s:.1f}s left; retry later, "
                "with a longer deadline, or ask for answer_mode extractive")
        return ModeChoice(GENERATIVE, why)
    if load.overloaded:
        return ModeChoice(EXTRACTIVE, "overload")
    if late:
        return ModeChoice(EXTRACTIVE, "deadline")
    if objective_s is not None and load.estimate_s > objective_s:
        return ModeChoice(EXTRACTIVE, "latency_objective")
    if not quality_ok:
        return ModeChoice(EXTRACTIVE, "quality")
    return ModeChoice(GENERATIVE, "fits", time_left_s)


class QualityWindow:
    """Whether the served model's recent generated answers were kept: each answer's verdict
    (kept, or replaced as unsupported) for `window_s`; auto generates again once the
    replaced ones age out, so a window of bad answers is not a verdict for ever."""

    def __init__(self, window_s: float, floor: float, min_answers: int = 5) -> None:
        self.window_s, self.floor, self.min_answers = window_s, floor, min_answers
        self._seen: list[tuple[float, bool]] = []

    def record(self, now: float, kept: bool) -> None:
        self._seen = [*self._recent(now), (now, kept)]

    def _recent(self, now: float) -> list[tuple[float, bool]]:
        return [(t, k) for t, k in self._seen if now - t < self.window_s]

    def kept_share(self, now: float) -> float | None:
        """The share of generated answers kept in the window (None: too few to judge)."""
        recent = self._recent(now)
        if len(recent) < self.min_answers:
            return None
        return sum(k for _, k in recent) / len(recent)

    def ok(self, now: float) -> bool:
        share = self.kept_share(now)
        return share is None or share >= self.floor
