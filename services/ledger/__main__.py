"""`python -m services.ledger` runs the ledger worker."""

from services.ledger.agents import app
from services.ledger.app import settings
from shared.worker.runner import run_worker

run_worker(app, settings.log_level, hosted=(settings,))
