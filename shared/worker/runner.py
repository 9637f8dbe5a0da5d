"""Start a service's Faust worker the same way from `python -m` and `streamrag worker`."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import faust

from shared.worker import logsafe


def run_worker(app: faust.App, log_level: str = "INFO") -> None:
    logsafe.install()  # before Faust sets up logging: no record may carry document text
    logging.getLogger("faust").setLevel(log_level)
    # Faust makes only the last level of its data directory; the rest is ours to create.
    Path(app.conf.datadir).mkdir(parents=True, exist_ok=True)
    sys.argv = [app.conf.id, "worker", "--loglevel", log_level.lower(), "--without-web"]
    app.main()
