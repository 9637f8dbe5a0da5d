"""A service built for unit tests, as its `__main__` builds it: its own app, its settings
and the Kafka settings from the environment, `agents.build` called once per process.

    agents = built.service("chunking")   # the agents module, wired
    agents.chunks_topic, agents.app, agents.chunk  # what build() set
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from shared.settings import KafkaSettings

_built: dict[str, ModuleType] = {}
SETTINGS = {
    "ingest": ("services.ingest.settings", "IngestSettings"),
    "redaction": ("services.redaction.settings", "RedactionSettings"),
    "chunking": ("services.chunking.settings", "ChunkingSettings"),
    "embedding": ("services.embedding.settings", "EmbeddingSettings"),
    "retrieval": ("services.retrieval.settings", "RetrievalSettings"),
    "inference": ("services.inference.settings", "InferenceSettings"),
    "ledger": ("services.ledger.settings", "LedgerServiceSettings"),
}


def settings_of(name: str) -> Any:
    module, cls = SETTINGS[name]
    return getattr(importlib.import_module(module), cls)()


def service(name: str) -> ModuleType:
    """services.<name>.agents after its build on the service's own app."""
    if name not in _built:
        agents = importlib.import_module(f"services.{name}.agents")
        make = importlib.import_module(f"services.{name}.app").make
        settings, kafka = settings_of(name), KafkaSettings()
        agents.build(make(settings, kafka), settings, kafka)
        _built[name] = agents
    return _built[name]
