"""The guard's decisions: consecutive breaking windows per variant, acted on in tiers.

Pure: `Guard.close_window` takes one closed window's figures per variant and the applied
configuration, and returns what to do. Tier 1: N consecutive windows (default 3) broke an
objective, so the next version routes nothing to the variant (its weight 0). Tier 2: after
the grace period, the next version restores the last version the guard judged stable (a
clean window under it, and it routes nothing to the failing variant). Each decision also
makes an incident record. Where tier 1 cannot act (the variant is the only one routed),
tier 2 acts at once. A variant's run of breaking windows restarts at every new version, so
a version is never judged on another's windows, and an action is taken once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.inference.guard.objectives import Figures, Objectives, judge, reference
from shared.contract.query_config import BASE, QueryConfig

AUTHOR = "slo-guard"
KEEP_STABLE = 32  # versions judged stable kept as rollback targets, newest


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    figures: Figures
    reference: Figures | None
    breaches: tuple[str, ...]


@dataclass(frozen=True)
class Decision:
    tier: int  # 1: stop routing to the variant; 2: roll back to the last stable version
    variant: str
    incident: str  # the incident's id, shared by both tiers
    from_config: QueryConfig | None  # the version acted on
    content: dict[str, Any] | None  # the next version's knobs and variants; None: no write
    rollback_of: int | None
    note: str
    windows: tuple[Window, ...]


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
    _runs: dict[str, list[Window]] = field(default_factory=dict)
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
        self._version = version
        verdicts = judge(window, config, self.objectives)
        if same and config is not None and window and not any(verdicts.values()) \
                and not _stops_routing(config):
            self._stable[version] = config
            for old in sorted(self._stable)[:-KEEP_STABLE]:
                del self._stable[old]
        self._count(start, end, window, verdicts, config)
        if self._open is not None:
            return self._after_grace(end, config)
        for name, run in sorted(self._runs.items()):
            if len(run) >= self.consecutive:
                return self._act(name, end, config)
        return []

    def _count(self, start: float, end: float, window: Mapping[str, Figures],
               verdicts: Mapping[str, tuple[str, ...]], config: QueryConfig | None) -> None:
        ref_name = reference(config)
        ref = window.get(ref_name) if ref_name is not None else None
        for name in routed(config):
            if verdicts.get(name):
                self._runs.setdefault(name, []).append(Window(
                    start, end, window[name], None if name == ref_name else ref,
                    verdicts[name]))
            else:
                self._runs.pop(name, None)
        for name in set(self._runs) - set(routed(config)):
            del self._runs[name]

    def _act(self, variant: str, end: float, config: QueryConfig | None) -> list[Decision]:
        windows = tuple(self._runs.pop(variant))
        incident = f"{variant}@{config.version if config else 0}@{int(end)}"
        if config is not None and variant in config.variants and len(routed(config)) > 1:
            content: dict[str, Any] = config.content()
            content["variants"][variant]["weight"] = 0
            self._open = _Open(incident, variant, end, content, windows)
            self._runs.clear()
            return [Decision(1, variant, incident, config, content, None,
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
            return [Decision(2, opened.variant, opened.incident, config, None, None, note,
                             opened.windows)]
        return [self._rollback(opened.incident, opened.variant, config, opened.windows)]

    def _rollback(self, incident: str, variant: str, config: QueryConfig | None,
                  windows: tuple[Window, ...]) -> Decision:
        self._runs.clear()
        current = config.version if config is not None else 0
        # A version that routes to the failing variant (or, for "base", has the failing
        # version's content) would bring the failure back.
        stable = [c for v, c in sorted(self._stable.items())
                  if v < current and (variant == BASE or variant not in routed(c))
                  and (config is None or c.content() != config.content())]
        if not stable:
            return Decision(2, variant, incident, config, None, None,
                            "slo-guard: no rollback, no version judged stable", windows)
        target = stable[-1]
        return Decision(2, variant, incident, config, target.content(), target.version,
                        f"slo-guard: roll back to version {target.version} "
                        f"({variant}: {_why(windows)})", windows)


def routed(config: QueryConfig | None) -> list[str]:
    """The variants queries go to under `config`."""
    if config is None or not config.variants:
        return [BASE]
    return sorted(n for n, v in config.variants.items() if v.weight > 0)


def _stops_routing(config: QueryConfig) -> bool:
    """A guard's tier-1 version: never a version to roll back to."""
    return config.author == AUTHOR and config.rollback_of is None


def _why(windows: tuple[Window, ...]) -> str:
    names = sorted({b for w in windows for b in w.breaches})
    return f"{', '.join(names)} broken in {len(windows)} consecutive windows"


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
