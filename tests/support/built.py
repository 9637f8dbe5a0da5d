"""A service built for unit tests, as its `__main__` builds it: its own app, its settings
and the Kafka settings from the environment.

    agents = built.service("chunking")   # the agents module, wired (built once per process)
    agents.chunks_topic, agents.app, agents.chunk  # what build() set
    retrieval = built.stage("retrieval")  # a service built as a stage object: a fresh one
    retrieval.shards, retrieval.app, retrieval.index  # its fields, each call its own
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from services.onebox.app import SETTINGS  # each service's settings class, by name
from shared.settings import KafkaSettings

_built: dict[str, ModuleType] = {}


def service(name: str) -> ModuleType:
    """services.<name>.agents after its build on the service's own app."""
    if name not in _built:
        agents = importlib.import_module(f"services.{name}.agents")
        make = importlib.import_module(f"services.{name}.app").make
        settings, kafka = SETTINGS[name](), KafkaSettings()
        agents.build(make(settings, kafka), settings, kafka)
        _built[name] = agents
    return _built[name]


def stage(name: str, **overrides: Any) -> Any:
    """A fresh stage object of services.<name> on a new app of its own, built as its
    `__main__` builds it (settings from the environment, `overrides` on top)."""
    agents = importlib.import_module(f"services.{name}.agents")
    make = importlib.import_module(f"services.{name}.app").make
    settings, kafka = SETTINGS[name](**overrides), KafkaSettings()
    return agents.build(make(settings, kafka), settings, kafka).stage
