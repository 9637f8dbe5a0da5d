"""Entry point of the `streamrag` command."""

from __future__ import annotations

import argparse
import logging
import runpy
import sys
from collections.abc import Callable

from pydantic import ValidationError

from services.cli import (
    admin,
    audit,
    backup,
    config,
    forget,
    mcp,
    produce,
    query,
    status,
    subjects,
    topics,
    trace,
    up,
)
from shared import logsafe
from shared.contract.topics import SERVICES
from shared.errors import ConfigError
from shared.settings import named, refuse_retired


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
    "trace": trace.run, "config": config.run, "subjects": subjects.run,
    "forget": forget.run, "mcp": mcp.run,
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
    subjects.add_parser(sub)
    forget.add_parser(sub)
    mcp.add_parser(sub)
    backup.add_parsers(sub)
    return parser


EXIT_CONFIG = 78  # EX_CONFIG, as a worker exits: a setting must change first


def _config_failed(command: str, error: ConfigError) -> int:
    print(f"streamrag {command}: ConfigError: {error}", file=sys.stderr, flush=True)
    return EXIT_CONFIG


def main(argv: list[str] | None = None) -> int:
    logsafe.install()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        datefmt="%H:%M:%S")
    args = build_parser().parse_args(argv)
    # Settings fail naming the variable, never as a bare `ValidationError: <withheld>`
    # (pydantic's text quotes the value, which logs withhold): a retired name before any
    # command starts anything, a bad value wherever a command reads it.
    try:
        refuse_retired()
    except ConfigError as exc:
        return _config_failed(args.command, exc)
    try:
        return HANDLERS[args.command](args)
    except ValidationError as exc:
        if (error := named(exc)) is None:
            raise
        return _config_failed(args.command, error)


if __name__ == "__main__":
    sys.exit(main())
