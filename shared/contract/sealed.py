"""Sealing a document's text under its data key, and opening it.

A sealed Document (parsed, normalized, redacted) carries `key_id` and `sealed` (base64
of AES-256-GCM over the JSON of its title, text and metadata; shared/keys/sealing.py)
and empty title, text and metadata; everything a stage routes or filters on (ids,
version, op, source, domain, times, labels, counts, batch, the keyed content hash)
stays in clear. Ingest seals what it parses under the document's transit key and what
dedup versions under the version's key; redaction opens that and seals what it writes
under the same version key. Whoever reads them for their text opens them with the key
store; once the key is destroyed (`streamrag forget`, the text retention) no copy opens
anywhere, backups included.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import TypeVar

from shared.contract.records import (
    ChunkSet,
    Document,
    EmbeddedChunk,
    EmbeddedChunkSet,
    RedactedDocument,
)
from shared.errors import InvalidInput
from shared.keys.sealing import SealError, VersionKey
from shared.keys.store import Destroyed, VersionKeys

Sets = TypeVar("Sets", ChunkSet, EmbeddedChunkSet)
Docs = TypeVar("Docs", Document, RedactedDocument)


class Forgotten(Exception):
    """The version's key was destroyed: its text is gone for good."""

    def __init__(self, marker: Destroyed) -> None:
        super().__init__(f"{marker.doc_id}@v{marker.version} was forgotten "
                         f"({marker.reason}, key {marker.key_id})")
        self.marker = marker


class KeyUnavailable(Exception):
    """The key store holds neither the key nor its destruction (another store, one restored
    from before the key was made, or a record altered to name another key)."""


