"""The idle-aware fetch wait: short while traffic flows, the idle wait after a quiet spell."""

from __future__ import annotations

from shared.fetch_wait import IdleAwareWait


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_short_while_busy_idle_after_the_quiet_spell_and_short_again_on_traffic() -> None:
    clock = Clock()
    wait = IdleAwareWait(idle_ms=200, idle_after_s=5.0, clock=clock)
    assert wait.wait_ms(10) == 10  # starting up counts as traffic
    clock.now += 4.9
    assert wait.wait_ms(10) == 10
    clock.now += 0.2
    assert wait.wait_ms(10) == 200
    wait.traffic()
    assert wait.wait_ms(10) == 10
    assert wait.wait_ms(50) == 50  # each consumer keeps its own configured wait


def test_the_idle_wait_never_shortens_a_longer_configured_wait() -> None:
    clock = Clock()
    wait = IdleAwareWait(idle_ms=200, idle_after_s=1.0, clock=clock)
    clock.now += 2
    assert wait.wait_ms(500) == 500
