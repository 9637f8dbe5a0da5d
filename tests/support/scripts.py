"""A script of scripts/ (a Python file without a .py suffix) loaded as a module, to call
what it defines: the doc generators' tests compare the committed page with what they make."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(name: str) -> ModuleType:
    """scripts/<name>, executed as a module named `name` (its main() is not run)."""
    path = ROOT / "scripts" / name
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
