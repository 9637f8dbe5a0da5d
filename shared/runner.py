"""Start a service's Faust worker the same way from `python -m` and `streamrag worker`."""

from __future__ import annotations

import logging
import sys

import faust


def run_worker(app: faust.App, log_level: str = "INFO") -> None:
    logging.getLogger("faust").setLevel(log_level)
    sys.argv = [app.conf.id, "worker", "--loglevel", log_level.lower(), "--without-web"]
    app.main()
