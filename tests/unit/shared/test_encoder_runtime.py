"""Encoder runtimes: which one runs, the ONNX graph's cache key, and the same vectors on both."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from shared import encoder_runtime
from shared.encoder_runtime import choose, load_encoder
from shared.onnx_encoder import graph_path

pytest.importorskip("onnxruntime")

# Mixed lengths, so the batch pads: a graph that mishandled the mask would drift here.
TEXTS = ["disk full", "Rotating the broker logs freed the disk and usage fell to forty percent.",
         "lunch", "The checkout service returned HTTP 502 errors for ten minutes after a deploy "
         "until on-call rotated the expired TLS certificate on the gateway."]


def test_choose_runs_onnx_only_on_cpu_with_its_packages() -> None:
    assert choose("onnx", cuda=False, onnx_ready=True) == "onnx"
    assert choose("onnx", cuda=True, onnx_ready=True) == "torch"
    assert choose("onnx", cuda=False, onnx_ready=False) == "torch"
    assert choose("torch", cuda=False, onnx_ready=True) == "torch"


def test_graph_cache_key_follows_the_weights(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights-1")
    first = graph_path(model, tmp_path / "cache")
    assert first.parent == tmp_path / "cache" and first.suffix == ".onnx"
    assert graph_path(model, tmp_path / "cache") == first
    (model / "model.safetensors").write_bytes(b"weights-2")
    assert graph_path(model, tmp_path / "cache") != first


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


def test_onnx_matches_torch_and_is_exported_once(cache: Path) -> None:
    onnx = load_encoder("onnx", "cpu", threads=1, cache_dir=cache)
    torch = load_encoder("torch", "cpu")
    assert (onnx.runtime, torch.runtime) == ("onnx", "torch")
    exported = sorted(cache.glob("*.onnx"))
    assert len(exported) == 1 and onnx.dim == torch.dim == 384
    a, b = onnx.encode(TEXTS), torch.encode(TEXTS)
    assert a.shape == (4, 384) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(a * b, axis=1))) >= 0.9999
    # One text alone gives the vector it gets in the padded batch.
    assert float(a[2] @ onnx.encode([TEXTS[2]])[0]) >= 0.9999
    # A second load reuses the cached graph rather than exporting again.
    mtime = exported[0].stat().st_mtime_ns
    assert load_encoder("onnx", "cpu", cache_dir=cache).graph == exported[0]
    assert exported[0].stat().st_mtime_ns == mtime and sorted(cache.glob("*")) == exported


def test_missing_onnxruntime_falls_back_to_torch(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(encoder_runtime, "onnx_available", lambda need_export: False)
    with caplog.at_level(logging.WARNING):
        encoder = load_encoder("onnx", "cpu", cache_dir=tmp_path)
    assert encoder.runtime == "torch"
    assert "onnxruntime (or onnx) is not installed" in caplog.text
    assert list(tmp_path.iterdir()) == []  # nothing exported
