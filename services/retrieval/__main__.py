"""`python -m services.retrieval` runs the retrieval worker."""

from services.retrieval.agents import app
from services.retrieval.app import settings
from shared.worker.runner import run_worker

run_worker(app, settings.log_level, hosted=(settings,))
