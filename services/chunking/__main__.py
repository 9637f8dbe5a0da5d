"""`python -m services.chunking` runs the chunking worker."""

from services.chunking.agents import app
from services.chunking.app import settings
from shared.runner import run_worker

run_worker(app, settings.log_level)
