"""`python -m services.redaction` runs the redaction worker."""

from services.redaction.agents import app
from services.redaction.app import settings
from shared.runner import run_worker

run_worker(app, settings.log_level)
