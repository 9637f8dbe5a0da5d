"""The ledger is a stage object: its table, signers, node connection, chain ends and
reconciliation checkpoint live on the object a build returns, none in its modules."""

from __future__ import annotations

from types import ModuleType

import pytest

from services.ledger import agents, anchoring, queries
from shared.contract.query_audit import Tip
from tests.support import built
from tests.support.module_state import mutable_state


def test_two_builds_are_two_independent_stages() -> None:
    one, two = built.stage("ledger"), built.stage("ledger")
    assert one.app is not two.app and one.anchor_batches is not two.anchor_batches
    assert one.anchoring is not two.anchoring and one.queries is not two.queries
    assert one.queries.anchoring is one.anchoring  # both agents share the stage's node
    one.anchoring.client = object()  # type: ignore[assignment]
    one.queries.chains.tips[3] = Tip("ep", "ab" * 32, 7)
    assert two.anchoring.connected() is None and two.queries.chains.tips == {}
    assert one.anchor_batches.fun == one.anchor_each  # the agent is the stage's method


@pytest.mark.parametrize("module", [agents, anchoring, queries])
def test_the_stage_keeps_no_mutable_state_at_module_level(module: ModuleType) -> None:
    assert built.stage("ledger") is not None  # also after a build
    assert mutable_state(module) == {}
