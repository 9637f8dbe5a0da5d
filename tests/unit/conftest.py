"""Unit tests never load the bundled SmolLM2 (a real model, seconds to load): a test that
needs a generator attaches a tiny random one (scripts/benchlib/tinylm.py) or says so by
setting STREAMRAG_INFERENCE_GENERATOR_BUNDLED itself. The real model is tested against the
real mesh (tests/integration/test_real_generator.py).

Hypothesis's per-example deadline (200 ms) is a wall-clock threshold: on a shared 2-core
machine running the whole suite at once an example took 274 ms and failed the test. Every
property test runs without it; a hang is still caught by pytest-timeout."""

import os
import tempfile

from hypothesis import settings

os.environ.setdefault("STREAMRAG_INFERENCE_GENERATOR_BUNDLED", "false")
# The data-key store of stages built in unit tests: a fresh one per run, never the repo's.
os.environ.setdefault("STREAMRAG_KEYS_PATH", os.path.join(
    tempfile.mkdtemp(prefix="streamrag-keys-"), "versions.sqlite"))

settings.register_profile("streamrag", deadline=None)
settings.load_profile("streamrag")
