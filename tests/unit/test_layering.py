"""The layout's rule, read from the code: services meet only through topics and gRPC.

A service imports shared/ and itself, never another service; shared/ imports no service.
`services/onebox` is the one composition root (it hosts every service's agents in one
worker by design), so it alone may import the others."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPOSITION_ROOT = "onebox"


def imports(path: Path) -> list[str]:
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def test_no_service_imports_another() -> None:
    crossing = []
    for path in sorted((ROOT / "services").rglob("*.py")):
        parts = path.relative_to(ROOT / "services").parts
        if len(parts) < 2 or parts[0] == COMPOSITION_ROOT:
            continue
        for name in imports(path):
            bits = name.split(".")
            if bits[0] == "services" and len(bits) > 1 and bits[1] != parts[0]:
                crossing.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not crossing, crossing


def test_shared_imports_no_service() -> None:
    upward = [f"{p.relative_to(ROOT)} imports {n}" for p in sorted((ROOT / "shared").rglob("*.py"))
              for n in imports(p) if n.split(".")[0] == "services"]
    assert not upward, upward


def test_the_rule_is_checked_on_real_code() -> None:
    # Guard against a vacuous pass: the walk sees the services and their own imports.
    seen = {p.relative_to(ROOT / "services").parts[0]
            for p in (ROOT / "services").rglob("*.py") if len(p.relative_to(ROOT).parts) > 2}
    assert {"ingest", "redaction", "chunking", "embedding", "retrieval", "inference",
            "ledger"} <= seen
    assert "services.ingest.app" in imports(ROOT / "services" / "ingest" / "agents.py")
