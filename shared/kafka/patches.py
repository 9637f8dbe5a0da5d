"""The one entry point that installs every fix of a private Faust or aiokafka method.

Each fix was written against one release of each library and reaches into its private
methods; `install` refuses to run on any other release (VERSIONS), so an upgrade cannot
silently drop the guarantee that no record is lost. The fixes, by module:

- `delivery`: no offset is committed before its record was processed and everything it
  produced is on the broker (Faust's commit, offset and seek paths).
- `changelog_tail`: table recovery reads each changelog to its true end.
- `fetch_wait`: the fetch wait of Faust's consumer is a setting, and idle-aware.
- `trace_headers`: every record written carries the trace context of the record in hand
  (not a fix: Faust has no hook for outgoing headers).
- `durability`: every producer writes with acks=all, idempotent where the broker supports
  it (not a fix: Faust has no public producer option for idempotence).
- `watchdog` (per app, armed by `shared.kafka.app.make_app`): a crashed worker exits.

PATCHED lists every attribute replaced or overridden; tests/unit/shared/kafka/
test_compat.py fails when one of them disappears or changes its signature.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable

from shared.kafka import fetch_wait
from shared.settings import KafkaSettings

# The releases the fixes were read and tested against: exactly these.
VERSIONS = {"faust-streaming": "0.15.3", "aiokafka": "0.14.0", "mode-streaming": "0.7.1"}

# (module, class, attribute) -> the module of this package that replaces or overrides it.
PATCHED = {
    ("faust.channels", "Channel", "as_future_message"): "delivery",
    ("faust.transport.consumer", "Consumer", "_commit_offsets"): "delivery",
    ("faust.transport.consumer", "Consumer", "_new_offset"): "delivery",
    ("faust.transport.consumer", "Consumer", "_add_gap"): "delivery",
    ("faust.transport.consumer", "Consumer", "on_partitions_assigned"): "delivery",
    ("faust.transport.consumer", "Consumer", "on_partitions_revoked"): "delivery",
    ("faust.transport.consumer", "Consumer", "resume_partitions"): "delivery",
    ("faust.transport.consumer", "Consumer", "perform_seek"): "delivery",
    ("faust.transport.consumer", "Consumer", "getmany"): "delivery",
    ("faust.transport.consumer", "ThreadDelegateConsumer", "_getmany"): "delivery",
    ("faust.tables.recovery", "Recovery", "_build_highwaters"): "changelog_tail",
    ("faust.transport.drivers.aiokafka", "AIOKafkaConsumerThread",
     "_create_worker_consumer"): "fetch_wait",
    ("aiokafka.consumer.fetcher", "Fetcher", "_get_actions_per_node"): "fetch_wait",
    ("aiokafka.consumer.fetcher", "Fetcher", "_proc_fetch_request"): "fetch_wait",
    ("aiokafka", "AIOKafkaProducer", "send"): "fetch_wait",
    ("faust.channels", "Channel", "prepare_headers"): "trace_headers",
    ("faust.transport.drivers.aiokafka", "Producer", "_settings_extra"): "durability",
    ("mode", "Service", "_crash"): "watchdog",  # on the app instance, not the class
    ("faust.tables.base", "Collection", "_changelog_topic_name"): "app",  # ContractTable
}


class UnverifiedVersionError(RuntimeError):
    """An installed Faust or aiokafka is not the release the fixes were written against."""


def check_versions(kafka: KafkaSettings) -> None:
    """Raise UnverifiedVersionError unless each library is exactly the release in VERSIONS."""
    for dist, tested in VERSIONS.items():
        found = importlib.metadata.version(dist)
        if found == tested or kafka.allow_unverified_versions:
            continue
        modules = sorted({f"shared/kafka/{m}.py" for (lib, _, _), m in PATCHED.items()
                          if lib.split(".")[0] == dist.split("-")[0]})
        msg = (f"{dist} {found} is installed, but the fixes of its private methods were "
               f"written against {tested} only: re-verify {', '.join(modules)} against "
               f"{found} (tests/unit/shared/kafka/test_compat.py, then the integration tests "
               f"test_supervision, test_ingest_restart and test_changelog_tail), then update "
               f"VERSIONS in shared/kafka/patches.py and the pins in pyproject.toml; or install "
               f"{dist}=={tested}. To run anyway on a release you verified yourself, set "
               f"STREAMRAG_KAFKA_ALLOW_UNVERIFIED_VERSIONS=true.")
        raise UnverifiedVersionError(msg)


def install(kafka: KafkaSettings, *, fetch_wait_ms: int,
            on_refused: Callable[[BaseException], None]) -> None:
    """Check the versions, then install every process-wide fix (each at most once)."""
    check_versions(kafka)
    # Faust's modules: imported here, not for install_idle_wait.
    from shared.kafka import changelog_tail, delivery, durability, trace_headers

    fetch_wait.set_faust_wait(fetch_wait_ms)
    install_idle_wait(kafka)
    # Offsets are committed only once every record produced from them is on the broker.
    delivery.install(on_refused=on_refused)
    # Table recovery reads changelogs to their true end (the embedded broker's is short).
    changelog_tail.install(kafka)
    # Records written carry the trace context of the record in hand (shared/tracing).
    trace_headers.install()
    # acks=all, idempotent where the broker supports it (KafkaSettings.producer_idempotence).
    durability.install(kafka)


def install_idle_wait(kafka: KafkaSettings) -> None:
    """The idle-aware fetch wait alone, for a plain aiokafka client outside Faust (the
    journal); versions checked as for `install`."""
    check_versions(kafka)
    if kafka.idle_fetch_max_wait_ms:  # short waits while traffic flows, long ones idle
        fetch_wait.install(kafka.idle_fetch_max_wait_ms, kafka.idle_after_s,
                           kafka.activity_file)
