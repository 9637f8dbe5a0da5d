"""The guard's decisions: consecutive breaking windows per variant, acted on in tiers.

Pure: `Guard.close_window` takes one closed window's figures per variant and the applied
configuration, and returns what to do. Each window is judged relative to its variants
(objectives.judge): a breach the reference shares is the machine's, not a variant's.

- Tier 1: a variant other than the main one broke an objective on its own in N consecutive
  windows (default 3): the next version routes nothing to it (its weight 0).
- Tier 2: after the grace period, the next version restores the last version the guard
  judged stable (a clean window under it, and it routes nothing to the failing variant).
- The main variants (the reference and any other of the largest weight; "base" where there
  are no variants) are never taken out of traffic: N breaking windows of theirs are an
  incident reported once (tier 0: `alert` when the breach was theirs alone in every window
  of the run, `shared` when the others broke it too), and, where `rollback_main` is set, a
  breach of theirs alone under a version never judged stable rolls that version back
  (tier 2) at once.
- A variant other than the main one that has too few calls to be judged while the main one
  is judged, N windows running, is reported once per version (tier 0 `samples`) with the
  traffic it would need.

A variant's run of breaking windows restarts at every new version, so a version is never
judged on another's windows, and an action is taken once; a window too thin to judge the
variant in neither extends its run nor ends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from services.inference.guard.objectives import (
    Figures,
    Objectives,
    Verdict,
    judge,
    judged,
    reference,
)
from shared.contract.query_config import BASE, QueryConfig

AUTHOR = "slo-guard"
KEEP_STABLE = 32  # versions judged stable kept as rollback targets, newest
Kind = Literal["stop", "rollback", "alert", "shared", "samples"]


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    figures: Figures
    reference: Figures | None
    breaches: tuple[str, ...]  # broken on its own
    shared: tuple[str, ...] = ()  # broken by the reference as well


@dataclass(frozen=True)
class Decision:
    tier: int  # 0: report only; 1: stop routing to the variant; 2: roll back
    kind: Kind
    variant: str
    incident: str  # the incident's id, shared by both tiers
    from_config: QueryConfig | None  # the version acted on
    content: dict[str, Any] | None  # the next version's knobs and variants; None: no write
    rollback_of: int | None
    note: str
    windows: tuple[Window, ...]
    needed_qps: float | None = None  # samples: the queries/s in all the variant needs


@dataclass
class _Open:
    incident: str
    variant: str
    since: float  # the end of the window tier 1 acted in
    expected: dict[str, Any]  # the content tier 1 wrote
    windows: tuple[Window, ...]


@dataclass
class Guard:
    objectives: Objectives = field(default_factory=Objectives)
    consecutive: int = 3
    grace_s: float = 30.0
    rollback_main: bool = False  # a main variant's own breach may roll its version back
    _runs: dict[str, list[Window]] = field(default_factory=dict)
    _reported: set[str] = field(default_factory=set)  # main variants reported this run
    _thin: dict[str, int] = field(default_factory=dict)  # windows running with too few calls
    _thin_reported: set[str] = field(default_factory=set)  # per version
    _stable: dict[int, QueryConfig] = field(default_factory=dict)  # judged stable, by version
    _version: int | None = None
    _open: _Open | None = None

    @property
    def stable_versions(self) -> tuple[int, ...]:
        return tuple(sorted(self._stable))

    def breaking(self) -> dict[str, int]:
        """Each variant's count of consecutive breaking windows so far."""
        return {name: len(run) for name, run in self._runs.items()}

    def close_window(self, start: float, end: float, window: Mapping[str, Figures],
                     config: QueryConfig | None) -> list[Decision]:
        version = config.version if config is not None else 0
        same = version == self._version
        if not same:
            self._runs.clear()
            self._reported.clear()
            self._thin.clear()
            self._thin_reported.clear()
        self._version = version
        verdicts = judge(window, config, self.objectives)
        if same and config is not None and window \
                and not any(v.broken for v in verdicts.values()) and not _stops_routing(config):
            self._stable[version] = config
            for old in sorted(self._stable)[:-KEEP_STABLE]:
                del self._stable[old]
        self._count(start, end, window, verdicts, config)
        if self._open is not None:
            return self._after_grace(end, config)
        out = self._main_reports(end, config)
        if any(d.tier == 2 for d in out):
            return out
        out += self._undersampled(start, end, window, config)
        protected = mains(config)
        for name, run in sorted(self._runs.items()):
            if len(run) >= self.consecutive and name not in protected:
                return [*out, *self._act(name, end, config)]
        return out

    def _count(self, start: float, end: float, window: Mapping[str, Figures],
               verdicts: Mapping[str, Verdict], config: QueryConfig | None) -> None:
        ref_name = reference(config)
        ref = window.get(ref_name) if ref_name is not None else None
        protected = mains(config)
        for name in routed(config):
            verdict = verdicts.get(name, Verdict())
            counts = verdict.broken if name in protected else verdict.own
            fig = window.get(name)
            if counts and fig is not None:
                self._runs.setdefault(name, []).append(Window(
                    start, end, fig, None if name == ref_name else ref,
                    verdict.own, verdict.shared))
            elif fig is not None and judged(fig, None if name == ref_name else ref,
                                            self.objectives):
                self._runs.pop(name, None)
                self._reported.discard(name)
            # else too thin to judge it (too few calls, no quality signal to compare): its
            # run neither grows nor ends, so a variant hovering about the minimum of calls
            # is still acted on when it keeps breaking in the windows that judge it
        for name in set(self._runs) - set(routed(config)):
            del self._runs[name]

    def _main_reports(self, end: float, config: QueryConfig | None) -> list[Decision]:
        """A main variant's run of N breaking windows: reported once, never stopped."""
        out = []
        for name in sorted(mains(config)):
            run = self._runs.get(name, [])
            if len(run) < self.consecutive or name in self._reported:
                continue
            self._reported.add(name)
            windows = tuple(run)
            incident = f"{name}@{config.version if config else 0}@{int(end)}"
            # Its own only when every window of the run was: one window the others broke
            # too says the machine is in it, and nothing is rolled back for that.
            own = all(w.breaches for w in windows)
            if own and self.rollback_main and config is not None \
                    and config.version not in self._stable:
                return [self._rollback(incident, name, config, windows, main=True)]
            if own:
                why = (f"the main variant {name}: {_why(windows)}; reported, its weight is "
                       "never set to 0")
                if self.rollback_main:
                    why += (f" (version {config.version if config else 0} was judged "
                            "stable before: not rolled back)")
            else:
                why = (f"{_shared(windows)} broken by every variant judged with {name} in "
                       f"{len(windows)} consecutive windows: the machine's or the mesh's, "
                       "not a variant's; reported, traffic unchanged")
            out.append(Decision(0, "alert" if own else "shared", name, incident, config, None,
                                None, f"slo-guard: {why}", windows))
        return out

    def _undersampled(self, start: float, end: float, window: Mapping[str, Figures],
                      config: QueryConfig | None) -> list[Decision]:
        """Variants too thin to judge beside a main variant that is judged: their p99 and
        error rate go unseen, so say how much traffic they need, once per version."""
        protected, names = mains(config), routed(config)
        if config is None or len(names) < 2:
            return []
        min_calls = self.objectives.min_calls
        if not any(window.get(m, Figures()).calls >= min_calls for m in protected):
            return []  # a quiet mesh: nothing is judged, nothing is thin in particular
        size = max(end - start, 1e-9)
        total_weight = sum(config.variants[n].weight for n in names)
        total_calls = sum(f.calls for f in window.values())
        out = []
        for name in names:
            if name in protected:
                continue
            calls = window.get(name, Figures()).calls
            if calls >= min_calls:
                self._thin.pop(name, None)
                continue
            self._thin[name] = self._thin.get(name, 0) + 1
            if self._thin[name] < self.consecutive or name in self._thin_reported:
                continue
            self._thin_reported.add(name)
            weight = config.variants[name].weight
            needed = min_calls / size / (weight / total_weight)
            note = (f"slo-guard: {name} has too few calls to judge its p99 and error rate: "
                    f"{calls} in the last {size:.0f} s window, {min_calls} needed; at weight "
                    f"{weight} of {total_weight} that needs {needed:.1f} queries/s in all "
                    f"(there were {total_calls / size:.1f}/s)")
            fig = window.get(name, Figures())
            incident = f"{name}@{config.version}@{int(end)}/samples"
            out.append(Decision(0, "samples", name, incident, config, None, None, note,
                                (Window(start, end, fig, None, ()),), needed))
        return out

    def _act(self, variant: str, end: float, config: QueryConfig | None) -> list[Decision]:
        windows = tuple(self._runs.pop(variant))
        incident = f"{variant}@{config.version if config else 0}@{int(end)}"
        if config is not None and variant in config.variants and len(routed(config)) > 1:
            content: dict[str, Any] = config.content()
            content["variants"][variant]["weight"] = 0
            self._open = _Open(incident, variant, end, content, windows)
            self._runs.clear()
            return [Decision(1, "stop", variant, incident, config, content, None,
                             f"slo-guard: stop routing to {variant} ({_why(windows)})",
                             windows)]
        return [self._rollback(incident, variant, config, windows)]

    def _after_grace(self, end: float, config: QueryConfig | None) -> list[Decision]:
        assert self._open is not None
        opened = self._open
        if end < opened.since + self.grace_s:
            return []
        self._open = None
        if config is None or config.author != AUTHOR or config.content() != opened.expected:
            note = (f"slo-guard: no rollback, version {config.version if config else 0} "
                    "followed the guard's")
            return [Decision(2, "rollback", opened.variant, opened.incident, config, None,
                             None, note, opened.windows)]
        return [self._rollback(opened.incident, opened.variant, config, opened.windows)]

    def _rollback(self, incident: str, variant: str, config: QueryConfig | None,
                  windows: tuple[Window, ...], main: bool = False) -> Decision:
        self._runs.clear()
        current = config.version if config is not None else 0
        # A version that routes to the failing variant (or, for a main variant, has the
        # failing version's content) would bring the failure back.
        stable = [c for v, c in sorted(self._stable.items())
                  if v < current and (main or variant == BASE or variant not in routed(c))
                  and (config is None or c.content() != config.content())]
        if not stable:
            return Decision(2, "rollback", variant, incident, config, None, None,
                            "slo-guard: no rollback, no version judged stable", windows)
        target = stable[-1]
        return Decision(2, "rollback", variant, incident, config, target.content(),
                        target.version, f"slo-guard: roll back to version {target.version} "
                        f"({variant}: {_why(windows)})", windows)


