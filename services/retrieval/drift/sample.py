"""An embedded document version as a drift sample, and back (pure).

A document counts once, whatever its length: its vector is the L2-normalised mean of its
chunk vectors, its words the most frequent content words of its chunks (lower case, stop
words, numbers and redaction placeholders left out), kept short.
"""

from __future__ import annotations

import binascii
import math
import re
from collections import Counter

import numpy as np
from bm25s.stopwords import STOPWORDS_EN

from services.retrieval.drift.detector import Sample
from shared.contract.records import DriftSample, EmbeddedChunkSet, decode_vector, encode_vector
from shared.errors import InvalidInput

WORD = re.compile(r"(?<![<\w])[a-z][a-z-]{2,30}(?![\w>])")  # not inside <EMAIL_ADDRESS>
STOP = frozenset(STOPWORDS_EN)
TERMS_PER_DOC = 12


def words(text: str) -> Counter[str]:
    return Counter(w for w in WORD.findall(text.lower()) if w not in STOP)


MAX_NAME = 512  # source, domain and model id longer than this are not judged (records.py)


def drift_sample(update: EmbeddedChunkSet) -> DriftSample | None:
    """The sample of an upsert with chunks; None for a delete, an empty document or names
    too long to key a detector by (the document itself is indexed all the same)."""
    if update.op != "upsert" or not update.chunks:
        return None
    if max(len(update.source), len(update.domain), len(update.model_id)) > MAX_NAME:
        return None
    mean = np.mean([c.array() for c in update.chunks], axis=0)
    norm = float(np.linalg.norm(mean))
    if not norm > 0:
        return None
    counts: Counter[str] = Counter()
    for chunk in update.chunks:
        counts.update(words(chunk.text[chunk.overlap_chars:]))
    return DriftSample(
        source=update.source, domain=update.domain, model_id=update.model_id,
        doc_id=update.doc_id, version=update.version, title=update.title[:200],
        ingest_time=update.ingest_time, chunks=len(update.chunks),
        vector=encode_vector(mean / norm), terms=dict(counts.most_common(TERMS_PER_DOC)))


def from_record(record: DriftSample, dim: int | None = None) -> Sample:
    """The detector's sample; InvalidInput for a vector that is not a finite unit vector
    (of `dim` values, where the key's windows have a dimension already)."""
    try:
        vector = decode_vector(record.vector).astype(np.float64)
    except (ValueError, binascii.Error) as exc:
        raise InvalidInput("invalid_vector", "vector", "not base64 float32") from exc
    norm = float(np.linalg.norm(vector)) if vector.size else 0.0
    if not math.isfinite(norm) or abs(norm - 1.0) > 1e-3:
        raise InvalidInput("invalid_vector", "vector", "not a finite unit vector")
    if dim is not None and vector.size != dim:
        raise InvalidInput("dim_mismatch", "vector", f"{vector.size} values, the key has {dim}")
    return Sample(doc_id=record.doc_id, version=record.version, at=record.ingest_time,
                  vector=vector, terms=record.terms, title=record.title)
