"""Encoder runtimes: which one runs, the ONNX graph's cache key, and the same vectors on both."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import pytest

from shared.encoder import onnx as onnx_encoder
from shared.encoder import runtime as encoder_runtime
from shared.encoder.onnx import graph_path, int8_path
from shared.encoder.runtime import EncoderSettings, choose, load_encoder

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
    # A process without torch (a lean worker) exports in a child, never in itself.
    def in_process(*_: object) -> None:
        raise AssertionError("exported in a process that forwent torch")

    with pytest.MonkeyPatch.context() as m:
        m.setitem(sys.modules, "torch", None)
        m.setattr(onnx_encoder, "export", in_process)
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


def test_a_process_may_forgo_torch_only_when_no_encoder_runs_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def settings(**kw: object) -> EncoderSettings:
        return EncoderSettings(model_cache_dir=tmp_path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(encoder_runtime, "_gpu_present", lambda: False)
    assert not settings(encoder_runtime="onnx").encoder_may_run_torch(None)
    assert not settings(encoder_runtime="onnx").encoder_may_run_torch(None, int8=True)
    assert settings(encoder_runtime="torch").encoder_may_run_torch(None)
    # A GPU node: "auto" may pick CUDA, which runs torch; a CPU-pinned encoder does not.
    monkeypatch.setattr(encoder_runtime, "_gpu_present", lambda: True)
    assert settings(encoder_runtime="onnx").encoder_may_run_torch(None)
    assert not settings(encoder_runtime="onnx", device="cpu").encoder_may_run_torch(None)
    # Without onnxruntime, load_encoder falls back to torch.
    monkeypatch.setattr(encoder_runtime, "onnx_available", lambda need_export: False)
    assert settings(encoder_runtime="onnx", device="cpu").encoder_may_run_torch(None)


def test_missing_onnxruntime_falls_back_to_torch(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(encoder_runtime, "onnx_available", lambda need_export: False)
    with caplog.at_level(logging.WARNING):
        encoder = load_encoder("onnx", "cpu", cache_dir=tmp_path)
    assert encoder.runtime == "torch"
    assert "onnxruntime (or onnx) is not installed" in caplog.text
    assert list(tmp_path.iterdir()) == []  # nothing exported


def test_groups_are_padded_from_one_tokenization(cache: Path) -> None:
    onnx = load_encoder("onnx", "cpu", threads=1, cache_dir=cache)
    whole = onnx.encode(TEXTS)
    # A budget of 8 padded tokens puts every text in a group of its own: each is padded
    # to its own length, and must still get the vector it gets in the batch.
    alone = onnx.encode(TEXTS, max_batch_tokens=8)
    assert np.allclose(whole, alone, atol=1e-5)
    twice = onnx.encode([TEXTS[1], TEXTS[0], TEXTS[1]])
    assert np.allclose(twice[0], twice[2]) and np.allclose(twice[0], whole[1], atol=1e-5)
    assert onnx.encode([]).shape == (0, 384)


def test_passes_side_by_side_give_the_vectors_of_one_thread(cache: Path) -> None:
    """Workers run the passes of one call on the one session at the same time."""
    one = load_encoder("onnx", "cpu", threads=1, cache_dir=cache)
    two = load_encoder("onnx", "cpu", threads=1, cache_dir=cache, workers=2)
    assert two.workers == 2 and two.pool is not None and one.pool is None
    texts = TEXTS * 3
    assert np.allclose(one.encode(texts), two.encode(texts), atol=1e-5)
    assert np.allclose(one.encode(texts, max_batch_tokens=16),
                       two.encode(texts, max_batch_tokens=16), atol=1e-5)


def test_int8_graph_is_quantized_once_and_stays_near_fp32(cache: Path) -> None:
    fp32 = load_encoder("onnx", "cpu", threads=1, cache_dir=cache)
    int8 = load_encoder("onnx", "cpu", threads=1, cache_dir=cache, int8=True)
    assert (fp32.dtype, int8.dtype) == ("float32", "int8")
    assert int8.graph == int8_path(fp32.graph) and int8.graph.exists()
    # Quantized weights: a quarter of the MatMul bytes (the 47 MB of embeddings stay fp32).
    assert int8.graph.stat().st_size < 0.75 * fp32.graph.stat().st_size
    a, b = fp32.encode(TEXTS), int8.encode(TEXTS)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(a * b, axis=1)
    assert float(cosines.min()) >= 0.95 and float(cosines.max()) < 0.99999  # moved, a little
    # Each text is still nearest its own fp32 vector.
    assert list(np.argmax(b @ a.T, axis=1)) == [0, 1, 2, 3]
    mtime = int8.graph.stat().st_mtime_ns
    again = load_encoder("onnx", "cpu", cache_dir=cache, int8=True)
    assert again.graph == int8.graph and int8.graph.stat().st_mtime_ns == mtime
    # torch ignores the flag.
    assert load_encoder("torch", "cpu", int8=True).runtime == "torch"


def test_side_by_side_first_loads_export_the_graph_once(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # One process loads embedding's and inference's encoders at once on a first start.
    import threading
    import time

    exports: list[Path] = []

    def slow_export(_: Path, target: Path) -> None:
        exports.append(target)
        time.sleep(0.3)  # the other loader arrives while this export runs
        target.write_bytes(b"graph")

    monkeypatch.setitem(sys.modules, "torch", object())  # torch loaded: in-process export
    monkeypatch.setattr(onnx_encoder, "export", slow_export)
    target = tmp_path / f"encoder-{tmp_path.name}.onnx"
    loaders = [threading.Thread(target=onnx_encoder.export_once, args=(tmp_path, target))
               for _ in range(2)]
    for t in loaders:
        t.start()
    for t in loaders:
        t.join()
    assert exports == [target] and target.read_bytes() == b"graph"
