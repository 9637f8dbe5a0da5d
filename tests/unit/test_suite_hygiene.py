"""The suite's own rules, checked: every test has a timeout, and test modules share helpers
through tests/support (or a helper module beside them), never by importing a test module."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
TEST_MODULE = re.compile(r"^tests(\.\w+)*\.(test_\w+|conftest)$")


def test_every_test_runs_under_a_timeout(request: pytest.FixtureRequest) -> None:
    assert request.config.pluginmanager.hasplugin("timeout"), "pytest-timeout is not active"
    assert float(request.config.getini("timeout")) > 0
    # A mark may lengthen a test's timeout, never remove it (0 or None disables it).
    disabled = [f"{p.relative_to(TESTS)}:{n}" for p in sorted(TESTS.rglob("*.py"))
                for n, line in enumerate(p.read_text().splitlines(), 1)
                if re.search(r"mark\.timeout\(\s*(0|None)\b", line)]
    assert not disabled, disabled


def test_no_test_module_imports_from_another() -> None:
    offending = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            offending += [f"{path.relative_to(TESTS)}:{node.lineno} {name}"  # type: ignore[union-attr]
                          for name in names if TEST_MODULE.match(name)]
    assert not offending, f"import these from tests/support instead: {offending}"


def test_code_and_docs_name_no_issue_numbers() -> None:
    """History belongs in the issues and commits: the code and docs say what is true now,
    not which issue once asked for it ("(issue 28)")."""
    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"[Ii]ssues? ?#?\d{1,3}\b")
    found = [f"{path.relative_to(root)}:{n}" for folder in ("services", "shared", "tests",
                                                              "scripts", "docs")
             for path in sorted((root / folder).rglob("*"))
             if path.suffix in (".py", ".md") and ".venv" not in path.parts
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if pattern.search(line) and path.name != "test_suite_hygiene.py"]
    assert found == []
