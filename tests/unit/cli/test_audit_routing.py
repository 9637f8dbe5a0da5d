"""`streamrag audit` runs the query auditor for query commands, the document one otherwise."""

from __future__ import annotations

import pytest

from services.cli.audit import AUDITOR, QUERY_AUDITOR, auditor_for


@pytest.mark.parametrize(("args", "auditor"), [
    (["prove", "doc-1"], AUDITOR),
    (["prove", "doc-1", "--version", "2", "--json"], AUDITOR),
    (["verify", "--json"], AUDITOR),
    (["prove", "--query", "q1"], QUERY_AUDITOR),
    (["prove", "--json", "--query=q1"], QUERY_AUDITOR),
    (["queries", "--subject", "alice@example.com"], QUERY_AUDITOR),
    (["verify", "--query", "q1"], AUDITOR),  # verify has no --query: the auditor says so
    (["verify", "--queries", "--json"], QUERY_AUDITOR),
    ([], AUDITOR),
])
def test_each_command_goes_to_its_auditor(args: list[str], auditor: str) -> None:
    assert auditor_for(args) == auditor
