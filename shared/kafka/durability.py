"""Every Faust producer of the process writes with acks=all, and idempotently where the
broker supports it (STREAMRAG_KAFKA_PRODUCER_IDEMPOTENCE).

Faust sets `acks` from its `producer_acks` setting (make_app passes -1: all in-sync replicas)
but turns idempotence on only inside its transactions (`Producer._settings_extra`). This
override adds the mesh's producer options to every producer Faust builds; a transaction's
own settings still win. Not a workaround of a Faust bug: Faust has no public option for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shared.kafka.seam import replace
from shared.settings import KafkaSettings

_options: dict[str, Any] = {}
_original: Callable[[Any], Mapping[str, Any]] | None = None


def install(kafka: KafkaSettings) -> None:
    """From now on every Faust producer of this process takes `kafka.producer_options()`."""
    global _original
    from faust.transport.drivers import aiokafka as driver

    _options.clear()
    _options.update(kafka.producer_options())
    if _original is None:
        _original = replace(driver.Producer, "_settings_extra", _settings_extra)


def _settings_extra(self: Any) -> Mapping[str, Any]:
    assert _original is not None  # set by install before any producer exists
    return {**_options, **_original(self)}
