"""The encoder's tokenizer on the `tokenizers` library alone, without transformers.

transformers 5 imports torch as soon as a tokenizer is loaded (about 380 MB of resident
memory), so every process that only counts tokens (chunking) or feeds ONNX Runtime
(inference's query encoder) carried torch it never ran. `FastTokenizer` reads the model's
own tokenizer.json and answers the calls the mesh makes, with the same ids, offsets and
padding as the transformers tokenizer of the same files (tests/unit/shared/test_tokenizer.py).
Like any fast tokenizer it must not be called from two threads at once: one per user.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from tokenizers import Encoding, Tokenizer


class TextTokenizer(Protocol):
    """What chunking and clip_title call (this class, or a transformers tokenizer)."""

    model_max_length: int

    def __call__(self, text: str, *, add_special_tokens: bool = ...,
                 return_offsets_mapping: bool = ...) -> Any: ...


class FastTokenizer:
    """tokenizer.json behind the transformers call signature the mesh uses."""

    def __init__(self, model_path: Path) -> None:
        self.backend = Tokenizer.from_file(str(model_path / "tokenizer.json"))
        # The file's own truncation/padding (128, fixed) are defaults of another library;
        # each call says what it wants, as transformers does. Its pad id is kept.
        padding = self.backend.padding
        self.pad_id = int(padding["pad_id"]) if padding else (
            self.backend.token_to_id("[PAD]") or self.backend.token_to_id("<pad>") or 0)
        self.backend.no_truncation()
        self.backend.no_padding()
        self.model_max_length = 1 << 30

    def __call__(self, text: str | Sequence[str], *, add_special_tokens: bool = True,
                 truncation: bool = False, max_length: int | None = None,
                 padding: bool = False, return_offsets_mapping: bool = False,
                 return_tensors: str | None = None) -> dict[str, Any]:
        single = isinstance(text, str)
        texts = [text] if isinstance(text, str) else list(text)
        limit = max_length or self.model_max_length
        if truncation and limit < 1 << 30:
            self.backend.enable_truncation(limit)
        else:
            self.backend.no_truncation()
        encodings = self.backend.encode_batch(texts, add_special_tokens=add_special_tokens)
        if padding or return_tensors:
            return self._padded(encodings, return_tensors)
        out: dict[str, Any] = {
            "input_ids": [e.ids for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
        }
        if return_offsets_mapping:
            out["offset_mapping"] = [[tuple(o) for o in e.offsets] for e in encodings]
        return {k: v[0] for k, v in out.items()} if single else out

    def _padded(self, encodings: list[Encoding], tensors: str | None) -> dict[str, Any]:
        width = max((len(e.ids) for e in encodings), default=0)
        ids = np.full((len(encodings), width), self.pad_id, dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n], types[row, :n], mask[row, :n] = e.ids, e.type_ids, 1
        out = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
        if tensors == "pt":
            import torch  # only the ONNX export asks for torch tensors, and it runs torch

            return {k: torch.from_numpy(v) for k, v in out.items()}
        if tensors in (None, "np"):
            return out
        msg = f"return_tensors={tensors!r}: only 'np' and 'pt' are supported"
        raise ValueError(msg)
