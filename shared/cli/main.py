"""Entry point of the `streamrag` command."""

from __future__ import annotations

import argparse
import logging
import runpy
import sys
from collections.abc import Callable

from shared import logsafe
from shared.cli import admin, audit, backup, config, produce, query, status, topics, trace, up
from shared.contract.topics import SERVICES


def _worker_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("worker", help="run one service (or `onebox`: all of them) in this process")
    p.add_argument("name", choices=[*sorted(SERVICES), "onebox"])


def _run_worker(args: argparse.Namespace) -> int:
    # Exactly what `python -m services.<name>` runs.
    runpy.run_module(f"services.{args.name}", run_name="__main__", alter_sys=True)
    return 0


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "up": up.run, "worker": _run_worker, "produce": produce.run, "query": query.run,
    "status": status.run, "topics": topics.run, "health": admin.run_health,
    "audit": audit.run, "backup": backup.run_backup, "restore": backup.run_restore,
    "trace": trace.run, "config": config.run,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="streamrag", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up.add_parser(sub)
    _worker_parser(sub)
    produce.add_parser(sub)
    query.add_parser(sub)
    status.add_parser(sub)
    trace.add_parser(sub)
    config.add_parser(sub)
    admin.add_parsers(sub)
    topics.extend_parser(sub.choices["topics"])
    audit.add_parser(sub)
    backup.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    logsafe.install()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        datefmt="%H:%M:%S")
    args = build_parser().parse_args(argv)
    return HANDLERS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
