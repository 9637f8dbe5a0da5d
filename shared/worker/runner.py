"""Start a service's Faust worker the same way from `python -m` and `streamrag worker`."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import faust

from shared import logsafe
from shared.errors import ConfigError
from shared.settings import ProcessSettings

EXIT_CONFIG = 78  # EX_CONFIG: a setting must change before a restart can help


def run_worker(app: faust.App, log_level: str = "INFO") -> None:
    logsafe.install()  # before Faust sets up logging: no record may carry document text
    logging.getLogger("faust").setLevel(log_level)
    # Faust makes only the last level of its data directory; the rest is ours to create.
    try:
        ProcessSettings().ensure_data_dir(Path(app.conf.datadir).name)
    except ConfigError as exc:  # one line that names the setting: a traceback adds nothing
        print(f"{app.conf.id}: {exc}", file=sys.stderr, flush=True)
        sys.exit(EXIT_CONFIG)
    sys.argv = [app.conf.id, "worker", "--loglevel", log_level.lower(), "--without-web"]
    app.main()
