"""Redaction is a stage object: its state lives on the object a build returns, none in
the agents module."""

from __future__ import annotations
import __future__

from logging import Logger
from pathlib import Path
from types import ModuleType

from prometheus_client.metrics import MetricWrapperBase

from services.redaction import agents
from tests.support import built

STATELESS = (ModuleType, type, type(len), type(lambda: 0), __future__._Feature, Logger,
             MetricWrapperBase, str, int, float, tuple, frozenset)


def frozen(value: object) -> bool:
    params = getattr(type(value), "__dataclass_params__", None)
    return bool(params and params.frozen)


def test_two_builds_are_two_independent_stages(tmp_path: Path) -> None:
    one = built.stage("redaction", data_dir=tmp_path / "one")
    two = built.stage("redaction", data_dir=tmp_path / "two")
    assert one.app is not two.app and one.redact is not two.redact
    assert one.chains is not two.chains and one.boundary is not two.boundary
    one.chains.saw(0, 41)
    assert one.chains.expected == {0: 42} and two.chains.expected == {}
    assert one.redact.fun == one.redact_batches  # the agent is the stage's own method


def test_the_stage_keeps_no_mutable_state_at_module_level(tmp_path: Path) -> None:
    """Only functions, classes, modules, loggers and constants (frozen topic specs too),
    also after a build (a build that rebinds module globals is what this rules out)."""
    assert built.stage("redaction", data_dir=tmp_path) is not None
    kept = {name: value for name, value in vars(agents).items()
            if not name.startswith("__") and not isinstance(value, STATELESS) and not frozen(value)}
    assert kept == {}
