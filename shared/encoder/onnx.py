"""The sentence encoder on ONNX Runtime (CPU): the same weights, exported once, pooled in-graph.

The graph is exported from the torch model at first use (torch + onnx needed then, not
after; in a child process unless torch is loaded already, so a worker that runs no torch
model never carries it) with mean pooling and L2 normalisation inside it, and cached
under a data dir, keyed by a hash of the weights and the export code's version, so a
changed model never reuses a stale graph. Exports of one graph on one machine take turns
(a lock file in the temp dir; the later one finds the graph made), and each writes a
private temp file and renames it into place. Inputs are tokenized once, length-sorted
and grouped by a padded-token budget, as on torch; each group is padded to its own longest
input (a batch of short questions runs at their length, never at max_length).

`int8=True` runs a dynamically quantized copy of that graph (int8 weights of every MatMul,
per output channel; activations quantized per call; onnxruntime.quantization), made once
beside it and cached the same way. Its vectors move slightly (cosine to fp32 >= 0.95), so
it is meant for questions only, never for the stored chunk vectors.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from shared.batching.padding import encode_in_groups
from shared.encoder.model import MODEL_ID, default_model_path, load_tokenizer

log = logging.getLogger(__name__)
EXPORT_VERSION = 1  # bump when the exported graph changes (inputs, pooling, opset)
QUANTIZE_VERSION = 1  # bump when the quantization recipe below changes
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def graph_path(model_path: Path, cache_dir: Path) -> Path:
    """Where the graph of `model_path`'s weights is cached: named by their hash."""
    digest = hashlib.sha256(f"v{EXPORT_VERSION}".encode())
    for name in ("model.safetensors", "config.json"):
        with (model_path / name).open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return cache_dir / f"encoder-{digest.hexdigest()[:16]}.onnx"


def export(model_path: Path, target: Path) -> None:
    """Export the model with pooling to `target` (atomically: temp file, then rename)."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    model = AutoModel.from_pretrained(str(model_path), dtype=torch.float32).eval()

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    sample = load_tokenizer(model_path)(["warm-up", "a second sample"], padding=True,
                                        return_tensors="pt")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".onnx.tmp", dir=target.parent)
    os.close(fd)
    try:
        axes = {name: {0: "batch", 1: "tokens"} for name in INPUTS}
        # The tracer warns about branches on shapes that are constant for an encoder (no
        # cache, no causal mask); the cosine test against torch is what checks the graph.
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(Pooled(), tuple(sample[n] for n in INPUTS), tmp,
                              input_names=list(INPUTS), output_names=["embedding"],
                              dynamic_axes={**axes, "embedding": {0: "batch"}},
                              opset_version=OPSET, dynamo=False)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def export_once(model_path: Path, target: Path) -> None:
    """`export` unless `target` exists, one exporter at a time per graph on this machine
    (in one process, embedding and inference load the encoder side by side at start-up).
    In this process if torch is loaded already, else in a child: importing torch costs a
    worker ~340 MB of resident memory for the rest of its life."""
    if sys.modules.get("torch") is not None:
        made_once(target, lambda: export(model_path, target))
    else:
        made_once(target, lambda: _export_in_child(model_path, target))


def made_once(target: Path, make: Callable[[], None]) -> None:
    """`make()` unless `target` exists, one maker at a time per file on this machine (a lock
    file per target: each thread's own open of it, so threads of one process wait too)."""
    lock = Path(tempfile.gettempdir()) / f"streamrag-{target.name}.lock"
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        if not target.exists():
            make()


def _export_in_child(model_path: Path, target: Path) -> None:
    root = Path(__file__).resolve().parents[1]  # the folder that holds `shared`
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)}
    subprocess.run([sys.executable, "-m", "shared.encoder.onnx",
                    str(model_path.resolve()), str(target.resolve())],
                   check=True, env=env, cwd=root)


def int8_path(graph: Path) -> Path:
    """Where the int8 copy of `graph` is cached (named after it and the recipe's version)."""
    return graph.with_name(f"{graph.stem}-int8v{QUANTIZE_VERSION}.onnx")


