"""The one entry point that installs every fix of a private Faust or aiokafka method.

Each fix was written against one release of each library and reaches into its private
methods; `install` refuses to run on any other release (VERSIONS), so an upgrade cannot
silently drop the guarantee that no record is lost. The fixes, by module:

- `delivery`: every commit is the checkpoint's (shared/kafka/checkpoint.py: no offset is
  committed before its record was processed and everything it produced is on the
  broker), and Faust's offset and seek paths read every record once the seek is done.
- `trace_headers`: every record written carries the trace context of the record in hand
  (not a fix: Faust has no hook for outgoing headers).
- `durability`: every producer writes with acks=all, idempotently (not a fix: Faust has no
  public producer option for idempotence).
- `watchdog` (per app, armed by `shared.kafka.app.make_app`): a crashed worker exits, and
  so does one whose agent raised, without committing.

PATCHED lists every attribute replaced or overridden, CALLED the private methods called,
DATA the private data attributes read or written; tests/unit/shared/kafka/test_compat.py
fails when one of them disappears or changes its signature, or when code here reaches a
private name none of them lists (`scripts/private_attrs` prints the count per module).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable

from shared.settings import KafkaSettings

# The releases the fixes were read and tested against: exactly these.
VERSIONS = {"faust-streaming": "0.15.3", "aiokafka": "0.14.0", "mode-streaming": "0.7.1"}

# (module, class, attribute) -> the module of this package that replaces or overrides it.
PATCHED = {
    ("faust.channels", "Channel", "as_future_message"): "delivery",
    ("faust.topics", "Topic", "publish_message"): "delivery",
    ("faust.transport.consumer", "Consumer", "force_commit"): "delivery",
    ("faust.transport.consumer", "Consumer", "on_partitions_assigned"): "delivery",
    ("faust.transport.consumer", "Consumer", "on_partitions_revoked"): "delivery",
    ("faust.transport.consumer", "Consumer", "resume_partitions"): "delivery",
    ("faust.transport.consumer", "Consumer", "perform_seek"): "delivery",
    ("faust.transport.consumer", "Consumer", "getmany"): "delivery",
    ("faust.transport.consumer", "ThreadDelegateConsumer", "_getmany"): "delivery",
    ("faust.channels", "Channel", "prepare_headers"): "trace_headers",
    ("faust.transport.drivers.aiokafka", "Producer", "_settings_extra"): "durability",
    ("mode", "Service", "_crash"): "watchdog",  # on the app instance, not the class
    ("faust.app.base", "App", "_on_agent_error"): "watchdog",  # on the app instance too
    ("faust.tables.base", "Collection", "_changelog_topic_name"): "app",  # ContractTable
}

# Private methods the fixes call without replacing them -> the module that calls them.
CALLED = {
    ("faust.transport.consumer", "Consumer", "_is_changelog_tp"): "delivery",
    ("faust.transport.consumer", "ThreadDelegateConsumer", "_commit"): "checkpoint",
    ("faust.transport.drivers.aiokafka", "AIOKafkaConsumerThread", "seek_wait"): "delivery",
    ("faust.transport.drivers.aiokafka", "AIOKafkaConsumerThread", "_ensure_consumer"):
        "membership",
    ("faust.streams", "Stream", "_set_current_event"): "batching.partitions",
    ("aiokafka.consumer.group_coordinator", "GroupCoordinator", "_send_req"): "membership",
    ("mode.threads", "QueueServiceThread", "call_thread"): "membership",
}
# Private data attributes of the libraries' objects the fixes read or write -> the module.
DATA = {
    ("faust.transport.consumer", "Consumer", "_acked"): "checkpoint, delivery",
    ("faust.transport.consumer", "Consumer", "_acked_index"): "checkpoint, delivery",
    ("faust.transport.consumer", "Consumer", "_committed_offset"): "checkpoint, delivery",
    ("faust.transport.consumer", "Consumer", "_read_offset"): "delivery",
    ("faust.transport.consumer", "Consumer", "_buffered_partitions"): "delivery",
    ("faust.transport.consumer", "ThreadDelegateConsumer", "_thread"): "delivery, membership",
    ("aiokafka.consumer.consumer", "AIOKafkaConsumer", "_coordinator"): "membership",
}
# Marks this package sets on the libraries' objects (never the libraries' own names).
OWN_MARK = "_streamrag_"

# Modules whose fixes rely on a library's internals without replacing any of its methods:
# delivery's commit barrier reads aiokafka's accumulator and its fetched-records path;
# membership asks the group coordinator through its private request method.
RELIES_ON = {"aiokafka": ("delivery", "membership")}


class UnverifiedVersionError(RuntimeError):
    """An installed Faust or aiokafka is not the release the fixes were written against."""


def check_versions(kafka: KafkaSettings) -> None:
    """Raise UnverifiedVersionError unless each library is exactly the release in VERSIONS."""
    for dist, tested in VERSIONS.items():
        found = importlib.metadata.version(dist)
        if found == tested or kafka.allow_unverified_versions:
            continue
        lib_name = dist.split("-")[0]
        modules = sorted({f"shared/kafka/{m}.py" for (lib, _, _), m in PATCHED.items()
                          if lib.split(".")[0] == lib_name}
                         | {f"shared/kafka/{m}.py" for m in RELIES_ON.get(lib_name, ())})
        msg = (f"{dist} {found} is installed, but the fixes of its private methods were "
               f"written against {tested} only: re-verify {', '.join(modules)} against "
               f"{found} (tests/unit/shared/kafka/test_compat.py, then the integration tests "
               f"test_supervision, test_ingest_restart and test_scale_out), then update "
               f"VERSIONS in shared/kafka/patches.py and the pins in pyproject.toml; or install "
               f"{dist}=={tested}. To run anyway on a release you verified yourself, set "
               f"STREAMRAG_KAFKA_ALLOW_UNVERIFIED_VERSIONS=true.")
        raise UnverifiedVersionError(msg)


def install(kafka: KafkaSettings, *, on_refused: Callable[[BaseException], None]) -> None:
    """Check the versions, then install every process-wide fix (each at most once)."""
    check_versions(kafka)
    from shared.kafka import delivery, durability, trace_headers  # Faust's modules

    # Offsets are committed only once every record produced from them is on the broker.
    delivery.install(on_refused=on_refused)
    # Records written carry the trace context of the record in hand (shared/tracing).
    trace_headers.install()
    # acks=all, idempotent (KafkaSettings.producer_idempotence).
    durability.install(kafka)

