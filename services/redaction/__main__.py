"""`python -m services.redaction` runs the redaction worker."""

from shared.worker.lean_imports import DEEP_LEARNING, forgo

forgo(*DEEP_LEARNING)  # spaCy and Presidio would load torch (~340 MB) and never run it

from services.redaction.agents import app  # noqa: E402
from services.redaction.app import settings  # noqa: E402
from shared.worker.runner import run_worker  # noqa: E402

run_worker(app, settings.log_level, hosted=(settings,))
