"""`python -m services.inference` runs the inference worker and its gRPC API."""

from services.inference.agents import app
from services.inference.app import settings
from shared.runner import run_worker

run_worker(app, settings.log_level)
