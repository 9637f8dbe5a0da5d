"""Start a service's Faust worker the same way from `python -m` and `streamrag worker`."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import faust

from shared import logsafe
from shared.errors import ConfigError
from shared.settings import ProcessSettings, ServiceSettings, env_names
from shared.worker import metrics, ports
from shared.worker.heartbeat import WatchdogSettings

EXIT_CONFIG = 78  # EX_CONFIG: a setting must change before a restart can help


def run_worker(app: faust.App, log_level: str = "INFO",
               hosted: Sequence[ServiceSettings] = ()) -> None:
    """Start `app`'s worker; `hosted`: the settings of the services it runs."""
    logsafe.install()  # before Faust sets up logging: no record may carry document text
    logging.getLogger("faust").setLevel(log_level)
    try:
        # Faust makes only the last level of its data directory; the rest is ours to create.
        ProcessSettings().ensure_data_dir(Path(app.conf.datadir).name)
        # Before the app starts, so a taken port never makes the worker join its group.
        ports.check_free(listeners(hosted))
    except ConfigError as exc:  # one line that names the setting: a traceback adds nothing
        print(f"{app.conf.id}: {exc}", file=sys.stderr, flush=True)
        sys.exit(EXIT_CONFIG)
    sys.argv = [app.conf.id, "worker", "--loglevel", log_level.lower(), "--without-web"]
    app.main()


def listeners(hosted: Sequence[ServiceSettings]) -> list[ports.Listener]:
    """Every port the worker will listen on: the process's /metrics, as
    shared.worker.metrics.Server chooses it, and each hosted service's own servers."""
    watchdog = WatchdogSettings()
    first = (watchdog.metrics_host, watchdog.metrics_port)
    found = [listener for s in hosted for listener in s.listeners()]
    served = metrics.server.planned(first)
    if served is not None:
        found.insert(0, ports.Listener(_metrics_setting(served, first, hosted), *served))
    return found


def _metrics_setting(served: tuple[str, int], first: tuple[str, int],
                     hosted: Sequence[ServiceSettings]) -> str:
    if served == first:
        return env_names(WatchdogSettings)["metrics_port"]
    for s in hosted:  # export_counts asks for each stage's port in this order
        if (getattr(s, "metrics_host", None), getattr(s, "metrics_port", None)) == served:
            return s.env_name("metrics_port")
    return "the first hosted service's STREAMRAG_<SERVICE>_METRICS_PORT"
