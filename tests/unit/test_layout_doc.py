"""docs/design/layout.md's module map is what scripts/gen_layout makes from the code today."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "design" / "layout.md"


def load_generator() -> ModuleType:
    return load_script("gen_layout")


def test_the_map_matches_the_modules() -> None:
    committed = PAGE.read_text(encoding="utf-8")
    assert committed == load_generator().page(committed), \
        "docs/design/layout.md's map is out of date: run scripts/gen_layout"


def test_every_module_is_on_the_map_by_its_own_words(tmp_path: Path) -> None:
    gen = load_generator()
    section = gen.section()
    modules = [p for top in ("services", "shared") for p in (ROOT / top).rglob("*.py")
               if "__pycache__" not in p.parts and p.name != "__init__.py"
               and not p.relative_to(ROOT).as_posix().startswith("shared/rpc")]
    assert f"{len(modules)} modules" in section
    for rooms in ("**`guard/`**", "**`cache/`**", "**`config/`**", "**`drift/`**"):
        assert rooms in section  # the rooms an older, hand-kept map left out
    # An entry is the module's own first sentence: a new module shows with its words.
    (tmp_path / "m.py").write_text('"""Counts the sheep. Then sleeps."""\n')
    assert gen.first_line(tmp_path / "m.py") == "Counts the sheep."
    (tmp_path / "n.py").write_text("x = 1\n")
    assert gen.first_line(tmp_path / "n.py") == ""
