"""`python -m services.onebox` runs every service in one worker (the embedded default)."""

from services.onebox.app import app, settings
from shared.runner import run_worker

run_worker(app, settings.log_level)
