"""Which embedding models a retrieval worker indexes, and when a model's index has caught up.

Every model id seen on chunks.embedded.v1 gets its own shard per partition (FAISS + BM25),
so vectors of two models never share an index. A model's shard has caught up with the
others at a partition once it holds every document they hold, each at least at their
version (deletes count: a delete is a version too). That is what an index built by a new
embedding deployment re-reading the compacted chunk topic reaches when it is complete;
inference's query encoder switches to the new model only then (services/inference/switch.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path

from shared.errors import InvalidInput
from shared.worker.status_files import replace_file

MARKER = "model.json"


def dir_name(model_id: str) -> str:
    """A model's snapshot folder: readable, safe as a path, unique by a hash of the id."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("._")[:48] or "model"
    return f"{readable}-{hashlib.blake2b(model_id.encode(), digest_size=4).hexdigest()}"


def covers(versions: Mapping[str, int], others: Mapping[str, int]) -> bool:
    """True when `versions` holds every document of `others` at least at its version."""
    return all(versions.get(doc, 0) >= version for doc, version in others.items())


def check_new_model(model_id: str, dim: int, vector_dim: int | None, known: int,
                    limit: int) -> None:
    """Refuse a record that would start an index for a model the worker cannot take:
    a bad dimension (declared or carried) or one model too many."""
    if not model_id or dim <= 0 or (vector_dim is not None and vector_dim != dim):
        msg = f"a new model needs an id and a positive dimension its vectors have ({dim})"
        raise InvalidInput("model_mismatch", "dim", msg)
    if known >= limit:
        msg = f"already indexing {known} models (STREAMRAG_RETRIEVAL_MAX_MODELS)"
        raise InvalidInput("too_many_models", "model_id", msg)


def write_marker(directory: Path, model_id: str, dim: int) -> None:
    """Record that this worker indexes the model, so a restart rebuilds it even before
    its first snapshot exists."""
    directory.mkdir(parents=True, exist_ok=True)
    replace_file(directory / MARKER, json.dumps({"model_id": model_id, "dim": dim}))


def read_markers(root: Path) -> dict[str, tuple[int, Path]]:
    """{model id: (dim, its folder)} of every model recorded under `root`."""
    found: dict[str, tuple[int, Path]] = {}
    for marker in sorted(root.glob(f"*/{MARKER}")):
        try:
            data = json.loads(marker.read_text())
            found[str(data["model_id"])] = (int(data["dim"]), marker.parent)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a damaged marker: the model is seen again on the topic
    return found
