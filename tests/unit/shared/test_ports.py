"""A port a worker must listen on and cannot fails its start naming the setting, before the
Faust app starts; what the worker will listen on is what its servers really bind."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings
from shared.worker import metrics, ports, runner
from shared.worker.ports import Listener, PortTakenError, check_free


class DemoSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_DEMO_", frozen=True)

    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0


@pytest.fixture
def listening() -> Iterator[int]:
    """A port a running worker's /metrics listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_listening_port_fails_naming_the_setting_and_the_port(listening: int) -> None:
    with pytest.raises(PortTakenError) as failed:
        check_free([Listener("STREAMRAG_DEMO_METRICS_PORT", "127.0.0.1", listening)])
    assert str(failed.value) == (
        f"STREAMRAG_DEMO_METRICS_PORT={listening}: cannot listen on 127.0.0.1:{listening}: "
        "Address already in use (another worker or process holds it); set "
        "STREAMRAG_DEMO_METRICS_PORT to a free port, or 0: not served")


def test_a_grpc_servers_port_is_taken_too() -> None:
    """gRPC listens with SO_REUSEPORT; a second server would share the port silently."""
    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(PortTakenError, match=f"STREAMRAG_INFERENCE_GRPC_PORT={port}: "):
            check_free([Listener("STREAMRAG_INFERENCE_GRPC_PORT", "127.0.0.1", port)])
    finally:
        server.stop(None)


def test_a_port_left_in_time_wait_by_a_stopped_worker_is_free() -> None:
    """A restart right after the worker stopped: its closed connections hold no port."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as HTTP servers do
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server's side closes first: its end goes to TIME_WAIT
        client.close()
    assert ports.bind_error("127.0.0.1", port) is None
    check_free([Listener("STREAMRAG_DEMO_METRICS_PORT", "127.0.0.1", port)])


def test_port_zero_is_never_taken(listening: int) -> None:
    check_free([Listener("STREAMRAG_DEMO_METRICS_PORT", "127.0.0.1", 0)])


@pytest.fixture
def fresh_server(monkeypatch: pytest.MonkeyPatch) -> metrics.Server:
    server = metrics.Server()
    monkeypatch.setattr(metrics, "server", server)
    for name in ("STREAMRAG_WATCHDOG_METRICS_PORT", "STREAMRAG_DEMO_METRICS_PORT"):
        monkeypatch.delenv(name, raising=False)
    return server


def test_the_metrics_port_checked_is_the_one_served_named_by_its_service(
        fresh_server: metrics.Server) -> None:
    demo = DemoSettings(metrics_port=9301)
    fresh_server.want(demo.metrics_host, 9301)  # what export_counts asks for
    fresh_server.want("127.0.0.1", 9302)  # a second hosted stage's: never served
    assert runner.listeners([demo]) == [
        Listener("STREAMRAG_DEMO_METRICS_PORT", "127.0.0.1", 9301)]
    assert fresh_server.planned() == ("127.0.0.1", 9301)


def test_the_watchdogs_metrics_port_comes_first(fresh_server: metrics.Server,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRAG_WATCHDOG_METRICS_PORT", "9303")
    demo = DemoSettings(metrics_port=9301)
    fresh_server.want(demo.metrics_host, 9301)
    assert runner.listeners([demo]) == [
        Listener("STREAMRAG_WATCHDOG_METRICS_PORT", "127.0.0.1", 9303)]


def test_no_metrics_port_no_listener(fresh_server: metrics.Server) -> None:
    assert runner.listeners([DemoSettings()]) == []
