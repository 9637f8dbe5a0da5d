"""`streamrag audit prove DOC_ID | prove --query ID | queries | verify`: run an auditor.

Like `streamrag worker`, this runs a service module by name rather than importing it
(shared/ never imports services/): both auditors live in services/audit, the trails' read
side, which reads only topics and the chain.
"""

from __future__ import annotations

import argparse
import logging
import runpy
import sys

AUDITOR = "services.audit.documents.auditor"
QUERY_AUDITOR = "services.audit.queries.auditor"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="inclusion proof of a document or a query, or verify "
                       "every batch",
                       description="prove DOC_ID [--version N] [--json] | "
                       "prove --query QUERY_ID [--json] | queries [--subject S | --principal H] "
                       "[--question Q] [--json] | verify [--queries] [--json]")
    p.add_argument("audit_args", nargs=argparse.REMAINDER,
                   help="prove DOC_ID [--version N] [--json] | "
                   "prove --query QUERY_ID [--json] | "
                   "queries [--subject S | --principal H] [--question Q] [--json] | "
                   "verify [--queries] [--json]")


def auditor_for(audit_args: list[str]) -> str:
    """The query auditor for `prove --query ...`, `verify --queries` and `queries`; the
    document one otherwise."""
    command = audit_args[:1]
    queried = any(a == "--query" or a.startswith("--query=") for a in audit_args)
    if (command == ["queries"] or (command == ["prove"] and queried)
            or (command == ["verify"] and "--queries" in audit_args)):
        return QUERY_AUDITOR
    return AUDITOR


def run(args: argparse.Namespace) -> int:
    # The auditors print their own report; the Kafka and web3 clients' INFO lines (a
    # connection made, a group coordinator found) are not part of it. Warnings still show.
    logging.getLogger().setLevel(logging.WARNING)
    # aiokafka logs an unreachable broker as an ERROR per try; the auditor says it once.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    sys.argv = ["streamrag audit", *args.audit_args]
    try:
        runpy.run_module(auditor_for(args.audit_args), run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
