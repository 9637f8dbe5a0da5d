"""Embeddings of the real-text corpora (scripts/benchlib/drift.py), computed once and
cached across sessions in pytest's cache folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.benchlib.drift import (
    SCIFACT,
    SCIFACT_PLACES,
    Corpus,
    embed,
    incident_reports,
    oncology_split,
    scifact_slices,
)


@pytest.fixture(scope="session")
def cache_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = getattr(request.config, "cache", None)
    if cache is None:  # -p no:cacheprovider: this session only
        return tmp_path_factory.mktemp("drift-embeddings")
    return Path(cache.mkdir("streamrag-drift-embeddings"))


@pytest.fixture(scope="session")
def held_out(cache_dir: Path) -> Corpus:
    """SciFact abstracts the detector's defaults were not tuned on."""
    if SCIFACT is None:
        pytest.skip("SciFact is not on this machine (STREAMRAG_SCIFACT_DIR, or "
                    f"{' or '.join(map(str, SCIFACT_PLACES))})")
    texts = scifact_slices()[1]
    return Corpus(texts, embed(texts, cache_dir))


@pytest.fixture(scope="session")
def incidents(cache_dir: Path) -> Corpus:
    texts = incident_reports(100, seed=7)
    return Corpus(texts, embed(texts, cache_dir))


@pytest.fixture(scope="session")
def within_scifact(held_out: Corpus) -> tuple[Corpus, Corpus]:
    return oncology_split(held_out)
