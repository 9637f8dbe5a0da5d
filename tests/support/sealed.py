"""Reading the sealed topics as the mesh does: with the mesh's data-key store.

    opened(mesh, record.value)   # the record as a dict, its text in clear when its key lives

docs.redacted.v1, chunks.v1 and chunks.embedded.v1 hold their text sealed under each
version's data key (shared/contract/sealed.py). A test that reads text off them opens each
record first; a test that scans bytes for what must never be there scans the opened text
too, or it would pass on ciphertext whatever redaction did.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from services.cli.mesh import Endpoints
from shared.contract.records import ChunkSet, EmbeddedChunkSet, RedactedDocument
from shared.contract.sealed import Forgotten, KeyUnavailable, open_chunks, open_document
from shared.keys.settings import KeySettings
from shared.keys.store import VersionKeys


@cache
def _store(path: Path) -> VersionKeys:
    return VersionKeys.from_settings(KeySettings(path=path))


def keys_of(mesh: Endpoints) -> VersionKeys:
    """The key store of a mesh brought up by `isolated` (its run directory's data/keys)."""
    return _store(mesh.run_dir / "data" / "keys" / "versions.sqlite")


def opened(mesh: Endpoints, value: bytes | None) -> Any:
    """The record's JSON, opened when sealed and its key lives (as it is otherwise)."""
    data = json.loads(value or b"null")
    if not isinstance(data, dict) or not data.get("sealed"):
        return data
    try:
        if "chunks" in data:
            cls = EmbeddedChunkSet if "model_id" in data else ChunkSet
            return open_chunks(cls.model_validate(data), keys_of(mesh)).model_dump(mode="json")
        doc = RedactedDocument.model_validate(data)
        return open_document(doc, keys_of(mesh)).model_dump(mode="json")
    except (Forgotten, KeyUnavailable):
        return data


def opened_text(mesh: Endpoints, value: bytes | None) -> str:
    """The record as JSON text, opened: what a scan for forbidden words must read."""
    try:
        return json.dumps(opened(mesh, value), ensure_ascii=False)
    except ValueError:
        return (value or b"").decode("utf-8", "replace")
