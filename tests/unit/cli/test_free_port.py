"""free_port: a port for a listener started later, out of the way of outgoing connections."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest

from services.cli import mesh
from services.cli.mesh import ephemeral_low, free_port


def test_the_port_is_below_the_ephemeral_range_and_free() -> None:
    low = ephemeral_low()
    ports = {free_port() for _ in range(20)}
    if low > mesh.LISTEN_PORTS.start:
        assert all(mesh.LISTEN_PORTS.start <= p < low for p in ports)
    assert len(ports) > 1  # picked at random, so two suites side by side rarely meet
    with socket.socket() as s:  # still free: nothing held it open
        s.bind(("127.0.0.1", ports.pop()))


def test_a_port_in_use_is_never_given(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        monkeypatch.setattr(mesh, "LISTEN_PORTS", range(taken, taken + 1))
        monkeypatch.setattr(mesh, "ephemeral_low", lambda: 65536)
        assert free_port() != taken  # the only candidate is taken: the kernel's own choice


def test_the_range_is_read_from_the_kernel(tmp_path: Path) -> None:
    (tmp_path / "range").write_text("40000\t60999\n")
    assert ephemeral_low(tmp_path / "range") == 40000
    (tmp_path / "bad").write_text("")
    assert ephemeral_low(tmp_path / "bad") == mesh.LISTEN_PORTS.stop
    assert ephemeral_low(tmp_path / "missing") == mesh.LISTEN_PORTS.stop
