"""`streamrag audit prove DOC_ID | verify`: run the redaction service's auditor.

Like `streamrag worker`, this runs a service module by name rather than importing it
(shared/ never imports services/): the Merkle proofs live with the redaction service.
"""

from __future__ import annotations

import argparse
import runpy
import sys

AUDITOR = "services.redaction.auditor"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="inclusion proof of a document, or verify every batch",
                       description="prove DOC_ID [--version N] [--json] | verify [--json]")
    p.add_argument("audit_args", nargs=argparse.REMAINDER,
                   help="prove DOC_ID [--version N] [--json] [--idle-s S] | verify [--json]")


def run(args: argparse.Namespace) -> int:
    sys.argv = ["streamrag audit", *args.audit_args]
    try:
        runpy.run_module(AUDITOR, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
