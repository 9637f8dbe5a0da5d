"""`python -m services.onebox` runs every service in one worker (the embedded default)."""

from services.onebox.settings import OneboxSettings, may_run_torch
from shared.worker.lean_imports import DEEP_LEARNING, forgo

if not may_run_torch(OneboxSettings().services):
    forgo(*DEEP_LEARNING)  # no hosted stage runs torch: spaCy and Presidio would load it

from services.onebox.app import app, hosted, settings  # noqa: E402
from shared.worker.runner import run_worker  # noqa: E402

run_worker(app, settings.log_level, hosted=hosted)
