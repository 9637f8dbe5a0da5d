"""How far shared/ reaches into Faust's, aiokafka's and mode's private parts, per module:
the private methods it replaces (shared/kafka/patches.PATCHED), the private methods it
calls (CALLED), the private data attributes it reads or writes (DATA), and any private
name it reaches that none of them declares (there should be none: a test fails on one).

    scripts/private_attrs            # the table
    scripts/private_attrs --json F   # and the figures as JSON
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

from shared.kafka import patches

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("shared/kafka", "shared/batching")


def declared() -> dict[str, set[str]]:
    """{"replaced" | "called" | "data": attribute names} as patches.py declares them."""
    return {"replaced": {a for _, _, a in patches.PATCHED},
            "called": {a for _, _, a in patches.CALLED},
            "data": {a for _, _, a in patches.DATA}}


def _own_names(tree: ast.Module) -> set[str]:
    """Functions, methods, classes and attributes the module itself defines (its own
    private names are not the libraries')."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.AnnAssign, ast.Assign)):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            targets = [e for t in targets
                       for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
            # attributes set on its own instances (a dataclass's fields, `self._x = ...`)
            names |= {t.attr for t in targets if isinstance(t, ast.Attribute)
                      and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return names


def reached(path: Path) -> set[str]:
    """Private names (one leading underscore) that `path` reaches on other objects:
    attribute accesses, and names given as strings to replace/getattr/setattr; a name
    patches.py declares counts even where the module defines its replacement."""
    tree = ast.parse(path.read_text(), str(path))
    own = _own_names(tree) - set().union(*declared().values())
    out: set[str] = set()
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("replace", "original", "getattr", "setattr", "hasattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str)):
            name = node.args[1].value
        if (name and name.startswith("_") and not name.startswith("__")
                and not name.startswith(patches.OWN_MARK) and name not in own):
            out.add(name)
    return out


def _declared_in(module: str) -> dict[str, list[str]]:
    """What patches.py declares for one module ("delivery", "batching.partitions"):
    {kind: ["Class.attr", ...]}."""
    out: dict[str, list[str]] = {}
    for kind, table in (("replaced", patches.PATCHED), ("called", patches.CALLED),
                        ("data", patches.DATA)):
        out[kind] = sorted(f"{cls}.{attr}" for (_, cls, attr), where in table.items()
                           if module in [w.strip() for w in where.split(",")])
    return out


def report() -> list[dict[str, object]]:
    """One row per scanned module that replaces, calls or reads a library's private part,
    or reaches a private name that patches.py does not declare."""
    known = set().union(*declared().values())
    rows = []
    for top in SCANNED:
        for path in sorted((ROOT / top).glob("*.py")):
            module = path.stem if top == "shared/kafka" else f"{Path(top).name}.{path.stem}"
            listed = _declared_in(module)
            undeclared = sorted(reached(path) - known)
            total = sum(map(len, listed.values())) + len(undeclared)
            if total:
                rows.append({"module": path.relative_to(ROOT).as_posix(), **listed,
                             "undeclared": undeclared, "total": total})
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args(argv)
    rows = report()
    head = ("module", "replaced", "called", "data", "undeclared", "total")
    print(f"{head[0]:<34}" + "".join(f"{h:>11}" for h in head[1:]))
    for r in rows:
        counts = [len(r[k]) for k in head[1:5]]  # type: ignore[arg-type]
        print(f"{r['module']:<34}" + "".join(f"{c:>11}" for c in counts) + f"{r['total']:>11}")
    total = sorted({n for r in rows for k in head[1:5] for n in r[k]})  # type: ignore[attr-defined]
    print(f"{'all (distinct class.attribute)':<34}{'':>44}{len(total):>11}")
    print("names: " + ", ".join(total))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