def routed(config: QueryConfig | None) -> list[str]:
    """The variants queries go to under `config`."""
    if config is None or not config.variants:
        return [BASE]
    return sorted(n for n, v in config.variants.items() if v.weight > 0)


def mains(config: QueryConfig | None) -> set[str]:
    """The variants never taken out of traffic: the reference and any other of the largest
    weight ("base" where there are no variants)."""
    if config is None or not config.variants:
        return {BASE}
    top = max(v.weight for v in config.variants.values())  # the reference is among them
    return {n for n, v in config.variants.items() if v.weight == top}


def _stops_routing(config: QueryConfig) -> bool:
    """A guard's tier-1 version: never a version to roll back to."""
    return config.author == AUTHOR and config.rollback_of is None


def _why(windows: tuple[Window, ...]) -> str:
    names = sorted({b for w in windows for b in (*w.breaches, *w.shared)})
    return f"{', '.join(names)} broken in {len(windows)} consecutive windows"


def _shared(windows: tuple[Window, ...]) -> str:
    return ", ".join(sorted({b for w in windows for b in w.shared}))


def diff(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "",
         ) -> dict[str, tuple[Any, Any]]:
    """Every leaf that differs between two configuration contents: path -> (old, new)."""
    out: dict[str, tuple[Any, Any]] = {}
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        path = f"{prefix}{key}"
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out.update(diff(a, b, f"{path}."))
        elif a != b:
            out[path] = (a, b)
    return out
