"""What a service's `build(app, settings, kafka)` made on an app: its agents, by name.

Every service exposes `build` in its `agents` module; its `__main__`, the one-process
composition (services/onebox) and the tests call it. Nothing is built when a module is
imported: no app, no topic layout, no settings object (tests/unit/test_built_not_imported.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Topology:
    service: str
    app: Any  # the faust.App the service's agents, tables and timers are registered on
    settings: Any  # the service's own settings (its ServiceSettings subclass)
    agents: Mapping[str, Any]  # Faust agents by short name
    # The stage object whose methods the agents are, where the service is built as one
    # (its counters, buffers and collaborators are its fields, none at module level).
    stage: Any = None

    def agent(self, name: str) -> Any:
        return self.agents[name]
