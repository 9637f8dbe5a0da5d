"""The private Faust and aiokafka methods that shared/kafka/ replaces are still there, with
the signatures the fixes were written against, and the fixes refuse other versions."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import re
from typing import Any

import pytest

from scripts.benchlib import private_attrs
from shared.kafka import patches
from shared.kafka.seam import original, replace, replaced
from shared.settings import KafkaSettings

# inspect.signature of each original in faust-streaming 0.15.3 / aiokafka 0.14.0 /
# mode-streaming 0.7.1 (names, kinds and defaults; annotations left out, their repr varies).
SIGNATURES = {
    "Channel.as_future_message": "(self, key=None, value=None, partition=None, timestamp=None,"
    " headers=None, schema=None, key_serializer=None, value_serializer=None, callback=None,"
    " eager_partitioning=False)",
    "Consumer.force_commit": "(self, topics=None, start_new_transaction=True)",
    "Topic.publish_message": "(self, fut, wait=False)",
    "Consumer.on_partitions_assigned": "(self, assigned, generation_id=0)",
    "Consumer.on_partitions_revoked": "(self, revoked)",
    "Consumer.resume_partitions": "(self, tps)",
    "Consumer.perform_seek": "(self)",
    "Consumer.getmany": "(self, timeout)",
    "ThreadDelegateConsumer._getmany": "(self, active_partitions, timeout)",
    "Channel.prepare_headers": "(self, headers)",
    "Producer._settings_extra": "(self)",
    "Service._crash": "(self, reason)",
    "App._on_agent_error": "(self, agent, exc)",
    "Collection._changelog_topic_name": "(self)",
}
# Private methods the fixes call without replacing them.
CALLED = {
    ("faust.transport.consumer", "Consumer", "_is_changelog_tp"): "(self, tp)",
    ("faust.transport.consumer", "ThreadDelegateConsumer", "_commit"): "(self, offsets)",
    ("faust.transport.drivers.aiokafka", "AIOKafkaConsumerThread", "seek_wait"):
        "(self, partitions)",
    ("faust.streams", "Stream", "_set_current_event"): "(self, event=None)",
    ("aiokafka.consumer.group_coordinator", "GroupCoordinator", "_send_req"):
        "(self, request)",
    ("mode.threads", "QueueServiceThread", "call_thread"): "(self, fun, *args, **kwargs)",
    ("faust.transport.drivers.aiokafka", "AIOKafkaConsumerThread", "_ensure_consumer"):
        "(self)",
}


def owner(module: str, cls: str) -> type:
    found: type = getattr(importlib.import_module(module), cls)
    return found


def bare(function: Any) -> str:
    sig = inspect.signature(function)
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def test_every_patched_attribute_has_a_recorded_signature() -> None:
    assert sorted(f"{cls}.{attr}" for _, cls, attr in patches.PATCHED) == sorted(SIGNATURES)


@pytest.mark.parametrize(("module", "cls", "attr"), sorted(patches.PATCHED))
def test_a_patched_method_is_there_with_its_recorded_signature(module: str, cls: str,
                                                               attr: str) -> None:
    target = owner(module, cls)
    assert attr in vars(target) or hasattr(target, attr), f"{module}.{cls}.{attr} is gone"
    assert bare(original(target, attr)) == SIGNATURES[f"{cls}.{attr}"]


def test_every_called_private_method_has_a_recorded_signature() -> None:
    assert sorted(CALLED) == sorted(patches.CALLED)


@pytest.mark.parametrize(("module", "cls", "attr"), sorted(patches.DATA))
def test_a_private_data_attribute_is_still_set_by_its_class(module: str, cls: str,
                                                             attr: str) -> None:
    """The class (or a base) still assigns the attribute the fixes read or write: a
    rename would leave them reading a default or writing a name nobody reads."""
    sources = [inspect.getsource(c) for c in owner(module, cls).__mro__
               if c.__module__.split(".")[0] in ("faust", "aiokafka", "mode")]
    assert any(re.search(rf"self\.{attr}\s*(?::[^=\n]+)?=", src) for src in sources), \
        f"{module}.{cls} no longer sets {attr}"


def test_shared_reaches_no_private_name_patches_does_not_declare() -> None:
    """A new reach into a library's private parts is declared in shared/kafka/patches.py
    (and so checked here) or it fails: scripts/private_attrs counts them per module."""
    rows = private_attrs.report()
    assert [(r["module"], r["undeclared"]) for r in rows if r["undeclared"]] == []
    assert sum(len(r["replaced"]) for r in rows) == len(patches.PATCHED)  # type: ignore[arg-type]


@pytest.mark.parametrize(("module", "cls", "attr"), sorted(CALLED))
def test_a_called_private_method_is_there_with_its_recorded_signature(module: str, cls: str,
                                                                      attr: str) -> None:
    assert bare(getattr(owner(module, cls), attr)) == CALLED[(module, cls, attr)]


def test_install_replaces_every_class_level_attribute_it_lists(tmp_path: Any) -> None:
    patches.install(KafkaSettings(), on_refused=lambda exc: None)
    listed = {(owner(m, c), a) for (m, c, a), where in patches.PATCHED.items()
              if where not in ("watchdog", "app")}  # per instance, and a subclass
    assert listed <= replaced()
    for target, attr in listed:
        assert getattr(target, attr) is not original(target, attr)


def test_the_installed_versions_are_the_verified_ones() -> None:
    found = {dist: importlib.metadata.version(dist) for dist in patches.VERSIONS}
    assert found == patches.VERSIONS


def test_another_version_refuses_to_start_naming_the_modules_to_reverify(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda dist: "0.15.1" if dist == "aiokafka" else real(dist))
    with pytest.raises(patches.UnverifiedVersionError) as raised:
        patches.check_versions(KafkaSettings())
    message = str(raised.value)
    assert "aiokafka 0.15.1 is installed" in message
    assert "written against 0.14.0" in message
    assert "shared/kafka/delivery.py" in message  # its barrier relies on aiokafka's internals
    assert "shared/kafka/watchdog.py" not in message  # only aiokafka's fixes to re-verify
    assert "STREAMRAG_KAFKA_ALLOW_UNVERIFIED_VERSIONS" in message
    patches.check_versions(KafkaSettings(allow_unverified_versions=True))  # overridden


def test_replace_keeps_the_first_original() -> None:
    class Target:
        def method(self) -> str:
            return "original"

    first = replace(Target, "method", lambda self: "first")
    second = replace(Target, "method", lambda self: "second")
    assert first is second is original(Target, "method")
    assert Target().method() == "second"


def test_another_mode_release_names_the_watchdog_to_reverify(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda dist: "0.8.0" if dist == "mode-streaming" else real(dist))
    with pytest.raises(patches.UnverifiedVersionError) as raised:
        patches.check_versions(KafkaSettings())
    assert "mode-streaming 0.8.0 is installed" in str(raised.value)
    assert "shared/kafka/watchdog.py" in str(raised.value)
    assert "shared/kafka/delivery.py" not in str(raised.value)
