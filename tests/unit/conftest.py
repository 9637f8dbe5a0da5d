"""Unit tests never load the bundled SmolLM2 (a real model, seconds to load): a test that
needs a generator attaches a tiny random one (scripts/benchlib/tinylm.py) or says so by
setting STREAMRAG_INFERENCE_GENERATOR_BUNDLED itself. The real model is tested against the
real mesh (tests/integration/test_real_generator.py)."""

import os

os.environ.setdefault("STREAMRAG_INFERENCE_GENERATOR_BUNDLED", "false")