def quantize(graph: Path, target: Path) -> None:
    """Write an int8 copy of `graph` to `target` (atomically: temp file, then rename):
    dynamic quantization of the MatMul weights (per output channel); embeddings, layer
    norms and pooling stay fp32."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fd, tmp = tempfile.mkstemp(suffix=".onnx.tmp", dir=target.parent)
    os.close(fd)
    # The quantizer logs a line per tensor (and advice) through the root logger: hundreds
    # of lines in the worker's log for a step that succeeds.
    previous = logging.root.manager.disable
    logging.disable(max(previous, logging.WARNING))
    try:
        quantize_dynamic(str(graph), tmp, weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])
        os.replace(tmp, target)
    finally:
        logging.disable(previous)
        if os.path.exists(tmp):
            os.unlink(tmp)


def session_options(threads: int) -> Any:
    """The session's options: `threads` intra-op threads (0: one per physical core), one
    inter-op thread, and no spinning."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Spinning threads keep a core busy after each call: on a machine shared by several
    # stages that is stolen time, and on an idle mesh it is idle CPU.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


class OnnxEncoder:
    runtime = "onnx"
    device = "cpu"
    dtype = "float32"

    def __init__(self, cache_dir: Path, model_path: Path | None = None, threads: int = 0,
                 max_length: int = 256, model_id: str = MODEL_ID, int8: bool = False,
                 workers: int = 1) -> None:
        import onnxruntime as ort

        path = model_path or default_model_path()
        graph = graph_path(path, cache_dir)
        if not graph.exists():
            log.info("exporting the encoder to ONNX at %s (once per model)", graph)
            export_once(path, graph)
        if int8:
            quantized = int8_path(graph)
            if not quantized.exists():
                log.info("quantizing the encoder to int8 at %s (once per model)", quantized)
                # embedding and inference of one process quantizing side by side wrote a
                # graph the quantizer then could not read ("no ai.onnx domain")
                made_once(quantized, lambda: quantize(graph, quantized))
            graph = quantized
        self.session = ort.InferenceSession(str(graph), session_options(threads),
                                            providers=["CPUExecutionProvider"])
        self.graph, self.dtype = graph, "int8" if int8 else "float32"
        self.tokenizer = load_tokenizer(path)
        self.pad_id = self.tokenizer.pad_id
        self.model_id, self.max_length = model_id, max_length
        self.dim = int(self.session.get_outputs()[0].shape[1])
        # Forward passes of one encode() call run on this many threads side by side, each a
        # run of the one session (weights loaded once). With one intra-op thread each, a
        # pass never waits for another thread, so a core taken by another stage slows one
        # pass instead of stalling them all (shared/batching/padding.encode_in_groups).
        self.workers = workers if workers > 0 else usable_cores()
        self.pool = (ThreadPoolExecutor(self.workers, thread_name_prefix="onnx-pass")
                     if self.workers > 1 else None)

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        return [len(ids) for ids in enc["input_ids"]]

    def encode(self, texts: Sequence[str], max_batch_tokens: int = 8192) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text, in input order."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Tokenized once: the lengths group the texts, the same ids are padded per group.
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        tokens = {t: (ids, types) for t, ids, types in zip(
            texts, enc["input_ids"], enc["token_type_ids"], strict=True)}
        lengths = [len(ids) for ids in enc["input_ids"]]

        def forward(group: list[str]) -> np.ndarray:
            return self._run([tokens[t] for t in group])
        return encode_in_groups(texts, lengths, max_batch_tokens, self.dim, forward,
                                self.pool, self.workers)

    def _run(self, rows: list[tuple[list[int], list[int]]]) -> np.ndarray:
        """One forward pass over token rows, right-padded to the longest of them."""
        longest = max(len(ids) for ids, _ in rows)
        ids = np.full((len(rows), longest), self.pad_id, dtype=np.int64)
        types = np.zeros((len(rows), longest), dtype=np.int64)
        mask = np.zeros((len(rows), longest), dtype=np.int64)
        for i, (row_ids, row_types) in enumerate(rows):
            ids[i, :len(row_ids)], types[i, :len(row_types)] = row_ids, row_types
            mask[i, :len(row_ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)


if __name__ == "__main__":  # export_once's child: python -m shared.encoder.onnx MODEL TARGET
    export(Path(sys.argv[1]), Path(sys.argv[2]))
