"""What the SLO guard counts per variant, and the window figures read back from the counts.

Pure. Every inference instance sends a GuardSample per routed call (finished, failed,
cancelled by its caller or deadline, or still in flight past the latency objective:
guard/inflight.py) and per feedback event, and the guard's probe task one per probe, to
guard.samples.v1 (one partition); the guard's agent adds them to a tumbling window table
keyed `<variant>/<figure>` (`table_keys`), and `figures` reads one window back into Figures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Literal

from pydantic import Field

from services.inference.guard.objectives import Figures
from services.inference.telemetry.latency import bucket_of, stats
from shared.contract.records import Record

# call: finished; error: found no shards or no queue room; cancelled: its caller cancelled
# it or its deadline passed; overdue: still in flight past the latency objective.
CALL_KINDS = ("call", "error", "cancelled", "overdue")
Kind = Literal["call", "error", "cancelled", "overdue", "probe", "click", "skip"]


class GuardSample(Record):
    """One event of one variant (guard.samples.v1, keyed by variant)."""

    variant: str = Field(min_length=1, max_length=32)
    config_version: int = Field(default=0, ge=0)
    kind: Kind
    at: float
    latency_ms: float = Field(default=0.0, ge=0)  # the call kinds: how long it ran so far
    # The call kinds: it ran longer than the latency objective of the instance serving it.
    slow: bool = False
    hit: bool = False  # probe: the judged document was among the first 10


def table_keys(sample: GuardSample) -> Iterator[str]:
    """The window-table counters one sample adds 1 to."""
    v = sample.variant
    if sample.kind in CALL_KINDS:
        yield f"{v}/calls"
        yield f"{v}/b{bucket_of(sample.latency_ms)}"
        if sample.slow:
            yield f"{v}/slow"
        if sample.kind in ("error", "cancelled"):  # a cancelled call is its variant's error
            yield f"{v}/errors"
        if sample.kind in ("cancelled", "overdue"):
            yield f"{v}/{sample.kind}"
    elif sample.kind == "probe":
        yield f"{v}/probes"
        if sample.hit:
            yield f"{v}/probe_hits"
    else:
        yield f"{v}/{sample.kind}s"


def figures(variant: str, count: Callable[[str], int]) -> Figures | None:
    """The variant's Figures from its window counters (`count(key)`); None if it had none."""
    calls, probes = count(f"{variant}/calls"), count(f"{variant}/probes")
    clicks, skips = count(f"{variant}/clicks"), count(f"{variant}/skips")
    if not (calls or probes or clicks or skips):
        return None
    p99 = stats(lambda b: count(f"{variant}/b{b}")).p99_ms if calls else 0.0
    return Figures(calls=calls, errors=count(f"{variant}/errors"), p99_ms=p99,
                   probe_hit_rate=count(f"{variant}/probe_hits") / probes if probes else None,
                   clicks=clicks, skips=skips, slow=count(f"{variant}/slow"),
                   overdue=count(f"{variant}/overdue"),
                   cancelled=count(f"{variant}/cancelled"))
