"""`python -m services.onebox` runs every service in one worker (the embedded default)."""

from services.onebox.settings import OneboxSettings, may_run_torch
from shared.worker.lean_imports import DEEP_LEARNING, forgo

settings = OneboxSettings()
if not may_run_torch(settings.services, at_start=True):
    # No hosted stage runs torch, or none before a generator loaded on demand lifts this
    # (services/inference/runtime.py load_generator): spaCy and Presidio would load it.
    forgo(*DEEP_LEARNING)

from services.onebox.app import build  # noqa: E402
from shared.settings import KafkaSettings  # noqa: E402
from shared.worker.runner import run_worker  # noqa: E402

app, hosted = build(settings, KafkaSettings())
# Each hosted service's settings, as its build used them (the ports they name).
run_worker(app, settings.log_level, hosted=tuple(t.settings for t in hosted))
