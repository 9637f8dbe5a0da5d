"""`python -m services.embedding` runs the embedding worker."""

from services.embedding.agents import app
from services.embedding.app import settings
from shared.runner import run_worker

run_worker(app, settings.log_level)