def seal(doc: Docs, key: VersionKey) -> Docs:
    """`doc` with its title, text and metadata sealed under `key` (deletes stay as they are:
    they carry no text)."""
    if doc.op != "upsert":
        return doc
    plain = json.dumps({"title": doc.title, "text": doc.text, "metadata": doc.metadata},
                       ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return doc.model_copy(update={"title": "", "text": "", "metadata": {},
                                  "key_id": key.key_id, "sealed": key.seal(plain)})


def open_with(doc: Docs, key: VersionKey) -> Docs:
    """`doc` opened with `key`: its version's key, or (version < 0) its transit key."""
    if key.key_id != doc.key_id or key.doc_id != doc.doc_id or \
            (key.version > 0 and key.version != doc.version):
        raise KeyUnavailable(f"{doc.doc_id}@v{doc.version} is sealed under {doc.key_id}, "
                             f"not {key.key_id}")
    try:
        data = json.loads(key.open(doc.sealed))
    except SealError as exc:
        raise KeyUnavailable(str(exc)) from exc
    return doc.model_copy(update={"title": data["title"], "text": data["text"],
                                  "metadata": data["metadata"], "key_id": "", "sealed": ""})


def open_document(doc: Docs, keys: VersionKeys) -> Docs:
    """`doc` with its text in clear (as it is when not sealed); Forgotten when its key was
    destroyed, KeyUnavailable when the store does not know it."""
    if not doc.sealed:
        return doc
    found = keys.by_id(doc.key_id)
    if found is not None and found.doc_id != doc.doc_id:
        found = None  # a record altered to name another document's key
    if isinstance(found, Destroyed):
        raise Forgotten(found)
    if found is None:
        raise KeyUnavailable(f"no key {doc.key_id} for {doc.doc_id}@v{doc.version} in "
                             f"{keys.path}")
    return open_with(doc, found)


def _chunks_plain(chunk_set: ChunkSet | EmbeddedChunkSet) -> bytes:
    """What a chunk set's seal holds: zlib of a length-prefixed JSON head (kind, title,
    texts) followed by the vectors as raw float32 bytes (base64 inside the seal would grow
    a vector by a third again: the largest set must still fit a record, shared/contract/
    sizes.py)."""
    head = json.dumps({"kind": "chunks", "title": chunk_set.title,
                       "texts": [c.text for c in chunk_set.chunks]},
                      separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    vectors = b"".join(base64.b64decode(c.vector) for c in chunk_set.chunks
                       if isinstance(c, EmbeddedChunk))
    return zlib.compress(struct.pack(">I", len(head)) + head + vectors, 1)


def seal_chunks(chunk_set: Sets, key: VersionKey) -> Sets:
    """`chunk_set` with its title and every chunk's text (and vector) sealed under `key`;
    ids, ordinals, token counts and overlaps stay in clear for batching and routing."""
    if chunk_set.op != "upsert":
        return chunk_set  # a delete carries no text
    blank = {"text": "", "vector": ""} if isinstance(chunk_set, EmbeddedChunkSet) else \
        {"text": ""}
    chunks = tuple(c.model_copy(update=blank) for c in chunk_set.chunks)
    return chunk_set.model_copy(update={"title": "", "chunks": chunks, "key_id": key.key_id,
                                        "sealed": key.seal(_chunks_plain(chunk_set))})


def open_chunks_with(chunk_set: Sets, key: VersionKey) -> Sets:
    if key.key_id != chunk_set.key_id or (key.doc_id, key.version) != (chunk_set.doc_id,
                                                                       chunk_set.version):
        raise KeyUnavailable(f"{chunk_set.doc_id}@v{chunk_set.version} is sealed under "
                             f"{chunk_set.key_id}, not {key.key_id}")
    try:
        plain = zlib.decompress(key.open(chunk_set.sealed))
        (size,) = struct.unpack(">I", plain[:4])
        data = json.loads(plain[4:4 + size])
        texts, raw = data["texts"], plain[4 + size:]
        if data.get("kind") != "chunks" or len(texts) != len(chunk_set.chunks):
            raise KeyUnavailable(f"the sealed text of {chunk_set.doc_id}@v{chunk_set.version}"
                                 " is not its chunks")
    except (SealError, KeyError, TypeError, ValueError, struct.error, zlib.error) as exc:
        raise KeyUnavailable(f"{chunk_set.doc_id}@v{chunk_set.version} does not open: "
                             f"{type(exc).__name__}") from exc
    updates: list[dict[str, str]] = [{"text": t} for t in texts]
    if isinstance(chunk_set, EmbeddedChunkSet):
        width = 4 * chunk_set.dim
        if len(raw) != width * len(texts):
            raise KeyUnavailable(f"the sealed vectors of {chunk_set.doc_id}@v"
                                 f"{chunk_set.version} are not {len(texts)} of {chunk_set.dim}")
        for i, update in enumerate(updates):
            update["vector"] = base64.b64encode(raw[i * width:(i + 1) * width]).decode("ascii")
    chunks = tuple(c.model_copy(update=u) for c, u in zip(chunk_set.chunks, updates,
                                                          strict=True))
    return chunk_set.model_copy(update={"title": data["title"], "chunks": chunks,
                                        "key_id": "", "sealed": ""})


def version_key(doc_id: str, version: int, keys: VersionKeys) -> VersionKey:
    """The live key of a version; Forgotten or KeyUnavailable otherwise."""
    found = keys.get(doc_id, version)
    if isinstance(found, Destroyed):
        raise Forgotten(found)
    if found is None:
        raise KeyUnavailable(f"no key for {doc_id}@v{version} in {keys.path}")
    return found


def open_chunks(chunk_set: Sets, keys: VersionKeys) -> Sets:
    """`chunk_set` in clear (as it is when not sealed); Forgotten or KeyUnavailable."""
    if not chunk_set.sealed:
        return chunk_set
    return open_chunks_with(chunk_set, version_key(chunk_set.doc_id, chunk_set.version, keys))


def as_delete(chunk_set: Sets) -> Sets:
    """What a stage passes on for a forgotten version's chunk set: its delete, nothing of
    its text (the compacted topics and the shards then drop the document)."""
    return chunk_set.model_copy(update={"op": "delete", "chunks": (), "title": "",
                                        "key_id": "", "sealed": ""})


def forgotten(doc_id: str, version: int, marker: Destroyed) -> InvalidInput:
    """The dead-letter reason for a record whose key a forget or the retention destroyed."""
    return InvalidInput("forgotten", "version", f"{doc_id}@v{version} was forgotten "
                        f"({marker.reason}, key {marker.key_id})")


def key_unavailable(doc_id: str, version: int) -> InvalidInput:
    """The dead-letter reason for a sealed record whose key this store does not hold."""
    return InvalidInput("key_unavailable", "key_id", f"no data key for {doc_id}@v{version}")
