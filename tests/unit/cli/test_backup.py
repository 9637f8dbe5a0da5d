"""`streamrag backup` freezes a running mesh while it copies it: the processes named in the
pid files are stopped in order (workers, anvil, the broker) and always continued, whatever
ends the copy; anvil caught writing its state file is let to finish and copied again; a
guard process thaws the mesh when the backup itself dies."""

from __future__ import annotations

import json
import mmap
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli import backup as bk
from services.cli import freeze as fz
from services.cli.freeze import Freezer, Proc
from services.cli.sparse import copy_sparse
from shared.errors import InfrastructureError
from tests.support.polling import eventually


class Signals:
    """A fake os.killpg: records (pid, signal) and knows which groups are gone."""

    def __init__(self, gone: tuple[int, ...] = ()) -> None:
        self.sent: list[tuple[int, str]] = []
        self.gone = gone

    def __call__(self, pid: int, sig: int) -> None:
        if pid in self.gone:
            raise ProcessLookupError(pid)
        self.sent.append((pid, signal.Signals(sig).name))


MESH = [Proc("onebox", 30), Proc("anvil", 20), Proc("broker", 10)]


def test_processes_are_listed_workers_first_and_dead_pids_are_passed_over(
        tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    for name, text in [("broker", "10"), ("anvil", "20"), ("ledger", "30"), ("chunking", "31"),
                       ("retrieval", "99"), ("empty", ""), ("junk", "x1")]:
        (pids / f"{name}.pid").write_text(text)
    found = fz.mesh_processes(tmp_path, ours=lambda pid: pid != 99)  # 99: gone or not ours
    assert found == [Proc("chunking", 31), Proc("ledger", 30), Proc("anvil", 20),
                     Proc("broker", 10)]
    assert fz.mesh_processes(tmp_path / "never-started") == []


def test_the_mesh_is_thawed_broker_first_when_the_copy_fails() -> None:
    signals = Signals()
    freezer = Freezer(MESH, signal_group=signals, stopped=lambda pid: True)
    with pytest.raises(OSError, match="disk full"), fz.frozen(freezer):
        assert signals.sent == [(30, "SIGSTOP"), (20, "SIGSTOP"), (10, "SIGSTOP")]
        raise OSError("disk full")
    assert signals.sent[3:] == [(10, "SIGCONT"), (20, "SIGCONT"), (30, "SIGCONT")]


def test_ctrl_c_and_sigterm_while_frozen_thaw_the_mesh() -> None:
    # Ctrl-C as in a terminal: a test run started in the background (scripts/test's) has
    # SIGINT ignored, as every background job of a non-interactive shell has.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signals = Signals()
            freezer = Freezer(MESH, signal_group=signals, stopped=lambda pid: True)
            with pytest.raises(KeyboardInterrupt), fz.frozen(freezer):
                os.kill(os.getpid(), sig)
                time.sleep(5)  # the signal ends this at once
            assert [s for _, s in signals.sent].count("SIGCONT") == 3, sig
    finally:
        signal.signal(signal.SIGINT, before)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # put back


def test_a_process_gone_before_its_stop_is_not_continued() -> None:
    signals = Signals(gone=(20,))
    freezer = Freezer(MESH, signal_group=signals, stopped=lambda pid: True)
    with fz.frozen(freezer):
        pass
    assert signals.sent == [(30, "SIGSTOP"), (10, "SIGSTOP"), (10, "SIGCONT"), (30, "SIGCONT")]


def test_a_process_that_does_not_stop_fails_the_freeze_and_all_are_thawed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fz, "STOP_TIMEOUT_S", 0.05)
    signals = Signals()
    freezer = Freezer(MESH, signal_group=signals, stopped=lambda pid: pid != 10)
    with pytest.raises(InfrastructureError, match="broker"), fz.frozen(freezer):
        pytest.fail("the copy must not start")
    assert [s for _, s in signals.sent].count("SIGCONT") == 3


