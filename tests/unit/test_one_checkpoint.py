"""Every stage commits through the one checkpoint (shared/kafka/checkpoint.py), read from the
code: no module but the checkpoint acks a record, takes Faust's auto-acking or
`take_events` micro-batches, turns acks off, reads a stream's events itself, or commits;
and every agent of every service reads its stream through the checkpoint."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "shared/kafka/checkpoint.py"
# Calls that ack, commit or read a Faust stream's records past the checkpoint.
FORBIDDEN_CALLS = {"ack", "take_events", "take", "noack", "events", "commit",
                   "commit_and_end_transactions", "force_commit", "_commit", "_commit_offsets"}
# A Faust topic's `acks` (only shared/kafka/app.py's `topic` sets it, from `committed`).
TOPIC_FACTORY = ROOT / "shared/kafka/app.py"
# Objects whose `.commit` / `.events` are not a consumer's or a stream's.
NOT_A_STREAM = {"call", "conn", "connection", "tx", "session", "db", "cursor", "tree"}
# Commits that are not a stage's: an operator's tool commits a stopped group's offsets
# from outside it (the partition growth, `streamrag topics grow`).
ALLOWED = {("shared/kafka/admin.py", "committer")}


def _is_the_checkpoint(owner: ast.AST) -> bool:
    """`checkpoint.of(consumer)`: Faust's commit handing over to the checkpoint."""
    return (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Attribute)
            and owner.func.attr == "of" and isinstance(owner.func.value, ast.Name)
            and owner.func.value.id == "checkpoint")


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def offences(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            if (node.func.attr in FORBIDDEN_CALLS and name not in NOT_A_STREAM
                    and (_name(path), name) not in ALLOWED and not _is_the_checkpoint(owner)):
                found.append(f"{_name(path)}:{node.lineno} .{node.func.attr}(")
            for kw in node.keywords:
                if kw.arg == "acks" and path != TOPIC_FACTORY:
                    found.append(f"{_name(path)}:{node.lineno} acks=")
        if (isinstance(node, ast.Attribute) and node.attr in ("enable_acks", "_acked")
                and path.parent != CHECKPOINT.parent):
            found.append(f"{_name(path)}:{node.lineno} .{node.attr}")
    return found


def scanned() -> list[Path]:
    return [p for top in ("services", "shared") for p in sorted((ROOT / top).rglob("*.py"))
            if p != CHECKPOINT]


def test_nothing_but_the_checkpoint_acks_commits_or_reads_a_stream() -> None:
    found = [o for p in scanned() for o in offences(p)]
    assert found == []


def agent_functions(path: Path) -> list[ast.AsyncFunctionDef]:
    """The functions a module's build registers as Faust agents: `app.agent(topic)(fn)`,
    a stage object's method `app.agent(topic)(self.fn)`, or through a local helper
    `agent(topic, fn)`."""
    tree = ast.parse(path.read_text(), str(path))
    registered = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Call) and isinstance(func.func, ast.Attribute)
                and func.func.attr == "agent" and node.args):
            fn = node.args[0]
            if isinstance(fn, ast.Name):
                registered.add(fn.id)
            elif (isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name)
                  and fn.value.id == "self"):
                registered.add(fn.attr)
        elif isinstance(func, ast.Name) and func.id == "agent" and len(node.args) == 2:
            fn = node.args[1]
            if isinstance(fn, ast.Name):
                registered.add(fn.id)
            elif (isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name)
                  and fn.value.id == "self"):
                registered.add(fn.attr)
    return [node for node in ast.walk(tree)
            if isinstance(node, ast.AsyncFunctionDef) and node.name in registered]


def reads_through_checkpoint(path: Path, fn: ast.AsyncFunctionDef) -> bool:
    """The agent hands its stream to a checkpoint reader, directly or through a helper of
    its module that does."""
    helpers = {n.name: n for n in ast.walk(ast.parse(path.read_text()))
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    seen: set[str] = set()

    def uses(node: ast.AST) -> bool:
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                    and func.value.id == "checkpoint"
                    and func.attr in ("records", "batches", "taken")):
                return True
            # A helper of the module, or a method of the stage object (self.intake(...)).
            name = (func.id if isinstance(func, ast.Name) else func.attr
                    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                    and func.value.id == "self" else None)
            if name in helpers and name not in seen:
                seen.add(name)
                if uses(helpers[name]):
                    return True
        return False
    return uses(fn)


def test_every_agent_reads_its_stream_through_the_checkpoint() -> None:
    agents = [(p, fn) for p in sorted((ROOT / "services").rglob("*.py"))
              for fn in agent_functions(p)]
    assert len(agents) >= 15  # every stage's agents were found (a vacuous pass fails)
    stray = [f"{p.relative_to(ROOT)}:{fn.name}" for p, fn in agents
             if not reads_through_checkpoint(p, fn)]
    assert stray == []


@pytest.mark.parametrize("code", [
    "async def f(stream):\n    async for e in stream.events():\n        pass\n",
    "async def f(stream):\n    async for b in stream.take_events(5, within=1):\n        pass\n",
    "async def f(stream, event):\n    await stream.ack(event)\n",
    "def f(event):\n    event.ack()\n",
    "async def f(app):\n    await app.consumer.commit()\n",
    "def f(app, spec):\n    return app.topic(spec.name, acks=False)\n",
    "def f(stream):\n    return stream.noack()\n",
])
def test_the_check_catches_each_way_around_the_checkpoint(tmp_path: Path, code: str) -> None:
    module = tmp_path / "agents.py"
    module.write_text(code)
    assert offences(module)
