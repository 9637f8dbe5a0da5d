"""The data-key store: one key per document version, where a deletion is real.

SQLite in WAL mode with secure_delete, shared by the processes of one machine (a volume
in docker-compose): a destroyed key's row is overwritten with zeros and the write-ahead
log truncated before `destroy` returns. Keys are stored wrapped (AES key wrap, RFC 3394)
under the key-encryption key (shared/keys/settings.py); a destroyed key leaves a marker
(its id, version, when and why), never the key, so a replayed record of a forgotten
version is refused instead of getting a new key.

Creation is idempotent: the version's key id is fixed (sealing.key_id_for), the first
writer's key wins and every other reads it, so two workers redacting the same version
(a rebalance, a replay) seal alike.

Before dedup gives a change its version, ingest seals it under the document's *transit*
key (`transit`): one per document and generation, rotated when a forget of the document
is parsed (`close_transit`) and after `TRANSIT_ROTATE_S`, destroyed with the document's
version keys by a forget (every one made before the forget was parsed) and by age. Its
marker sits beside the versions' with the version `-generation`.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec, TypeVar

from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

from shared.errors import InfrastructureError
from shared.keys.sealing import VersionKey, key_id_for, transit_key_id
from shared.keys.settings import KeySettings

P = ParamSpec("P")
R = TypeVar("R")

SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (
    key_id TEXT PRIMARY KEY, doc_id TEXT NOT NULL, version INTEGER NOT NULL,
    wrapped BLOB NOT NULL, created_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS keys_by_doc ON keys (doc_id, version);
CREATE TABLE IF NOT EXISTS destroyed (
    key_id TEXT PRIMARY KEY, doc_id TEXT NOT NULL, version INTEGER NOT NULL,
    destroyed_at REAL NOT NULL, reason TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS destroyed_by_doc ON destroyed (doc_id, version);
CREATE TABLE IF NOT EXISTS transit (
    key_id TEXT PRIMARY KEY, doc_id TEXT NOT NULL, gen INTEGER NOT NULL,
    wrapped BLOB NOT NULL, created_at REAL NOT NULL, closed INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS transit_by_doc ON transit (doc_id, gen);
"""


@dataclass(frozen=True)
class Destroyed:
    """A version whose key is gone: its sealed text opens nowhere any more."""

    key_id: str
    doc_id: str
    version: int
    destroyed_at: float
    reason: str


Version = tuple[str, int]  # doc id, version
CHECKPOINT_TRIES = 50  # a reader holding the log: try its truncation again this often
TRANSIT_ROTATE_S = 3600.0  # a document's transit key seals what is parsed for this long


class KeyStoreError(InfrastructureError):
    """The key store cannot be read or written (locked, not mounted, a wrong KEK): no record's
    fault, so a stage stops and replays instead of dead-lettering what it holds."""


