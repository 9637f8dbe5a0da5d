"""Inference's settings name every port its worker listens on, so a taken one fails the
start naming its variable (shared/worker/ports.py)."""

from __future__ import annotations

import socket

import pytest
from pydantic import ValidationError

from services.inference.settings import InferenceSettings
from shared.settings import named
from shared.worker.ports import Listener, PortTakenError, check_free


def test_grpc_http_mcp_and_metrics_are_named_on_the_grpc_host() -> None:
    settings = InferenceSettings(grpc_port=50123, http_port=8123, mcp_port=8124,
                                 metrics_port=9404)
    assert settings.listeners() == (
        Listener("STREAMRAG_INFERENCE_GRPC_PORT", "127.0.0.1", 50123,
                 "a free port the system picks"),
        Listener("STREAMRAG_INFERENCE_HTTP_PORT", "127.0.0.1", 8123),
        Listener("STREAMRAG_INFERENCE_MCP_PORT", "127.0.0.1", 8124),
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


# --- settings grouped by concern: nested frozen groups under the same flat variable names ---

def test_a_groups_variables_keep_their_flat_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRAG_INFERENCE_GUARD_WINDOW_S", "12")
    monkeypatch.setenv("STREAMRAG_INFERENCE_GUARD_PROBES", '[{"question": "q?", "doc_id": "d"}]')
    monkeypatch.setenv("STREAMRAG_INFERENCE_JWT_LEEWAY_S", "3")
    monkeypatch.setenv("STREAMRAG_INFERENCE_JWT_AUDIENCE", "")  # compose's unset: None
    monkeypatch.setenv("STREAMRAG_INFERENCE_STATS_HOUR_STEP_S", "60")
    monkeypatch.setenv("STREAMRAG_INFERENCE_GRPC_PORT", "50124")  # a plain field beside them
    settings = InferenceSettings()
    assert (settings.guard.window_s, settings.guard.windows) == (12.0, 3)
    assert [(p.question, p.doc_id) for p in settings.guard.probes] == [("q?", "d")]
    assert (settings.jwt.leeway_s, settings.jwt.audience) == (3.0, None)
    assert (settings.stats.hour_step_s, settings.stats.minute_retention_s) == (60.0, 3600.0)
    assert settings.grpc_port == 50124
    assert settings.env_name("guard.window_s") == "STREAMRAG_INFERENCE_GUARD_WINDOW_S"


def test_a_group_is_frozen_and_flat_keywords_fold_into_it() -> None:
    settings = InferenceSettings(guard_window_s=5, guard={"windows": 4}, jwt_leeway_s=1)
    assert (settings.guard.window_s, settings.guard.windows, settings.jwt.leeway_s) == (5, 4, 1)
    with pytest.raises(ValidationError):
        settings.guard.window_s = 6  # type: ignore[misc]
    with pytest.raises(ValidationError):
        InferenceSettings(guard_window_seconds=5)  # not a field of the group, nor of the class


def test_a_bad_group_value_fails_naming_its_flat_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRAG_INFERENCE_GUARD_WINDOW_S", "0")
    with pytest.raises(ValidationError) as failed:
        InferenceSettings()
    error = named(failed.value)
    assert error is not None
    assert str(error).startswith("STREAMRAG_INFERENCE_GUARD_WINDOW_S: ")
