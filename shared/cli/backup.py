"""`streamrag backup DIR` and `streamrag restore DIR`: a consistent copy of the embedded
mesh (every topic's records, every consumer group's offsets, the dev chain's state) and
bringing it up again on another machine, or on a real Kafka cluster.

A backup copies the journal (shared/cli/journal.py) while the mesh runs: the groups'
offsets first, then each partition's file up to its current size (files only grow, and a
frame cut at the end is dropped when read), so no offset in the copy passes a record it
lacks. The chain's state file and the services' data directory (the ledger's contract
record, retrieval's snapshots) are copied the same way. A restore either places the copy in
a run directory, whose next `streamrag up` replays it into its fresh embedded broker, or
(`--bootstrap`) replays it into an empty Kafka cluster at once and commits the groups'
offsets, for a move from the embedded default to docker-compose.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import time
from pathlib import Path

from shared.cli.journal import GROUPS_FILE, TOPICS_FILE, Journal, read_frames, restore
from shared.cli.settings import MeshSettings
from shared.settings import KafkaSettings

CHAIN_STATE = "chain-state.json"
MANIFEST = "manifest.json"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("backup", help="copy the embedded mesh's topics, offsets and chain")
    b.add_argument("dir", type=Path, help="where the copy goes (created; must be empty)")
    r = sub.add_parser("restore", help="bring a backup up again")
    r.add_argument("dir", type=Path, help="a directory written by `streamrag backup`")
    r.add_argument("--bootstrap", help="replay into this (empty) Kafka cluster now, instead "
                   "of placing the copy in the run directory for the next `streamrag up`")


def backup(run_dir: Path, dest: Path) -> dict[str, int]:
    """Copy the journal and chain state of `run_dir` to `dest`; the manifest's counts."""
    source = run_dir / "journal"
    if not (source / TOPICS_FILE).exists():
        msg = f"no journal in {source}: is the embedded mesh durable and started there?"
        raise FileNotFoundError(msg)
    if dest.exists() and any(dest.iterdir()):
        msg = f"{dest} is not empty"
        raise FileExistsError(msg)
    target = dest / "journal"
    (target / "topics").mkdir(parents=True)
    for name in (GROUPS_FILE, TOPICS_FILE):  # offsets first: the logs copied after hold more
        if (source / name).exists():
            shutil.copyfile(source / name, target / name)
    records = 0
    for log in sorted((source / "topics").glob("*/*.log")):
        size = log.stat().st_size
        out = target / "topics" / log.parent.name / log.name
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "rb") as src, open(out, "wb") as dst:
            dst.write(src.read(size))
        records += sum(1 for _ in read_frames(out))
    if (run_dir / CHAIN_STATE).exists():
        shutil.copyfile(run_dir / CHAIN_STATE, dest / CHAIN_STATE)
    if (run_dir / "data").exists():  # the ledger's contract record, retrieval's snapshots
        shutil.copytree(run_dir / "data", dest / "data", ignore_dangling_symlinks=True,
                        copy_function=_copy_if_there)
    counts = {"records": records, "partitions": len(list(target.glob("topics/*/*.log")))}
    (dest / MANIFEST).write_text(json.dumps({"at": time.time(), **counts}, indent=1))
    return counts


def _copy_if_there(src: str, dst: str) -> None:
    """A file a running worker replaced or removed meanwhile is skipped: what it held is
    rebuilt from the log (a retrieval snapshot that is not from the log is rebuilt)."""
    with contextlib.suppress(FileNotFoundError):
        shutil.copy2(src, dst)


def place(src: Path, run_dir: Path) -> None:
    """Put a backup where the next `streamrag up` in `run_dir` restores it from."""
    if (run_dir / "journal").exists() and Journal(run_dir / "journal").has_records():
        msg = f"{run_dir / 'journal'} already holds a journal: restore into a new run directory"
        raise FileExistsError(msg)
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src / "journal", run_dir / "journal", dirs_exist_ok=True)
    if (src / CHAIN_STATE).exists():
        shutil.copyfile(src / CHAIN_STATE, run_dir / CHAIN_STATE)
    if (src / "data").exists():
        shutil.copytree(src / "data", run_dir / "data", dirs_exist_ok=True)


def run_backup(args: argparse.Namespace) -> int:
    counts = backup(MeshSettings().run_dir, args.dir)
    print(f"backed up {counts['records']} records of {counts['partitions']} partitions, the "
          f"groups' offsets and the chain state to {args.dir}")
    return 0


def run_restore(args: argparse.Namespace) -> int:
    if args.bootstrap:
        done = asyncio.run(restore(KafkaSettings(bootstrap=args.bootstrap),
                                   Journal(args.dir / "journal")))
        print(f"replayed {done.records} records into {done.partitions} partitions of "
              f"{args.bootstrap} and committed {done.groups} groups' offsets")
        if (args.dir / CHAIN_STATE).exists():
            print(f"the dev chain's state is {args.dir / CHAIN_STATE}: start anvil with "
                  "--state on a copy of it (a real chain keeps its own)")
        return 0
    run_dir = MeshSettings().run_dir
    place(args.dir, run_dir)
    print(f"placed the backup in {run_dir}: `streamrag up` restores it into its broker")
    return 0
