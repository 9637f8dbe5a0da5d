"""`python -m services.chunking` runs the chunking worker."""

from shared.worker.lean_imports import DEEP_LEARNING, forgo

forgo(*DEEP_LEARNING)  # it only counts tokens (shared/encoder/tokenizer.py): no model runs here

from services.chunking.agents import app  # noqa: E402
from services.chunking.app import settings  # noqa: E402
from shared.worker.runner import run_worker  # noqa: E402

run_worker(app, settings.log_level, hosted=(settings,))
