"""Inference's layers, read from the code: the gRPC API imports the engine, never the reverse.

Every module of services/inference outside api/ must not import services.inference.api,
so the engine, search, rerank and answer steps run (and are tested) without gRPC. The
exceptions: runtime.py, the composition root that starts the gRPC server around the engine;
and api/principal.py, the verified caller as a plain value (no gRPC in it), which the query
audit below the API reads.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
INFERENCE = ROOT / "services" / "inference"
API = "services.inference.api"
COMPOSITION_ROOT = INFERENCE / "runtime.py"
PRINCIPAL = API + ".principal"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> list[str]:
    """Every module `path` imports, relative imports resolved, `from a import b` as a.b."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out += [module] + [f"{module}.{a.name}" for a in node.names]
    return out


def reaches_api(name: str) -> bool:
    if name == PRINCIPAL or name.startswith(PRINCIPAL + "."):
        return False
    return name == API or name.startswith(API + ".")


def below_api() -> list[Path]:
    """The modules bound by the rule: all of services/inference but api/ and runtime.py."""
    return [p for p in sorted(INFERENCE.rglob("*.py"))
            if p.relative_to(INFERENCE).parts[0] != "api" and p != COMPOSITION_ROOT]


def test_nothing_outside_the_api_imports_it() -> None:
    upward = [f"{p.relative_to(ROOT)} imports {name}"
              for p in below_api() for name in imported(p) if reaches_api(name)]
    assert not upward, upward


def test_the_rule_is_checked_on_real_code() -> None:
    # Guard against a vacuous pass: every spelling of an import of the API is seen.
    assert reaches_api("services.inference.api.server")
    assert not reaches_api("services.inference.apis")
    assert not reaches_api("services.inference.api.principal.current")
    # The exception holds only while the principal stays free of gRPC and the server.
    assert not [n for n in imported(INFERENCE / "api" / "principal.py")
                if n.startswith("grpc") or reaches_api(n)]
    assert "services.inference.api.server" in imported(COMPOSITION_ROOT)
    server = imported(INFERENCE / "api" / "server.py")
    assert "services.inference.engine" in server and "services.inference.api.convert" in server
    checked = below_api()
    assert INFERENCE / "engine.py" in checked and len(checked) > 30
    assert not any(p.parent.name == "api" for p in checked)
