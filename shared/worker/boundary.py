"""The one error boundary every agent puts around each record, and the per-stage counters.

A record is done (shared/kafka/checkpoint.py, the only place offsets are committed) only
when the agent's loop moves on from it; one whose handling raised is never done, so it
holds its partition's commit until the worker replays it. So nothing may rely on Faust's
crash-and-restart of an agent for a bad record (the agent would go on past a record that
stays undone); instead:

- `InvalidInput`: the record's own fault; dead-lettered with its reason.
- any other `Exception` (a ValueError, KeyError, RecursionError, UnicodeError from the
  record's content, a bug in our logic): dead-lettered with reason `internal_error`, the
  stage and the exception's type only (its message may quote the payload), counted, and
  the agent goes on with the next record.
- a failure that is not about the record (`FATAL`: `InfrastructureError`, `OSError` such
  as a full disk or a lost connection, any Kafka or Faust error, `MemoryError`) stops the
  worker at once, so it restarts and replays from the last committed offset. It exits
  rather than stop cleanly because Faust's stop waits for every record in hand to be done
  ("Wait for streams..."), and this one never will be; nothing it holds was committed,
  as after kill -9, which every stage must survive anyway. Cancellation and other
  BaseExceptions (a rebalance, Ctrl-C) pass through untouched.
- the same fatal failure of the same record the MAX_FAILURES-th time, across restarts
  (shared/worker/poison.py): dead-lettered `repeated_failure` (detail: stage and error type), so
  a record that stops the worker every time cannot hold its partition for good.
- a record that blocks the event loop or kills the process: the boundary keeps it in
  shared.worker.heartbeat's `in_hand` while inside, so the heartbeat can name it and the next
  start can count the death against it (shared/worker/poison.py `after_death`); the MAX_FAILURES-th
  time running it is dead-lettered on sight by a processor on every stream of the app
  (`export_counts` installs it), before any agent handles it again.
- workers of one stage sharing a data dir: each writes its own folder
  (shared/worker/members.py), and the failure journal is changed under a lock.

Counters (prometheus_client, default registry): `streamrag_records_processed_total{stage}`
counts every record that passed a boundary whatever became of it,
`streamrag_records_dead_lettered_total{stage,reason}` every dead letter (shared.contract.dlq counts
them), `streamrag_records_internal_error_total{stage,error}` the internal errors by
exception type. `counts()` reads them back; `dump_counts` writes them to a file that
`streamrag status` reads. The boundary also counts records in by topic, sets the stage for
the sends made inside it and times each record (shared.worker.metrics, which lists every
metric); `export_counts` serves them on the process's one /metrics port.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiokafka.errors import KafkaError
from faust.exceptions import FaustError, Skip
from faust.streams import current_event
from prometheus_client import REGISTRY, Counter

from shared.contract.dlq import send_dead_letter
from shared.errors import InfrastructureError, InvalidInput
from shared.tracing import spans
from shared.worker import heartbeat, members, metrics, poison, status_files
from shared.worker.status_files import COUNTS_FILE, PROGRESS_FILE

log = logging.getLogger(__name__)

FATAL: tuple[type[BaseException], ...] = (
    InfrastructureError, OSError, KafkaError, FaustError, MemoryError,
)
EXIT_FATAL = 70  # EX_SOFTWARE: the supervisor restarts the worker

PROCESSED = Counter("streamrag_records_processed", "Records that passed a stage's boundary",
                    ["stage"])
INTERNAL = Counter("streamrag_records_internal_error",
                   "Records dead-lettered because handling them raised unexpectedly",
                   ["stage", "error"])


def is_fatal(exc: Exception) -> bool:
    """True for failures that are not about the record: the worker must stop and replay."""
    return isinstance(exc, FATAL)


def exit_now(exc: BaseException) -> None:
    """Stop the process without Faust's clean stop (which would wait for ever for the
    record in hand to be done); what it held replays from the last commit."""
    heartbeat.in_hand.known_exit({})  # the failure is counted already, if it is the record's
    logging.shutdown()
    sys.stderr.flush()
    os._exit(EXIT_FATAL)


def _where(exc: BaseException) -> str:
    """The innermost frame, file:line, for the log: never the exception's message."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    last = frames[-1]
    return f"{Path(last.filename).name}:{last.lineno} in {last.name}"


