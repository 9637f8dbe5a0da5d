"""The one app of one-process mode, and every hosted service built on it.

Each service keeps its own settings (its env prefix, data dir, batching); only the Faust app,
its consumer group (`streamrag-onebox`) and its one consumer are shared. `build` makes the
one app and calls each hosted service's own `agents.build` on it, as the service's
`__main__` calls it on its own app in the distributed deployment.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import faust

from services.chunking.settings import ChunkingSettings
from services.embedding.settings import EmbeddingSettings
from services.inference.settings import InferenceSettings
from services.ingest.settings import IngestSettings
from services.ledger.settings import LedgerServiceSettings
from services.onebox.settings import OneboxSettings
from services.redaction.settings import RedactionSettings
from services.retrieval.settings import RetrievalSettings
from shared.contract.topics import ONEBOX_APP
from shared.kafka.app import ContractTable, make_app
from shared.settings import KafkaSettings, ServiceSettings
from shared.worker.topology import Topology

SETTINGS: dict[str, Callable[[], ServiceSettings]] = {
    "ingest": IngestSettings, "redaction": RedactionSettings, "chunking": ChunkingSettings,
    "embedding": EmbeddingSettings, "retrieval": RetrievalSettings,
    "inference": InferenceSettings, "ledger": LedgerServiceSettings,
}


def build(settings: OneboxSettings, kafka: KafkaSettings,
          ) -> tuple[faust.App, tuple[Topology, ...]]:
    """The one app, with every service `settings.services` names built on it (their
    agents modules are imported here, by name, so a subset loads only its own)."""
    # Table changelogs keep the contract's per-service names (ContractTable).
    app = make_app(ONEBOX_APP, kafka, settings.data_dir, Table=ContractTable)
    built = tuple(importlib.import_module(f"services.{name}.agents").build(
        app, SETTINGS[name](), kafka) for name in settings.services)
    return app, built