def _guarded(fn: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (sqlite3.Error, OSError, InvalidUnwrap) as exc:
            raise KeyStoreError(f"data-key store: {type(exc).__name__}: {exc}") from exc
    return call


class VersionKeys:
    """The key store of one process (thread-safe: one connection behind a lock)."""

    @_guarded
    def __init__(self, path: Path, kek: bytes) -> None:
        self.path, self._kek = path, kek
        self._content_key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                                 info=b"streamrag/content-hash").derive(kek)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=60, check_same_thread=False,
                                   isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA secure_delete=ON")
        # NORMAL in WAL: a commit survives the process (kill -9), a power cut may lose the
        # last ones; sealed records of such keys would not open (docs/design/forgetting.md).
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        os.chmod(path, 0o600)

    @classmethod
    def from_settings(cls, settings: KeySettings | None = None) -> VersionKeys:
        s = settings or KeySettings()
        try:
            kek = s.kek_bytes()
        except (ValueError, OSError) as exc:  # a setting to fix: the stage must not go on
            raise KeyStoreError(str(exc)) from exc
        return cls(s.store_path(), kek)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _unwrap(self, key_id: str, doc_id: str, version: int, wrapped: bytes) -> VersionKey:
        return VersionKey(key_id, doc_id, version, aes_key_unwrap(self._kek, wrapped))

    @_guarded
    def create(self, versions: Sequence[Version]) -> dict[Version, VersionKey | Destroyed]:
        """Each version's key, made if it has none (one transaction for all); a version
        whose key was destroyed gets its marker, never a new key."""
        out: dict[Version, VersionKey | Destroyed] = {}
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for doc_id, version in dict.fromkeys(versions):
                    key_id = key_id_for(doc_id, version)
                    gone = self._destroyed(key_id)
                    if gone is not None:
                        out[(doc_id, version)] = gone
                        continue
                    self._db.execute(
                        "INSERT OR IGNORE INTO keys VALUES (?, ?, ?, ?, ?)",
                        (key_id, doc_id, version, aes_key_wrap(self._kek, os.urandom(32)),
                         time.time()))
                    row = self._db.execute("SELECT wrapped FROM keys WHERE key_id = ?",
                                           (key_id,)).fetchone()
                    out[(doc_id, version)] = self._unwrap(key_id, doc_id, version, row[0])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return out

    @_guarded
    def get(self, doc_id: str, version: int) -> VersionKey | Destroyed | None:
        """The version's key, its destruction marker, or None (never made here: another
        key store, or one restored from before it was made)."""
        key_id = key_id_for(doc_id, version)
        with self._lock:
            row = self._db.execute("SELECT wrapped FROM keys WHERE key_id = ?",
                                   (key_id,)).fetchone()
            if row is not None:
                return self._unwrap(key_id, doc_id, version, row[0])
            return self._destroyed(key_id)

    def _destroyed(self, key_id: str) -> Destroyed | None:
        row = self._db.execute(
            "SELECT key_id, doc_id, version, destroyed_at, reason FROM destroyed "
            "WHERE key_id = ?", (key_id,)).fetchone()
        return Destroyed(*row) if row is not None else None

    @_guarded
    def versions(self, doc_id: str) -> list[int]:
        """The versions of `doc_id` that have a live key, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT version FROM keys WHERE doc_id = ? "
                                    "ORDER BY version", (doc_id,)).fetchall()
        return [r[0] for r in rows]

    @_guarded
    def held_below(self, doc_id: str, below: int | None, made_before: float = 0.0,
                   ) -> list[tuple[str, int]]:
        """(key id, version) of every key `destroy` with these arguments takes or took: the
        live ones it would destroy and the markers of those already gone, by version."""
        limit = below if below is not None else 2**62
        with self._lock:
            rows = self._db.execute(
                "SELECT key_id, version FROM keys WHERE doc_id = ? AND (version < ? OR "
                "created_at < ?) UNION SELECT key_id, -gen FROM transit WHERE doc_id = ? AND "
                "created_at < ? UNION SELECT key_id, version FROM destroyed WHERE "
                "doc_id = ? AND version < ? ORDER BY 2",
                (doc_id, limit, made_before, doc_id, made_before, doc_id, limit)).fetchall()
        return [(k, v) for k, v in rows]

    @_guarded
    def destroy(self, doc_id: str, below: int | None, reason: str,
                now: float | None = None, made_before: float = 0.0) -> list[Destroyed]:
        """Destroy the keys of `doc_id`'s versions under `below` (all with None), and any
        made before `made_before` (a forget of a document ingest no longer knew), and its
        transit keys made before `made_before` (what was parsed before the forget): rows
        overwritten, the log truncated, markers left. Idempotent: a second call returns the
        markers the first left."""
        at = time.time() if now is None else now
        limit = below if below is not None else 2**62
        taken = "doc_id = ? AND (version < ? OR created_at < ?)"
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                rows = self._db.execute(f"SELECT key_id, version FROM keys WHERE {taken}",
                                        (doc_id, limit, made_before)).fetchall()
                self._db.executemany(
                    "INSERT OR IGNORE INTO destroyed VALUES (?, ?, ?, ?, ?)",
                    [(key_id, doc_id, version, at, reason) for key_id, version in rows])
                self._db.execute(f"DELETE FROM keys WHERE {taken}",
                                 (doc_id, limit, made_before))
                transit = self._db.execute(
                    "SELECT key_id, -gen FROM transit WHERE doc_id = ? AND created_at < ?",
                    (doc_id, made_before)).fetchall()
                self._db.executemany(
                    "INSERT OR IGNORE INTO destroyed VALUES (?, ?, ?, ?, ?)",
                    [(key_id, doc_id, version, at, reason) for key_id, version in transit])
                self._db.execute("DELETE FROM transit WHERE doc_id = ? AND created_at < ?",
                                 (doc_id, made_before))
                rows += transit
                gone = self._db.execute(
                    "SELECT key_id, doc_id, version, destroyed_at, reason FROM destroyed "
                    "WHERE doc_id = ? AND (version < ? OR key_id IN (SELECT value FROM "
                    "json_each(?))) ORDER BY version",
                    (doc_id, limit, _json_ids(k for k, _ in rows))).fetchall()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            # The deleted rows' pages are zeroed (secure_delete); the log's copies of them
            # go with the truncation.
            self._truncate_log()
        return [Destroyed(*row) for row in gone]

    def _truncate_log(self) -> None:
        """Fold the write-ahead log into the file and empty it; a reader in another process
        holding it is waited for (CHECKPOINT_TRIES tenths of a second), then KeyStoreError:
        a destroy is not done while the log may still hold the key."""
        for _ in range(CHECKPOINT_TRIES):
            busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                return
            time.sleep(0.1)
        raise KeyStoreError(f"{self.path}: the write-ahead log stayed busy; the destroyed "
                            "keys' old pages may still be in it")

    @_guarded
    def destroyed_of(self, doc_ids: Iterable[str]) -> list[Destroyed]:
        with self._lock:
            out = []
            for doc_id in doc_ids:
                out += [Destroyed(*r) for r in self._db.execute(
                    "SELECT key_id, doc_id, version, destroyed_at, reason FROM destroyed "
                    "WHERE doc_id = ? ORDER BY version", (doc_id,))]
        return out

    @_guarded
    def expire(self, created_before: float, reason: str = "text retention",
               now: float | None = None, transit_only: bool = False) -> int:
        """Destroy every key made before `created_before` (the text retention: a forget by
        age, so no copy kept anywhere, a backup included, opens past it), or only the
        transit keys (`transit_only`: ingest's, once docs.parsed.v1 no longer holds what
        they sealed); how many went."""
        at = time.time() if now is None else now
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                moved = 0
                kinds = [("transit", "-gen")] if transit_only else \
                    [("keys", "version"), ("transit", "-gen")]
                for table, version in kinds:
                    moved += self._db.execute(
                        f"INSERT OR IGNORE INTO destroyed SELECT key_id, doc_id, {version}, "
                        f"?, ? FROM {table} WHERE created_at < ?",
                        (at, reason, created_before)).rowcount
                    self._db.execute(f"DELETE FROM {table} WHERE created_at < ?",
                                     (created_before,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            if moved:
                self._truncate_log()
        return moved


    @_guarded
    def transit(self, doc_id: str, now: float | None = None,
                rotate_s: float = TRANSIT_ROTATE_S) -> VersionKey:
        """The document's transit key for what ingest parses now: its newest generation
        unless closed by a forget or older than `rotate_s`, else a new one."""
        at = time.time() if now is None else now
        current = ("SELECT key_id, gen, wrapped FROM transit WHERE doc_id = ? AND closed = 0 "
                   "AND created_at >= ? ORDER BY gen DESC LIMIT 1")
        with self._lock:
            row = self._db.execute(current, (doc_id, at - rotate_s)).fetchone()
            if row is not None:
                return self._unwrap(row[0], doc_id, -row[1], row[2])
            self._db.execute("BEGIN IMMEDIATE")
            try:
                # Another process may have made it since the read above: take that one.
                row = self._db.execute(current, (doc_id, at - rotate_s)).fetchone()
                if row is not None:
                    self._db.execute("COMMIT")
                    return self._unwrap(row[0], doc_id, -row[1], row[2])
                (gen,) = self._db.execute(
                    "SELECT 1 + MAX(COALESCE((SELECT MAX(gen) FROM transit WHERE doc_id = ?), "
                    "0), COALESCE((SELECT -MIN(version) FROM destroyed WHERE doc_id = ? AND "
                    "version < 0), 0))", (doc_id, doc_id)).fetchone()
                key_id, wrapped = transit_key_id(doc_id, gen), aes_key_wrap(self._kek,
                                                                            os.urandom(32))
                self._db.execute("INSERT INTO transit VALUES (?, ?, ?, ?, ?, 0)",
                                 (key_id, doc_id, gen, wrapped, at))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return self._unwrap(key_id, doc_id, -gen, wrapped)

    @_guarded
    def close_transit(self, doc_id: str) -> int:
        """A forget of the document was parsed: what is parsed after it gets a new transit
        key (the forget destroys the ones before it); how many were open."""
        with self._lock:
            return self._db.execute("UPDATE transit SET closed = 1 WHERE doc_id = ? AND "
                                    "closed = 0", (doc_id,)).rowcount

    @_guarded
    def by_id(self, key_id: str) -> VersionKey | Destroyed | None:
        """The key named `key_id` (a version's or a transit key), its marker, or None."""
        with self._lock:
            row = self._db.execute("SELECT doc_id, version, wrapped FROM keys WHERE key_id = ? "
                                   "UNION ALL SELECT doc_id, -gen, wrapped FROM transit WHERE "
                                   "key_id = ?", (key_id, key_id)).fetchone()
            if row is not None:
                return self._unwrap(key_id, row[0], row[1], row[2])
            return self._destroyed(key_id)

    def content_mac(self, digest: str) -> str:
        """A content hash keyed under the KEK (HMAC-SHA256 under a key HKDF derives from
        it): dedup compares these, and nobody without the KEK can test a guessed text
        against one on a topic or in a table."""
        mac = hmac.HMAC(self._content_key, hashes.SHA256())
        mac.update(digest.encode("ascii"))
        return "h" + mac.finalize().hex()


def _json_ids(ids: Iterable[str]) -> str:
    return json.dumps(list(ids))
