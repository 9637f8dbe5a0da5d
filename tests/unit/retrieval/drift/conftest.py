"""Embeddings of the real-text corpora, computed once and cached across sessions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.retrieval.drift.corpora import Corpus, embed, incident_reports, scifact_slices

ONCOLOGY = re.compile(r"cancer|tumou?r|carcinoma|oncolog|metasta")


@pytest.fixture(scope="session")
def cache_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = request.config.cache
    if cache is None:  # -p no:cacheprovider: this session only
        return tmp_path_factory.mktemp("drift-embeddings")
    return Path(cache.mkdir("streamrag-drift-embeddings"))


@pytest.fixture(scope="session")
def held_out(cache_dir: Path) -> Corpus:
    """SciFact abstracts the detector's defaults were not tuned on."""
    texts = scifact_slices()[1]
    return Corpus(texts, embed(texts, cache_dir))


@pytest.fixture(scope="session")
def incidents(cache_dir: Path) -> Corpus:
    texts = incident_reports(100, seed=7)
    return Corpus(texts, embed(texts, cache_dir))


@pytest.fixture(scope="session")
def oncology_split(held_out: Corpus) -> tuple[Corpus, Corpus]:
    """The held-out abstracts without and with cancer in them: a change of topic within
    one collection, harder to see than a change of collection."""
    onc = [bool(ONCOLOGY.search(t.lower())) for t in held_out.texts]
    return held_out.where([not k for k in onc]), held_out.where(onc)
