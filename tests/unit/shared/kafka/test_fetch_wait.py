"""The idle-aware fetch wait: short while traffic flows, the idle wait after a quiet spell."""

from __future__ import annotations

from shared.kafka.fetch_wait import IdleAwareWait


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


def test_traffic_in_one_process_shortens_the_wait_of_another(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Processes of one mesh share the activity file: ingest sees a record, redaction's
    next fetch is short although redaction itself saw nothing for a long time."""
    from shared.kafka.fetch_wait import TOUCH_EVERY_S, SharedActivity

    wall = Clock()
    mono_a, mono_b = Clock(), Clock()
    path = tmp_path / "activity"
    a = IdleAwareWait(200, 5.0, clock=mono_a, shared=SharedActivity(path, clock=wall))
    b = IdleAwareWait(200, 5.0, clock=mono_b, shared=SharedActivity(path, clock=wall))
    for c in (wall, mono_a, mono_b):
        c.now += 60
    assert (a.wait_ms(10), b.wait_ms(50)) == (200, 200)  # no file yet: both idle
    a.traffic()
    assert path.exists()
    assert (a.wait_ms(10), b.wait_ms(50)) == (10, 50)
    for c in (wall, mono_a, mono_b):
        c.now += 5.1
    assert (a.wait_ms(10), b.wait_ms(50)) == (200, 200)  # quiet again everywhere
    # A busy process writes the file at most every TOUCH_EVERY_S.
    b.traffic()
    stamp = path.stat().st_mtime
    wall.now += TOUCH_EVERY_S / 2
    b.traffic()
    assert path.stat().st_mtime == stamp
    wall.now += TOUCH_EVERY_S
    b.traffic()
    assert abs(path.stat().st_mtime - wall.now) < 1e-3


def test_a_missing_activity_dir_only_means_idle(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from shared.kafka.fetch_wait import SharedActivity

    clock = Clock()
    shared = SharedActivity(tmp_path / "gone" / "activity", clock=clock)
    wait = IdleAwareWait(200, 5.0, clock=clock, shared=shared)
    wait.traffic()  # cannot write: no error
    clock.now += 10
    assert wait.wait_ms(10) == 200
