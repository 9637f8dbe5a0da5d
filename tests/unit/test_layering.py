"""The layout's rule, read from the code: services meet only through topics and gRPC.

A service imports shared/ and itself, never another service; shared/ imports no service.
`services/onebox` is the one composition root that imports them (it hosts every service's
agents in one worker by design), so it alone may import the others; `services/cli`, the
command line, composes processes and runs the services by name, importing none."""

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


# shared/'s rooms, lowest first: each may import only rooms before it in this list, so the
# graph has no cycle and nothing reaches up into the Kafka fixes. The command line, the
# composition root, is services/cli: it runs the services by name and imports none.
SHARED_LAYERS = ["errors", "logsafe", "text", "batching", "encoder", "keys", "contract",
                 "settings", "tracing", "worker", "rpc", "kafka", "mcptools"]


def room(path: Path) -> str:
    parts = path.relative_to(ROOT / "shared").parts
    return parts[0] if len(parts) > 1 else path.stem


def test_shared_rooms_import_only_rooms_below() -> None:
    rooms = {room(p) for p in (ROOT / "shared").rglob("*.py")} - {"__init__"}
    assert rooms == set(SHARED_LAYERS), f"place a new room in SHARED_LAYERS: {rooms}"
    upward = []
    for path in sorted((ROOT / "shared").rglob("*.py")):
        here = room(path)
        if here == "__init__":
            continue
        for name in imports(path):
            bits = name.split(".")
            if bits[0] != "shared" or len(bits) < 2 or bits[1] == here:
                continue
            if SHARED_LAYERS.index(bits[1]) >= SHARED_LAYERS.index(here):
                upward.append(f"{path.relative_to(ROOT)} ({here}) imports {name}")
    assert not upward, upward


def test_only_the_command_line_imports_the_command_line() -> None:
    users = [f"{p.relative_to(ROOT)} imports {n}"
             for top in ("services", "shared") for p in sorted((ROOT / top).rglob("*.py"))
             if "cli" not in p.relative_to(ROOT).parts
             for n in imports(p) if n.startswith("services.cli")]
    assert not users, users


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(path: Path, known: set[str]) -> set[str]:
    """Modules of `known` that `path` imports when it is imported (statements at module
    level, not under `if TYPE_CHECKING`, not inside functions)."""
    out: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {n for n in names if n in known}
    return out


def test_no_module_imports_one_that_imports_it_back() -> None:
    """The import graph of services/ and shared/ has no cycle: which module registers
    which agent never depends on import order (ledger's agents and queries once did)."""
    paths = [p for top in ("services", "shared") for p in (ROOT / top).rglob("*.py")
             if "_pb2" not in p.name]
    known = {_module_name(p) for p in paths}
    graph = {_module_name(p): _top_level_imports(p, known) - {_module_name(p)}
             for p in paths}
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []
