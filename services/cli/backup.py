"""`streamrag backup DIR` and `streamrag restore DIR`: a copy of the embedded mesh (the Kafka
log with every topic and consumer group's offsets, the dev chain's state, the services'
data directory) and bringing it up again in another run directory or on another machine.

A copy of a running mesh is taken frozen: every process named in the run directory's pid
files is stopped with SIGSTOP (the workers, then anvil, then the broker), the files are
copied, and all are continued with SIGCONT. What the copy holds is then what the disk holds
after `kill -9` of every process at one instant, which the mesh is built to recover from
(docs/durability.md): Kafka checks the segments past its recovery point and cuts a torn
tail. A copy taken file by file while the mesh runs is no such state: partitions copied
one after another while records flow hold redacted documents without the inputs and audit
records they came from, which `audit verify` rejects and Kafka cannot repair.

The mesh is thawed whatever happens: in a `finally`, with SIGINT, SIGTERM and SIGHUP
turned into an exception while it is frozen, and by a guard process that continues every
stopped process when `streamrag backup` dies without doing so (kill -9) or when the pause
outlasts `--max-pause-s` (the backup then fails). Offsets are kept exactly, so every audit
leaf still names its record. Moving the data into another Kafka cluster is Kafka's own
business (MirrorMaker 2, which translates the groups' offsets): docs/durability.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from services.cli.freeze import Freezer, Guard, Proc, frozen, mesh_processes
from services.cli.settings import MeshSettings
from services.cli.sparse import copy_sparse
from shared.errors import InfrastructureError
from shared.keys.settings import KeySettings

CHAIN_STATE = "chain-state.json"
MANIFEST = "manifest.json"
KAFKA = "kafka"
KEYS = "keys"  # under data/: the data-key store, never copied
KEY_FILE = "versions.sqlite"
SNAPSHOTS = "retrieval-shards"  # under data/: retrieval's snapshots (clear chunk text)
MAX_PAUSE_S = 300.0
TORN_TRIES = 20  # anvil caught writing its state file: thawed for a moment this often


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("backup", help="copy the embedded mesh's Kafka log, offsets and chain "
                       "(a running mesh is frozen while it is copied)")
    p.add_argument("dir", type=Path, help="where the copy goes (created; must be empty)")
    p.add_argument("--max-pause-s", type=float, default=MAX_PAUSE_S, metavar="S",
                   help="thaw the mesh and fail if the copy takes longer than this")
    r = sub.add_parser("restore", help="place a backup for the next `streamrag up`")
    r.add_argument("dir", type=Path, help="a directory written by `streamrag backup`")
    r.add_argument("--keys", type=Path, default=None, metavar="PATH",
                   help="the data-key store (versions.sqlite) to link; default: the one "
                   "the backup was taken beside")
    r.add_argument("--without-keys", action="store_true",
                   help="restore where no key store is: sealed text stays unreadable, and "
                   "the shards' snapshots (clear text from before any forget) are dropped")


@dataclass
class Copied:
    files: int = 0
    bytes: int = 0  # of data: the holes of sparse files are not read, written or counted

    def copy(self, src: str, dst: str) -> None:
        """A file removed meanwhile (a deleted segment, a replaced snapshot; only in a mesh
        that runs unfrozen, i.e. one with no pid files) is skipped."""
        with contextlib.suppress(FileNotFoundError):
            self.bytes += copy_sparse(src, dst)
            shutil.copystat(src, dst)
            self.files += 1


def copy_files(run_dir: Path, dest: Path, copied: Copied, chain_state: Callable[[], None]
               ) -> int:
    """The Kafka log, the chain state (through `chain_state`) and data/; partitions copied."""
    source = run_dir / KAFKA
    partitions = 0
    for node in sorted(source.glob("node-*")):
        shutil.copytree(node, dest / KAFKA / node.name, copy_function=copied.copy)
        partitions += sum(1 for p in node.iterdir() if p.is_dir() and "-" in p.name
                          and not p.name.startswith("__"))
    if (source / "cluster-id").exists():
        copied.copy(str(source / "cluster-id"), str(dest / KAFKA / "cluster-id"))
    chain_state()
    if (run_dir / "data").exists():  # the ledger's contract record, retrieval's snapshots
        data = run_dir / "data"
        # Never the data keys (shared/keys): a backup must not bring back a key a forget
        # destroyed after it was taken. Restore links the store it was taken beside.
        shutil.copytree(data, dest / "data", ignore_dangling_symlinks=True,
                        copy_function=copied.copy,
                        ignore=lambda d, names: [KEYS] if Path(d) == data else [])
    return partitions


def key_store_of(run_dir: Path) -> Path:
    """Where the mesh of `run_dir` keeps its data keys (a set STREAMRAG_KEYS_PATH wins)."""
    set_path = KeySettings().path
    return (set_path or run_dir / "data" / KEYS / KEY_FILE).resolve()


def copy_chain_state(run_dir: Path, dest: Path, copied: Copied,
                     retry: Callable[[int], None]) -> None:
    """Copy anvil's state file, which it rewrites in place every second: a copy that is not
    whole JSON was caught mid-write, so `retry(n)` lets anvil finish and it is copied again."""
    src, dst = run_dir / CHAIN_STATE, dest / CHAIN_STATE
    for tries in range(1, TORN_TRIES + 1):
        if not src.exists():
            return
        copied.copy(str(src), str(dst))
        try:
            json.loads(dst.read_bytes())
            return
        except ValueError:
            retry(tries)
    msg = f"{src} was not whole JSON in {TORN_TRIES} tries: is anvil writing it?"
    raise InfrastructureError(msg)


@dataclass
class Backup:
    partitions: int
    processes: int  # frozen while copying; 0: the mesh was not running
    pause_s: float
    copy_s: float
    copied: Copied


def backup(run_dir: Path, dest: Path, max_pause_s: float = MAX_PAUSE_S) -> Backup:
    """Copy the Kafka log, chain state and data directory of `run_dir` to `dest`, the mesh
    frozen meanwhile if it runs."""
    source = run_dir / KAFKA
    if not any(source.glob("node-*")):
        msg = f"no Kafka log in {source}: was the embedded mesh started with this run directory?"
        raise FileNotFoundError(msg)
    if dest.exists() and any(dest.iterdir()):
        msg = f"{dest} is not empty"
        raise FileExistsError(msg)
    dest.mkdir(parents=True, exist_ok=True)
    copied, processes = Copied(), mesh_processes(run_dir)
    if not processes:  # a stopped mesh: nothing moves
        started = time.monotonic()
        partitions = copy_files(run_dir, dest, copied,
                                lambda: copy_chain_state(run_dir, dest, copied, _torn))
        result = Backup(partitions, 0, 0.0, time.monotonic() - started, copied)
    else:
        result = _frozen_backup(run_dir, dest, processes, copied, max_pause_s)
    counts = {"partitions": result.partitions, "frozen_processes": result.processes,
              "pause_s": round(result.pause_s, 3), "bytes": copied.bytes}
    (dest / MANIFEST).write_text(json.dumps({"at": time.time(), **counts,
                                             "key_store": str(key_store_of(run_dir))},
                                            indent=1))
    return result


def _torn(tries: int) -> None:
    msg = f"{CHAIN_STATE} is not whole JSON, and no anvil of this run directory is running"
    raise InfrastructureError(msg)


def _frozen_backup(run_dir: Path, dest: Path, processes: list[Proc], copied: Copied,
                   max_pause_s: float) -> Backup:
    guard = Guard(max_pause_s)
    freezer = Freezer(processes, watch=guard.watch)
    try:
        started = time.monotonic()
        with frozen(freezer):
            frozen_at = time.monotonic()
            partitions = copy_files(run_dir, dest, copied, lambda: copy_chain_state(
                run_dir, dest, copied, lambda n: freezer.blink("anvil", 0.02 * n)))
            copy_s = time.monotonic() - frozen_at
            if guard.tripped():
                msg = (f"the copy took longer than --max-pause-s={max_pause_s:g}: the mesh "
                       f"was thawed before it ended, so {dest} is no consistent copy")
                raise InfrastructureError(msg)
            started_meanwhile = set(mesh_processes(run_dir)) - set(processes)
            if started_meanwhile:  # `streamrag up` restarted one that had exited
                names = ", ".join(sorted(p.name for p in started_meanwhile))
                msg = (f"{names} started while the mesh was frozen, so {dest} is no "
                       "consistent copy: run the backup again")
                raise InfrastructureError(msg)
        pause_s = time.monotonic() - started
    finally:
        guard.release()
    return Backup(partitions, len(freezer.processes), pause_s, copy_s, copied)


def place(src: Path, run_dir: Path) -> None:
    """Put a backup where the next `streamrag up` in `run_dir` starts from."""
    if not (src / MANIFEST).exists():
        msg = f"{src} is not a backup written by `streamrag backup` (no {MANIFEST})"
        raise FileNotFoundError(msg)
    if (run_dir / KAFKA).exists():
        msg = f"{run_dir / KAFKA} already holds a Kafka log: restore into a new run directory"
        raise FileExistsError(msg)
    run_dir.mkdir(parents=True, exist_ok=True)
    copied = Copied()
    shutil.copytree(src / KAFKA, run_dir / KAFKA, copy_function=copied.copy)
    if (src / CHAIN_STATE).exists():
        shutil.copyfile(src / CHAIN_STATE, run_dir / CHAIN_STATE)
    if (src / "data").exists():
        shutil.copytree(src / "data", run_dir / "data", dirs_exist_ok=True,
                        copy_function=copied.copy)


def key_store_for(src: Path, keys: Path | None) -> Path:
    """The key store a restore of `src` links: `keys`, else the one its manifest names;
    FileNotFoundError with a sentence when it is not there (a restore without it would
    serve its snapshots' texts whatever was forgotten since)."""
    named = json.loads((src / MANIFEST).read_text()).get("key_store")
    store = keys or (Path(named) if named else None)
    if store is None or not store.is_file() or store.name != KEY_FILE:
        where = store or "(the backup names none)"
        msg = (f"the data-key store {where} is not here: the backup's sealed text opens only "
               f"with it, and what was forgotten since stays forgotten only through it; name "
               f"it with --keys PATH/{KEY_FILE}, or restore --without-keys (the shards' "
               "snapshots are then left behind)")
        raise FileNotFoundError(msg)
    return store


def link_keys(store: Path, run_dir: Path) -> None:
    """Point the restored mesh at `store`, never a copy: a key destroyed there since the
    backup stays destroyed, so a forget holds in the restored mesh too."""
    target = run_dir / "data" / KEYS
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        msg = f"{target} exists: restore into a new run directory"
        raise FileExistsError(msg)
    target.symlink_to(store.parent.resolve(), target_is_directory=True)


def run_backup(args: argparse.Namespace) -> int:
    done = backup(MeshSettings().run_dir, args.dir, args.max_pause_s)
    size = done.copied.bytes / 1e6
    rate = size / done.copy_s if done.copy_s > 0 else 0.0
    print(f"backed up the Kafka log ({done.partitions} partitions, the groups' offsets), the "
          f"chain state and the data directory to {args.dir}: {done.copied.files} files, "
          f"{size:.1f} MB in {done.copy_s:.2f}s ({rate:.0f} MB/s)")
    if done.processes:
        print(f"the mesh was frozen {done.pause_s:.2f}s ({done.processes} processes stopped "
              "with SIGSTOP, then continued)")
    else:
        print("no process of the mesh was running: copied as it lies")
    return 0


def run_restore(args: argparse.Namespace) -> int:
    run_dir = MeshSettings().run_dir
    store = None
    if not args.without_keys:
        try:
            store = key_store_for(args.dir, args.keys)
        except FileNotFoundError as exc:
            print(f"streamrag restore: {exc}", file=sys.stderr)
            return 2
    place(args.dir, run_dir)
    print(f"placed the backup in {run_dir}: `streamrag up` starts from it")
    if store is not None:
        link_keys(store, run_dir)
        print(f"data keys: {run_dir / 'data' / KEYS} links the key store {store} (not "
              "copied: what was forgotten since the backup stays forgotten)")
    else:
        shutil.rmtree(run_dir / "data" / SNAPSHOTS, ignore_errors=True)
        print("data keys: none (--without-keys): the sealed text of the backup opens "
              "nowhere here, and the shards' snapshots were left behind")
    return 0
