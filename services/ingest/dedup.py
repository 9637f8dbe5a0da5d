"""Deduplication by (doc id, content hash) and version assignment."""

from __future__ import annotations

from typing import TypedDict

from shared.records import Document


class SeenVersion(TypedDict):
    hash: str
    version: int


def next_version(prev: SeenVersion | None, doc: Document) -> Document | None:
    """The document with its new version, or None when it repeats the latest content.

    A delete of a document never seen is still passed on: ingest state may be younger
    than the index, and deleting twice is harmless downstream.
    """
    if prev is not None and prev["hash"] == doc.content_hash:
        return None
    version = 1 if prev is None else prev["version"] + 1
    return doc.model_copy(update={"version": version})


def seen(doc: Document) -> SeenVersion:
    return {"hash": doc.content_hash, "version": doc.version}