def test_a_torn_chain_state_is_copied_again_after_anvil_ran_a_moment(tmp_path: Path) -> None:
    run_dir, dest = tmp_path / "run", tmp_path / "dest"
    run_dir.mkdir()
    dest.mkdir()
    whole = json.dumps({"block": {"number": "0x2a"}, "accounts": {}})
    (run_dir / bk.CHAIN_STATE).write_text(whole[:17])  # stopped in the middle of its write
    signals = Signals()
    freezer = Freezer(MESH, signal_group=signals, stopped=lambda pid: True)
    freezer.freeze()
    retries: list[int] = []

    def blink(tries: int) -> None:
        retries.append(tries)
        freezer.blink("anvil", 0)
        if tries == 2:  # anvil finished its write
            (run_dir / bk.CHAIN_STATE).write_text(whole)
    bk.copy_chain_state(run_dir, dest, bk.Copied(), blink)
    assert retries == [1, 2]
    assert json.loads((dest / bk.CHAIN_STATE).read_text()) == json.loads(whole)
    assert signals.sent[3:] == [(20, "SIGCONT"), (20, "SIGSTOP")] * 2  # only anvil ran


def test_a_chain_state_that_never_parses_fails_the_backup(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / bk.CHAIN_STATE).write_text("{")
    retries: list[int] = []
    with pytest.raises(InfrastructureError, match="not whole JSON"):
        bk.copy_chain_state(tmp_path / "run", tmp_path, bk.Copied(), retries.append)
    assert retries == list(range(1, bk.TORN_TRIES + 1))


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process in a group of its own whose command line says `anvil` (ours)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "anvil"],
                             start_new_session=True)
    try:
        yield child
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_the_guard_thaws_the_mesh_when_the_backup_dies(sleeper: subprocess.Popen[bytes]
                                                        ) -> None:
    guard = fz.Guard(max_pause_s=600)
    guard.watch(sleeper.pid)
    os.killpg(sleeper.pid, signal.SIGSTOP)
    eventually(lambda: fz.group_stopped(sleeper.pid), "the group to stop", 10, 0.01)
    assert guard.popen.stdin is not None
    guard.popen.stdin.close()  # as when `streamrag backup` is killed with -9
    assert guard.popen.wait(10) == 1
    eventually(lambda: state(sleeper.pid) != "T", "the guard to continue it", 10, 0.01)
    assert not fz.group_stopped(sleeper.pid)


def test_the_guard_thaws_the_mesh_when_the_pause_runs_over(sleeper: subprocess.Popen[bytes]
                                                           ) -> None:
    guard = fz.Guard(max_pause_s=0.5)
    guard.watch(sleeper.pid)
    os.killpg(sleeper.pid, signal.SIGSTOP)
    eventually(guard.tripped, "the guard to give up on the pause", 10, 0.01)
    eventually(lambda: state(sleeper.pid) != "T", "the guard to continue it", 10, 0.01)
    guard.release()


def test_a_running_mesh_is_copied_frozen_and_left_running(
        tmp_path: Path, sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "kafka" / "node-1" / "docs.raw.v1-0").mkdir(parents=True)
    (run_dir / "kafka" / "node-1" / "docs.raw.v1-0" / "00000000000000000000.log").write_bytes(
        b"x" * 1000)
    (run_dir / "pids").mkdir()
    (run_dir / "pids" / "anvil.pid").write_text(str(sleeper.pid))
    (run_dir / bk.CHAIN_STATE).write_text("{}")
    seen: list[str] = []
    copy = bk.Copied.copy

    def copy_seeing_the_state(self: bk.Copied, src: str, dst: str) -> None:
        seen.append(state(sleeper.pid))
        copy(self, src, dst)
    monkeypatch.setattr(bk.Copied, "copy", copy_seeing_the_state)
    done = bk.backup(run_dir, tmp_path / "copy")
    assert set(seen) == {"T"} and done.processes == 1 and done.partitions == 1
    assert done.copied.bytes == 1002 and done.pause_s > 0
    assert state(sleeper.pid) != "T"
    manifest = json.loads((tmp_path / "copy" / bk.MANIFEST).read_text())
    assert manifest["frozen_processes"] == 1 and manifest["bytes"] == 1002
    assert (tmp_path / "copy" / "kafka" / "node-1" / "docs.raw.v1-0").is_dir()


def test_a_stopped_mesh_is_copied_as_it_lies(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "kafka" / "node-1" / "docs.raw.v1-0").mkdir(parents=True)
    (run_dir / "pids").mkdir()
    (run_dir / "pids" / "broker.pid").write_text("999999999")  # gone
    done = bk.backup(run_dir, tmp_path / "copy")
    assert done.processes == 0 and done.pause_s == 0 and done.partitions == 1


