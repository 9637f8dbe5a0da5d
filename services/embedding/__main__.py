"""`python -m services.embedding` runs the embedding worker."""

from services.embedding.settings import EmbeddingSettings
from shared.worker.lean_imports import DEEP_LEARNING, forgo

if not EmbeddingSettings().may_run_torch():
    forgo(*DEEP_LEARNING)  # ONNX on CPU: torch (~340 MB, via spaCy's thinc) would never run

from services.embedding.agents import app  # noqa: E402
from services.embedding.app import settings  # noqa: E402
from shared.worker.runner import run_worker  # noqa: E402

run_worker(app, settings.log_level, hosted=(settings,))
