"""`streamrag backup DIR` and `streamrag restore DIR`: a copy of the embedded mesh (the Kafka
log with every topic and consumer group's offsets, the dev chain's state, the services'
data directory) and bringing it up again in another run directory or on another machine.

The copy is Kafka's own log directory, file by file, taken while the mesh runs: a copy
Kafka recovers as it recovers its own log after a `kill -9` (segments past the last
recovery point are checked and a torn tail is cut). The cluster metadata goes first and the
consumer groups' offsets next, so the copy never holds an offset past a record it lacks,
nor a partition its metadata does not know. Offsets are kept exactly, so every audit leaf
still names its record. Moving the data into another Kafka cluster is Kafka's own business
(MirrorMaker 2, which translates the groups' offsets): docs/durability.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import time
from pathlib import Path

from services.cli.settings import MeshSettings

CHAIN_STATE = "chain-state.json"
MANIFEST = "manifest.json"
KAFKA = "kafka"
METADATA = "__cluster_metadata-0"
OFFSETS = "__consumer_offsets-"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("backup", help="copy the embedded mesh's Kafka log, offsets and chain"
                   ).add_argument("dir", type=Path, help="where the copy goes (created; "
                                                         "must be empty)")
    sub.add_parser("restore", help="place a backup for the next `streamrag up`"
                   ).add_argument("dir", type=Path, help="a directory written by "
                                                         "`streamrag backup`")


def _copy_order(log_dir: Path) -> list[Path]:
    """The node's partition directories: the metadata log, the groups' offsets, the rest."""
    dirs = sorted(p for p in log_dir.iterdir() if p.is_dir())
    def rank(p: Path) -> int:
        return 0 if p.name == METADATA else 1 if p.name.startswith(OFFSETS) else 2
    return sorted(dirs, key=rank)


def backup(run_dir: Path, dest: Path) -> dict[str, int]:
    """Copy the Kafka log, chain state and data directory of `run_dir` to `dest`."""
    source = run_dir / KAFKA
    nodes = sorted(source.glob("node-*")) if source.exists() else []
    if not nodes:
        msg = f"no Kafka log in {source}: was the embedded mesh started with this run directory?"
        raise FileNotFoundError(msg)
    if dest.exists() and any(dest.iterdir()):
        msg = f"{dest} is not empty"
        raise FileExistsError(msg)
    partitions = 0
    for node in nodes:
        target = dest / KAFKA / node.name
        target.mkdir(parents=True)
        for name in ("meta.properties", "bootstrap.checkpoint"):
            _copy_if_there(str(node / name), str(target / name))
        for part in _copy_order(node):
            shutil.copytree(part, target / part.name, copy_function=_copy_if_there,
                            dirs_exist_ok=True)
            partitions += 0 if part.name.startswith("__") else 1
    if (source / "cluster-id").exists():
        shutil.copyfile(source / "cluster-id", dest / KAFKA / "cluster-id")
    if (run_dir / CHAIN_STATE).exists():
        shutil.copyfile(run_dir / CHAIN_STATE, dest / CHAIN_STATE)
    if (run_dir / "data").exists():  # the ledger's contract record, retrieval's snapshots
        shutil.copytree(run_dir / "data", dest / "data", ignore_dangling_symlinks=True,
                        copy_function=_copy_if_there)
    counts = {"nodes": len(nodes), "partitions": partitions}
    (dest / MANIFEST).write_text(json.dumps({"at": time.time(), **counts}, indent=1))
    return counts


def _copy_if_there(src: str, dst: str) -> None:
    """A file Kafka or a worker removed meanwhile (a deleted segment, a replaced snapshot)
    is skipped: the copy is as if taken a moment later for that file."""
    with contextlib.suppress(FileNotFoundError):
        shutil.copy2(src, dst)


def place(src: Path, run_dir: Path) -> None:
    """Put a backup where the next `streamrag up` in `run_dir` starts from."""
    if not (src / MANIFEST).exists():
        msg = f"{src} is not a backup written by `streamrag backup` (no {MANIFEST})"
        raise FileNotFoundError(msg)
    if (run_dir / KAFKA).exists():
        msg = f"{run_dir / KAFKA} already holds a Kafka log: restore into a new run directory"
        raise FileExistsError(msg)
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src / KAFKA, run_dir / KAFKA)
    if (src / CHAIN_STATE).exists():
        shutil.copyfile(src / CHAIN_STATE, run_dir / CHAIN_STATE)
    if (src / "data").exists():
        shutil.copytree(src / "data", run_dir / "data", dirs_exist_ok=True)


def run_backup(args: argparse.Namespace) -> int:
    counts = backup(MeshSettings().run_dir, args.dir)
    print(f"backed up the Kafka log ({counts['partitions']} partitions, the groups' offsets), "
          f"the chain state and the data directory to {args.dir}")
    return 0


def run_restore(args: argparse.Namespace) -> int:
    run_dir = MeshSettings().run_dir
    place(args.dir, run_dir)
    print(f"placed the backup in {run_dir}: `streamrag up` starts from it")
    return 0