class Boundary:
    """Wrap the handling of each record of one stage: `async with boundary.record(event):`."""

    by_stage: dict[str, Boundary] = {}  # to dead-letter a record that hung in its stage

    def __init__(self, stage: str, dlq_topic: Any, *, keep_payload: bool = False,
                 on_fatal: Callable[[BaseException], None] = exit_now) -> None:
        self.stage = stage
        self.dlq_topic = dlq_topic
        self.keep_payload = keep_payload  # only before redaction (deadletter.raw.v1)
        self.on_fatal = on_fatal
        Boundary.by_stage[stage] = self

    @asynccontextmanager
    async def record(self, event: Any, *, count: bool = True,
                     operation: str = "process") -> AsyncIterator[None]:
        """Run the block for `event`; a record-level failure dead-letters it and is swallowed.

        `count=False` for a second pass over a record already counted (a batch retried
        one by one, or its outputs sent), `operation` naming that pass in its span. The
        sends inside carry the record's trace context; with tracing on, the block is a span
        (shared.tracing.spans).
        """
        if count:
            PROCESSED.labels(self.stage).inc()
            metrics.received(self.stage, event.message.topic)
        token = heartbeat.in_hand.enter(self.stage, event.message)
        stage = metrics.current_stage.set(self.stage)  # the sends inside are this stage's
        started = time.perf_counter()
        with spans.record(self.stage, event.message, operation):
            try:
                yield
            except InvalidInput as exc:
                await self._dead_letter(exc, event)
            except Exception as exc:  # noqa: BLE001 - sorted below, fatal ones stop the worker
                if is_fatal(exc):
                    if await self._gave_up(exc, event):
                        return
                    self._fatal(exc, event)
                    raise
                INTERNAL.labels(self.stage, type(exc).__name__).inc()
                msg = event.message
                log.error("internal error in %s on %s/%s@%s: %s at %s; record dead-lettered",
                          self.stage, msg.topic, msg.partition, msg.offset, type(exc).__name__,
                          _where(exc))
                await self._dead_letter(
                    InvalidInput("internal_error", detail=type(exc).__name__), event)
            else:
                if poison.journal.entries:  # it failed before and got through this time
                    poison.journal.forget(self.stage, event.message)
            finally:
                metrics.handled(self.stage, time.perf_counter() - started)
                metrics.current_stage.reset(stage)
                heartbeat.in_hand.leave(token)

    async def give_up(self, key: str, event: Any) -> None:
        """Dead-letter a record that hung or killed the worker MAX_FAILURES times running,
        or a copy of one at another offset (`key` is then the original's); the stream
        processor (`skip_exhausted`) calls this instead of the agent."""
        error = poison.journal.entries.get(key, {}).get("error", poison.HANG)
        msg = event.message
        own = poison.record_key(self.stage, msg)
        if poison.journal.already_dead_lettered(own):
            log.warning("%s: %s/%s@%s is on the dead-letter topic already (the worker stopped "
                        "before committing past it): skipped", self.stage, msg.topic,
                        msg.partition, msg.offset)
            return
        if own == key:
            log.error("%s: %s/%s@%s was in hand at %d deaths of the worker running (%s): "
                      "dead-lettering it unhandled", self.stage, msg.topic, msg.partition,
                      msg.offset, poison.MAX_FAILURES, error)
        else:
            log.error("%s: %s/%s@%s is a copy of %s, given up (%s): dead-lettering it "
                      "unhandled", self.stage, msg.topic, msg.partition, msg.offset,
                      key.split("|", 1)[1].replace("|", "/", 1).replace("|", "@"), error)
        PROCESSED.labels(self.stage).inc()
        metrics.received(self.stage, msg.topic)
        await self._dead_letter(InvalidInput(
            poison.REPEATED_FAILURE, detail=f"{self.stage}: {error}"), event)
        poison.journal.dead_lettered(own)

    async def _gave_up(self, exc: Exception, event: Any) -> bool:
        """Dead-letter the record if this is its MAX_FAILURES-th same fatal failure."""
        msg = event.message
        try:
            count = poison.journal.failed(self.stage, msg, exc)
        except OSError:  # the journal cannot be written: stop as for any fatal failure
            return False
        if not poison.journal.exhausted(count):
            return False
        log.error("%s failed on %s/%s@%s with %s %d times: dead-lettering it", self.stage,
                  msg.topic, msg.partition, msg.offset, type(exc).__name__, count)
        await self._dead_letter(InvalidInput(
            poison.REPEATED_FAILURE, detail=f"{self.stage}: {type(exc).__name__}"), event)
        poison.journal.dead_lettered(poison.record_key(self.stage, msg))
        return True

    async def _dead_letter(self, exc: InvalidInput, event: Any) -> None:
        spans.outcome("dead_lettered", exc.reason)
        try:
            await send_dead_letter(self.dlq_topic, self.stage, exc, event.message,
                                   keep_payload=self.keep_payload)
        except Exception as failed:  # the broker is gone: not the record's fault
            self._fatal(failed, event)
            raise

    def _fatal(self, exc: BaseException, event: Any) -> None:
        msg = event.message
        log.critical("%s cannot go on at %s/%s@%s: %s at %s; stopping the worker to replay",
                     self.stage, msg.topic, msg.partition, msg.offset, type(exc).__name__,
                     _where(exc))
        self.on_fatal(exc)


