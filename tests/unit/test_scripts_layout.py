"""scripts/ stands on its own: nothing there imports tests/, and every Python file in it is
linted (scripts/test), type-checked ([tool.mypy] files) and import-checked (check_imports)."""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
TESTS_MODULE = re.compile(r"^tests(\.|$)")
RUN_TESTS_MODULE = re.compile(r"^tests\.\w")  # a string naming one, for `python -m`


def python_files() -> list[Path]:
    """Every .py file under scripts/, and every file whose shebang says Python."""
    found = []
    for path in sorted(SCRIPTS.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        if path.suffix == ".py" or path.read_text(errors="replace").startswith(
                "#!/usr/bin/env python"):
            found.append(path)
    return found


def test_the_enumeration_sees_the_benchmarks_and_the_extensionless_scripts() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in python_files()}
    assert {"scripts/benchlib/stats.py", "scripts/benchlib/redaction.py",
            "scripts/check_imports", "scripts/lock"} <= names


def test_nothing_under_scripts_imports_tests() -> None:
    offending = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and RUN_TESTS_MODULE.match(node.value)):
                names = [node.value]  # a module a benchmark runs as `python -m <name>`
            else:
                continue
            offending += [f"{path.relative_to(ROOT)}:{node.lineno}: {name}"
                          for name in names if TESTS_MODULE.match(name)]
    shims = [p for p in sorted(SCRIPTS.iterdir()) if p.is_file() and p not in python_files()]
    offending += [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in shims
                  for m in re.finditer(r"-m\s+tests\.\S+", p.read_text(errors="replace"))]
    assert not offending, offending


def test_scripts_test_lints_every_python_file() -> None:
    line = next(ln for ln in (SCRIPTS / "test").read_text().splitlines()
                if ln.startswith("mapfile -t py_scripts"))
    listed = subprocess.run(["bash", "-c", f'{line}\nprintf "%s\\n" "${{py_scripts[@]}}"'],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    linted = {(ROOT / name).resolve() for name in listed.split()}
    missing = [str(p.relative_to(ROOT)) for p in python_files() if p not in linted]
    assert not missing, f"scripts/test does not lint {missing}"


def test_mypy_checks_every_python_file() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    checked = [ROOT / entry for entry in config["files"]]
    excluded = [re.compile(pattern) for pattern in config.get("exclude", [])]

    def covered(path: Path) -> bool:
        rel = path.relative_to(ROOT).as_posix()
        return (not any(pattern.search(rel) for pattern in excluded)
                and any(path == entry or entry in path.parents for entry in checked))

    missing = [str(p.relative_to(ROOT)) for p in python_files() if not covered(p)]
    assert not missing, f"[tool.mypy] files in pyproject.toml leaves out {missing}"


def test_check_imports_reads_every_python_file() -> None:
    path = str(SCRIPTS / "check_imports")
    loader = importlib.machinery.SourceFileLoader("check_imports", path)
    spec = importlib.util.spec_from_loader("check_imports", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    read = {p.resolve() for p in module.sources()}
    missing = [str(p.relative_to(ROOT)) for p in python_files() if p not in read]
    assert not missing, f"scripts/check_imports does not read {missing}"
