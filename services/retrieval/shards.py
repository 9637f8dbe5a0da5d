"""The shards this worker owns: one per embedding model and partition of chunks.embedded.v1.

Each model id on the topic has its own shard per partition (services/retrieval/models.py),
so a search names its model and never meets another model's vectors. The consumer reads a
partition once for every model: each shard's `offset` is the last offset of the partition it
has seen (its own records applied, the others' passed over), so a snapshot per model and
partition knows where replay must resume for it, and the partition resumes at the lowest.
"""

from __future__ import annotations

import asyncio
import binascii
import hashlib
import logging
import shutil
import time
import zipfile
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path

from services.retrieval import models, snapshot
from services.retrieval.index import Shard
from services.retrieval.settings import RetrievalSettings
from shared.contract.records import EmbeddedChunkSet
from shared.errors import InvalidInput

log = logging.getLogger(__name__)
DigestAt = Callable[[int, int], Awaitable[str | None]]  # (partition, offset) -> its digest
Key = tuple[str, int]  # (model id, partition)


def digest(value: bytes | None) -> str:
    """A record's fingerprint: matching it at an offset shows the log is the one applied."""
    return hashlib.blake2b(value or b"", digest_size=16).hexdigest()


class Shards:
    def __init__(self, settings: RetrievalSettings) -> None:
        self.settings = settings
        self.models: dict[str, int] = {}  # model id -> dimension, every model indexed here
        self.by_model: dict[str, dict[int, Shard]] = {}
        # Per owned partition: the last offset consumed and that record's digest.
        self.position: dict[int, tuple[int, str]] = {}
        self.ready_at: dict[int, int] = {}  # offset a partition must reach before it answers
        self.dirty: set[Key] = set()
        # Bumped, in the same synchronous step, by everything that can change what a search
        # of these shards answers (a record applied, a model started, shards assigned or
        # released, a model caught up): equal generations mean identical answers, which is
        # what inference's answer cache relies on (services/inference/cache/).
        self.generation = 0
        self._saving = asyncio.Lock()
        self._recall_models()

    def _recall_models(self) -> None:
        """The models indexed before a restart; a dropped model's snapshots are deleted."""
        for model_id, (dim, folder) in models.read_markers(self.settings.snapshot_dir).items():
            if model_id in self.settings.drop_models:
                shutil.rmtree(folder, ignore_errors=True)
                log.info("model %s dropped: its snapshots are deleted", model_id)
                continue
            self.models[model_id] = dim
            self.by_model[model_id] = {}

    def folder(self, model_id: str) -> Path:
        return self.settings.snapshot_dir / models.dir_name(model_id)

    def get(self, model_id: str, partition: int) -> Shard | None:
        return self.by_model.get(model_id, {}).get(partition)

    def at(self, partition: int) -> dict[str, Shard]:
        """Every model's shard of the partition."""
        return {m: shards[partition] for m, shards in self.by_model.items()
                if partition in shards}

    def ready(self, partition: int) -> bool:
        """True once the partition is owned and replayed to the end it had when assigned."""
        position = self.position.get(partition)
        return position is not None and position[0] >= self.ready_at.get(partition, -1)

    def empty(self, partition: int) -> bool:
        """True when no model's shard of the partition has seen a document (or its delete)."""
        return not any(shard.doc_version for shard in self.at(partition).values())

    def summary(self) -> dict[str, dict]:
        """Each model's dimension and, per owned shard, its chunks, documents and whether
        it has caught up (for `streamrag status`)."""
        return {m: {"dim": dim, "shards": {
            str(p): {"chunks": len(shard), "documents": len(shard.doc_slots),
                     "caught_up": self.caught_up(m, p)}
            for p, shard in sorted(self.by_model[m].items())}}
            for m, dim in sorted(self.models.items())}

    def caught_up(self, model_id: str, partition: int) -> bool:
        """True once the model's shard has held every document of the partition's other
        shards (at least at their versions). Sticky: a shard that has caught up keeps
        answering while a newer version reaches another model's shard first."""
        shard = self.get(model_id, partition)
        if shard is None or not self.ready(partition):
            return False
        if not shard.caught_up:
            others = [s for m, s in self.at(partition).items() if m != model_id]
            if all(models.covers(shard.doc_version, o.doc_version) for o in others):
                shard.caught_up = True
                self.generation += 1
                self.dirty.add((model_id, partition))
                log.info("model %s caught up on shard %d (%d chunks)", model_id, partition,
                         len(shard))
        return shard.caught_up

    async def assign(self, end_offsets: Mapping[int, int], digest_at: DigestAt) -> dict[int, int]:
        """Own exactly these partitions ({partition: end offset}); return where each resumes.

        Shards already held stay as they are; others load their model's snapshot, or start
        empty (resume at 0: a rebuild from the topic). A snapshot whose last record is not on
        the broker any more (the broker's log deleted, a topic recreated) is ignored: the
        record at its offset must have the digest it had when it was applied.
        """
        for p in set(self.position) - set(end_offsets):
            for model_id, shards in self.by_model.items():
                shards.pop(p, None)
                self.dirty.discard((model_id, p))
            del self.position[p]
            log.info("shard %d released", p)
        for p, end in end_offsets.items():
            if p not in self.position:
                for model_id, dim in self.models.items():
                    self.by_model[model_id][p] = await self._load(model_id, dim, p, digest_at)
                low = min(self.at(p).values(), key=lambda s: s.offset, default=None)
                self.position[p] = (low.offset, low.digest) if low else (-1, "")
                if low is None:
                    log.info("shard %d: no model indexed here yet, rebuilding from offset 0", p)
            self.ready_at[p] = end - 1
        self.generation += 1  # and after: a search that ran between its awaits is not kept
        return {p: offset + 1 for p, (offset, _) in self.position.items()}

    async def _load(self, model_id: str, dim: int, partition: int,
                    digest_at: DigestAt) -> Shard:
        s, t0 = self.settings, time.monotonic()
        path = snapshot.path_for(self.folder(model_id), partition)
        try:
            shard = snapshot.load(path, model_id, dim, s.index_config(), s.filter_strategy,
                                  s.lexical)
        except (OSError, ValueError, KeyError, RuntimeError, zipfile.BadZipFile) as exc:
            # A damaged file must not keep the worker from starting: the topic has it all.
            log.warning("shard %d of %s: snapshot unreadable (%s): rebuilding", partition,
                        model_id, exc)
            shard = None
        if shard is not None and shard.offset >= 0 and \
                await digest_at(partition, shard.offset) != shard.digest:
            log.warning("shard %d of %s: snapshot at offset %d is not from this log: "
                        "rebuilding", partition, model_id, shard.offset)
            shard = None
        if shard is None:
            log.info("shard %d of %s: no usable snapshot, rebuilding from offset 0",
                     partition, model_id)
            return self._new(model_id, dim)
        log.info("shard %d of %s loaded %d chunks at offset %d in %.2fs", partition, model_id,
                 len(shard), shard.offset, time.monotonic() - t0)
        return shard

    def _new(self, model_id: str, dim: int) -> Shard:
        s = self.settings
        return Shard(model_id, dim, s.index_config(), s.filter_strategy, s.lexical)

    def apply(self, partition: int, offset: int, update: EmbeddedChunkSet) -> bool:
        """Apply a record to its model's shard of the partition (one of a dropped model is
        passed over); False when that shard has it already or it is a stale version.

        The first record of a model starts its shards on every owned partition, each as if
        it had seen the partition up to where it is now (none of those records was the
        model's). Raises InvalidInput for a model that cannot be started and
        ModelMismatchError for a dimension other than the model's.
        """
        if update.model_id in self.settings.drop_models:
            return False
        self.generation += 1  # before any change: a search never sees new data at an old one
        if update.model_id not in self.models:
            self._start_model(update)
        shard = self.by_model[update.model_id][partition]
        if offset <= shard.offset:
            return False  # replay overlapping this model's snapshot
        return shard.apply(update)

    def _start_model(self, update: EmbeddedChunkSet) -> None:
        try:
            vector_dim = len(update.chunks[0].array()) if update.chunks else None
        except (ValueError, binascii.Error) as exc:
            raise InvalidInput("invalid_vector", "chunks.vector", "not base64 float32") from exc
        models.check_new_model(update.model_id, update.dim, vector_dim, len(self.models),
                               self.settings.max_models)
        models.write_marker(self.folder(update.model_id), update.model_id, update.dim)
        self.models[update.model_id] = update.dim
        self.by_model[update.model_id] = {}
        for p, (offset, record_digest) in self.position.items():
            shard = self._new(update.model_id, update.dim)
            shard.offset, shard.digest = offset, record_digest
            self.by_model[update.model_id][p] = shard
            self.dirty.add((update.model_id, p))
        log.info("indexing a new model %s (dimension %d) beside %s", update.model_id,
                 update.dim, sorted(set(self.models) - {update.model_id}) or "none")

    def expire(self, before: float) -> int:
        """Remove from every shard the documents ingested before `before` (the text
        retention); the shards changed are dirty, so the next save rewrites their snapshots
        without the text. Returns how many documents were removed (over all models)."""
        due = [(key, shard) for key in sorted(self._keys())
               if (shard := self.get(*key)) is not None
               and any(t < before for t in shard.doc_written.values())]
        if not due:
            return 0
        self.generation += 1  # before the change, as apply does
        removed = 0
        for key, shard in due:
            removed += len(shard.expire(before))
            self.dirty.add(key)
        return removed

    def held(self) -> set[tuple[str, int]]:
        """Every (doc id, version) some shard holds chunks of."""
        return {(d, v) for key in self._keys() if (shard := self.get(*key)) is not None
                for d, v in shard.doc_version.items() if d in shard.doc_slots}

    def forget(self, gone: Callable[[str, int], bool]) -> int:
        """Remove from every shard the document versions `gone` says were forgotten; the
        shards changed are dirty (the next save rewrites their snapshots). How many went."""
        removed = 0
        for key in sorted(self._keys()):
            shard = self.get(*key)
            if shard is not None and (out := shard.forget(gone)):
                self.generation += 1
                removed += len(out)
                self.dirty.add(key)
        return removed

    def _keys(self) -> set[Key]:
        return {(m, p) for m, shards in self.by_model.items() for p in shards}

    def applied(self, partition: int, offset: int, value: bytes | None) -> None:
        """The record at `offset` has been consumed: every shard of the partition behind it
        has now seen it (applied to its own model's shard, passed over by the others)."""
        record_digest = digest(value)
        self.position[partition] = (offset, record_digest)
        for model_id, shard in self.at(partition).items():
            if shard.offset < offset:
                shard.offset, shard.digest = offset, record_digest
                self.dirty.add((model_id, partition))

    async def save(self, partitions: Iterable[int] | None = None) -> list[Key]:
        """Snapshot the dirty shards of `partitions` (all when None); returns those saved.

        The state is copied on the event loop; serialising and writing it (seconds for
        100k chunks) runs in a thread so searches keep being answered meanwhile.
        """
        async with self._saving:  # the timer and a rebalance must not write one file twice
            wanted = None if partitions is None else set(partitions)
            chosen = {k for k in self.dirty if wanted is None or k[1] in wanted}
            saved = []
            for model_id, p in sorted(chosen):
                shard = self.get(model_id, p)
                self.dirty.discard((model_id, p))  # updates from here on make it dirty again
                if shard is None:
                    continue
                t0 = time.monotonic()
                captured = snapshot.capture(shard)
                await asyncio.to_thread(snapshot.write, captured,
                                        snapshot.path_for(self.folder(model_id), p))
                log.info("shard %d of %s snapshot at offset %d: %d chunks in %.2fs", p,
                         model_id, captured.state["offset"],
                         len(captured.hits) - len(shard.columns.free), time.monotonic() - t0)
                saved.append((model_id, p))
            return saved
