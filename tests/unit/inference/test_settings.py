"""Inference's settings name every port its worker listens on, so a taken one fails the
start naming its variable (shared/worker/ports.py)."""

from __future__ import annotations

import socket

import pytest

from services.inference.settings import InferenceSettings
from shared.worker.ports import Listener, PortTakenError, check_free


def test_grpc_and_metrics_are_named_on_the_grpc_host() -> None:
    settings = InferenceSettings(grpc_port=50123, metrics_port=9404)
    assert settings.listeners() == (
        Listener("STREAMRAG_INFERENCE_GRPC_PORT", "127.0.0.1", 50123,
                 "a free port the system picks"),
        Listener("STREAMRAG_INFERENCE_METRICS_PORT", "127.0.0.1", 9404))


def test_a_taken_grpc_port_names_its_setting() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(PortTakenError) as failed:
            check_free(InferenceSettings(grpc_port=port).listeners())
    assert str(failed.value).startswith(
        f"STREAMRAG_INFERENCE_GRPC_PORT={port}: cannot listen on 127.0.0.1:{port}: "
        "Address already in use")
    assert str(failed.value).endswith("or 0: a free port the system picks")
