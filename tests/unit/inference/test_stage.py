"""Inference is a stage object: its topics, tables, latency buffer, guard and runtime live on
the object a build returns, none in the agents modules."""

from __future__ import annotations

from types import ModuleType

import pytest

from services.inference import agents
from services.inference.audit import agents as audit_agents
from tests.support import built
from tests.support.module_state import mutable_state


def test_two_builds_are_two_independent_stages() -> None:
    one, two = built.stage("inference"), built.stage("inference")
    assert one.app is not two.app and one.count_feedback is not two.count_feedback
    assert one.latency_buffer is not two.latency_buffer
    assert one.routed_calls is not two.routed_calls and one.audits is not two.audits
    one.latency_buffer.record("Query", 0.012)
    assert len(one.latency_buffer.drain()) == 1 and two.latency_buffer.drain() == []
    assert one.count_feedback.fun == one.count_feedback_of  # the agent is the stage's method
    # Each builds its own runtime class, bound to its own stage.
    assert one.runtime_class() is not two.runtime_class()


@pytest.mark.parametrize("module", [agents, audit_agents])
def test_the_stage_keeps_no_mutable_state_at_module_level(module: ModuleType) -> None:
    assert built.stage("inference") is not None  # also after a build
    assert mutable_state(module) == {}
