"""Nothing is built at import: importing every module of services/ and shared/ makes no
Faust app, reads no settings object and resolves no topic layout. An app and its agents
exist only once a service's `build(app, settings, kafka)` is called (by its `__main__`, the
one-process composition or a test). Run in a fresh interpreter: this process has built
services for the other tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = r"""
import gc, importlib, json, pkgutil, sys
from pathlib import Path

import faust
from pydantic_settings import BaseSettings

root = Path(sys.argv[1])
names = []
for top in ("shared", "services"):
    for path in sorted((root / top).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__main__":
            continue  # the one place a process is built and run
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
imported = []
for name in names:
    importlib.import_module(name)
    imported.append(name)
from shared.contract import topics
gc.collect()
apps = [o.conf.id for o in gc.get_objects() if isinstance(o, faust.App)]
settings = sorted({type(o).__module__ + "." + type(o).__name__ for o in gc.get_objects()
                   if isinstance(o, BaseSettings)})
print(json.dumps({"imported": len(imported), "apps": apps, "settings": settings,
                  "layout_read": topics.layout.cache_info().currsize}))
"""


def test_importing_every_module_builds_no_app_and_reads_no_settings(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, str(ROOT)], cwd=tmp_path,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                              "STREAMRAG_DATA_DIR": str(tmp_path / "data")},
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["imported"] > 250  # every module, not a few
    assert found["apps"] == []
    assert found["settings"] == []
    assert found["layout_read"] == 0
    assert list(tmp_path.glob("data/*")) == []  # and nothing written


def test_a_build_is_what_makes_the_app_and_its_agents(tmp_path: Path) -> None:
    probe = ("import json\n"
             "from services.chunking import agents\n"
             "from services.chunking.app import make\n"
             "from services.chunking.settings import ChunkingSettings\n"
             "from shared.settings import KafkaSettings\n"
             "s, k = ChunkingSettings(), KafkaSettings()\n"
             "t = agents.build(make(s, k), s, k)\n"
             "print(json.dumps({'id': t.app.conf.id, 'agents': sorted(t.app.agents)}))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                              "STREAMRAG_DATA_DIR": str(tmp_path / "data")},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "id": "streamrag-chunking", "agents": ["services.chunking.agents.chunk"]}
