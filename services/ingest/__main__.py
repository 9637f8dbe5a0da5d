"""`python -m services.ingest` runs the ingest worker."""

from services.ingest.agents import app
from services.ingest.app import settings
from shared.worker.runner import run_worker

run_worker(app, settings.log_level, hosted=(settings,))