def test_a_sparse_file_is_copied_whole_with_its_holes_left_holes(tmp_path: Path) -> None:
    """As Kafka's active index files: 10 MB preallocated, a few entries written through an
    mmap (still in the page cache, as in a frozen broker)."""
    src, dst = tmp_path / "00000000000000000000.index", tmp_path / "copy.index"
    size = 10 * 1024 * 1024
    with open(src, "wb") as f:
        f.truncate(size)
    with open(src, "r+b") as out, mmap.mmap(out.fileno(), size) as index:
        index[:8] = b"entry-01"
        index[6_000_000:6_000_008] = b"entry-02"
        copied = copy_sparse(str(src), str(dst))
    assert dst.read_bytes() == src.read_bytes() and dst.stat().st_size == size
    assert 16 <= copied < size // 100  # the data's blocks, not the holes
    assert dst.stat().st_blocks * 512 < size // 100
    (tmp_path / "plain").write_bytes(b"abc")
    assert copy_sparse(str(tmp_path / "plain"), str(tmp_path / "plain2")) == 3
    assert (tmp_path / "plain2").read_bytes() == b"abc"


def test_the_data_keys_are_never_copied_and_restore_links_the_store_they_came_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMRAG_KEYS_PATH", raising=False)
    run_dir = tmp_path / "run"
    (run_dir / "kafka" / "node-1" / "docs.redacted.v1-0").mkdir(parents=True)
    (run_dir / "data" / "keys").mkdir(parents=True)
    (run_dir / "data" / "keys" / "versions.sqlite").write_bytes(b"wrapped key bytes")
    (run_dir / "data" / "retrieval-shards").mkdir()
    (run_dir / "data" / "retrieval-shards" / "shard-0.npz").write_bytes(b"snapshot")
    bk.backup(run_dir, tmp_path / "copy")
    copy = tmp_path / "copy"
    assert (copy / "data" / "retrieval-shards" / "shard-0.npz").exists()
    assert not (copy / "data" / "keys").exists()
    assert all(b"wrapped key" not in p.read_bytes() for p in copy.rglob("*") if p.is_file())
    manifest = json.loads((copy / bk.MANIFEST).read_text())
    assert manifest["key_store"] == str((run_dir / "data" / "keys" /
                                         "versions.sqlite").resolve())
    moved = tmp_path / "moved"
    bk.place(copy, moved)
    store = bk.key_store_for(copy, None)
    assert store == (run_dir / "data" / "keys" / "versions.sqlite").resolve()
    bk.link_keys(store, moved)
    linked = moved / "data" / "keys"
    assert linked.is_symlink() and linked.resolve() == (run_dir / "data" / "keys").resolve()
    # Not a copy: a key destroyed in the origin's store since is destroyed here too.
    (run_dir / "data" / "keys" / "versions.sqlite").write_bytes(b"after a forget")
    assert (linked / "versions.sqlite").read_bytes() == b"after a forget"
    for missing in (tmp_path / "no-such-store", run_dir / "data" / "keys"):  # not the file
        with pytest.raises(FileNotFoundError, match="--keys PATH/versions.sqlite"):
            bk.key_store_for(copy, missing)


def test_a_restore_refuses_without_the_key_store_unless_told_and_then_drops_snapshots(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("STREAMRAG_KEYS_PATH", raising=False)
    run_dir = tmp_path / "run"
    (run_dir / "kafka" / "node-1" / "docs.redacted.v1-0").mkdir(parents=True)
    (run_dir / "data" / "retrieval-shards").mkdir(parents=True)
    (run_dir / "data" / "retrieval-shards" / "shard-0.npz").write_bytes(b"clear text")
    bk.backup(run_dir, tmp_path / "copy")  # no key store beside it
    monkeypatch.setenv("STREAMRAG_MESH_RUN_DIR", str(tmp_path / "moved"))
    args = bk.argparse.Namespace(dir=tmp_path / "copy", keys=None, without_keys=False)
    assert bk.run_restore(args) == 2
    assert "is not here" in capsys.readouterr().err and not (tmp_path / "moved").exists()
    args.without_keys = True
    assert bk.run_restore(args) == 0
    assert (tmp_path / "moved" / "kafka").is_dir()
    assert not (tmp_path / "moved" / "data" / "retrieval-shards").exists()
