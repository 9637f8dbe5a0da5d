"""The shards this worker owns, one per partition of chunks.embedded.v1, and their snapshots."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import zipfile
from collections.abc import Awaitable, Callable, Iterable, Mapping

from services.retrieval import snapshot
from services.retrieval.index import Shard
from services.retrieval.settings import RetrievalSettings

log = logging.getLogger(__name__)
DigestAt = Callable[[int, int], Awaitable[str | None]]  # (partition, offset) -> its digest


def digest(value: bytes | None) -> str:
    """A record's fingerprint: matching it at an offset shows the log is the one applied."""
    return hashlib.blake2b(value or b"", digest_size=16).hexdigest()


class Shards:
    def __init__(self, settings: RetrievalSettings) -> None:
        self.settings = settings
        self.by_partition: dict[int, Shard] = {}
        self.ready_at: dict[int, int] = {}  # offset a shard must reach before it answers
        self.dirty: set[int] = set()
        self._saving = asyncio.Lock()

    def get(self, partition: int) -> Shard | None:
        return self.by_partition.get(partition)

    def ready(self, partition: int) -> bool:
        shard = self.by_partition.get(partition)
        return shard is not None and shard.offset >= self.ready_at.get(partition, -1)

    async def assign(self, end_offsets: Mapping[int, int], digest_at: DigestAt) -> dict[int, int]:
        """Own exactly these partitions ({partition: end offset}); return where each resumes.

        A shard already held stays as it is; others load their snapshot, or start empty
        (resume at 0: a rebuild from the topic). A snapshot whose last record is not on the
        broker any more (a memory broker restarted, a topic recreated) is ignored: the
        record at its offset must have the digest it had when it was applied.
        """
        for p in set(self.by_partition) - set(end_offsets):
            del self.by_partition[p]
            self.dirty.discard(p)
            log.info("shard %d released", p)
        for p, end in end_offsets.items():
            if p not in self.by_partition:
                self.by_partition[p] = await self._load(p, digest_at)
            self.ready_at[p] = end - 1
        return {p: shard.offset + 1 for p, shard in self.by_partition.items()}

    async def _load(self, partition: int, digest_at: DigestAt) -> Shard:
        s, t0 = self.settings, time.monotonic()
        path = snapshot.path_for(s.snapshot_dir, partition)
        try:
            shard = snapshot.load(path, s.model_id, s.dim, s.index_config(), s.filter_strategy,
                                  s.lexical)
        except (OSError, ValueError, KeyError, RuntimeError, zipfile.BadZipFile) as exc:
            # A damaged file must not keep the worker from starting: the topic has it all.
            log.warning("shard %d snapshot unreadable (%s): rebuilding", partition, exc)
            shard = None
        if shard is not None and shard.offset >= 0 and \
                await digest_at(partition, shard.offset) != shard.digest:
            log.warning("shard %d snapshot at offset %d is not from this log: rebuilding",
                        partition, shard.offset)
            shard = None
        if shard is None:
            log.info("shard %d: no usable snapshot, rebuilding from offset 0", partition)
            return Shard(s.model_id, s.dim, s.index_config(), s.filter_strategy, s.lexical)
        log.info("shard %d loaded %d chunks at offset %d in %.2fs", partition, len(shard),
                 shard.offset, time.monotonic() - t0)
        return shard

    def applied(self, partition: int, offset: int, value: bytes | None) -> None:
        shard = self.by_partition[partition]
        shard.offset, shard.digest = offset, digest(value)
        self.dirty.add(partition)

    async def save(self, partitions: Iterable[int] | None = None) -> list[int]:
        """Snapshot the dirty shards among `partitions` (all when None); returns those saved.

        The state is copied on the event loop; serialising and writing it (seconds for
        100k chunks) runs in a thread so searches keep being answered meanwhile.
        """
        async with self._saving:  # the timer and a rebalance must not write one file twice
            chosen = self.dirty if partitions is None else self.dirty & set(partitions)
            saved = []
            for p in sorted(chosen):
                shard, t0 = self.by_partition[p], time.monotonic()
                self.dirty.discard(p)  # updates from here on make it dirty again
                captured = snapshot.capture(shard)
                await asyncio.to_thread(snapshot.write, captured,
                                        snapshot.path_for(self.settings.snapshot_dir, p))
                log.info("shard %d snapshot at offset %d: %d chunks in %.2fs", p,
                         captured.state["offset"], len(captured.hits) - len(shard.columns.free),
                         time.monotonic() - t0)
                saved.append(p)
            return saved