def counts() -> dict[str, dict[str, float]]:
    """{stage: {"processed": n, "dead_lettered.<reason>": n, "internal_error.<type>": n}}."""
    out: dict[str, dict[str, float]] = {}
    for family in REGISTRY.collect():
        if not family.name.startswith("streamrag_records_"):
            continue
        kind = family.name.removeprefix("streamrag_records_")
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            labels = sample.labels
            key = kind + "".join(f".{v}" for k, v in sorted(labels.items()) if k != "stage")
            out.setdefault(labels["stage"], {})[key] = sample.value
    return out


def dump_counts(path: Path) -> None:
    """Write `counts()` to `path` atomically (the worker's timer calls this)."""
    status_files.replace_file(path, json.dumps(counts(), sort_keys=True))


_exporting: set[tuple[str, Path]] = set()


def export_counts(app: Any, data_dir: Path, interval_s: float = 2.0, *,
                  metrics_host: str = "127.0.0.1", metrics_port: int = 0) -> None:
    """Have the worker write its counters under its data dir for `streamrag status`, and
    serve them on `metrics_port` (0: none) unless the process serves another port already
    (STREAMRAG_WATCHDOG_METRICS_PORT first, then the first hosted service's)."""
    metrics.server.want(metrics_host, metrics_port)
    stage_dir = (data_dir / app.conf.id).resolve()
    if (app.conf.id, stage_dir) in _exporting:  # one process, one app: the counters are here
        return
    _exporting.add((app.conf.id, stage_dir))
    metrics.observe(app)

    # The records that stopped this stage's workers before, so a poison one is not retried
    # forever.
    poison.journal.open(stage_dir / poison.FAILURES_FILE)
    _skip_exhausted_records(app)

    @app.timer(interval_s, name=f"{app.conf.id}.export_counts")
    async def _export() -> None:
        dump_counts(members.own_file(stage_dir, COUNTS_FILE))

    def _count_deaths(sender: Any, **_: Any) -> None:
        # The worker is starting (never on import): take its own folder under the stage dir,
        # counting what dead workers of the stage died holding before any stream hands over
        # a record, then mirror what this one holds.
        heartbeat.in_hand.open(stage_dir)

    app.on_worker_init.connect(_count_deaths)

    @app.task
    async def _heartbeat() -> None:
        settings = heartbeat.WatchdogSettings()
        heartbeat.Heartbeat(asyncio.get_running_loop(), settings,
                            members.own_file(stage_dir, PROGRESS_FILE)).start()
        metrics.server.start((settings.metrics_host, settings.metrics_port))


async def skip_exhausted(value: Any) -> Any:
    """Stream processor: a record marked to dead-letter on sight (it hung or killed the
    worker MAX_FAILURES times running, or it is a copy of one) is dead-lettered by its
    stage's boundary and skipped (Faust marks a skipped event done for the checkpoint, as
    the dead letter is on its way), so no agent handles it again."""
    if not poison.journal.skips:
        return value
    event = current_event()
    if event is None:
        return value
    msg = event.message
    key = poison.journal.skipped(msg.topic, msg.partition, msg.offset) \
        or poison.journal.copy_of(msg)
    boundary = Boundary.by_stage.get(key.split("|", 1)[0]) if key else None
    if key is None or boundary is None:
        return value
    await boundary.give_up(key, event)
    raise Skip()


def _skip_exhausted_records(app: Any) -> None:
    """Put `skip_exhausted` first on every stream the app makes (agents make theirs when
    the worker starts, after this)."""
    make_stream = app.stream

    def stream(channel: Any, *args: Any, **kwargs: Any) -> Any:
        made = make_stream(channel, *args, **kwargs)
        if skip_exhausted not in made.info()["processors"]:
            made.add_processor(skip_exhausted)
        return made

    app.stream = stream
