"""The light tokenizer gives what the transformers tokenizer of the same files gives."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoTokenizer

from shared.encoder.model import default_model_path, load_tokenizer
from shared.worker.lean_imports import forgo

TEXTS = [
    "why did checkout fail",
    "Café naïve façade — Zürich's Straße, 東京 and emoji 🙂 in one line",
    "  leading and trailing   spaces\tand a tab\nand a newline  ",
    "HTTP 502 at 14:05 UTC; card 4111-1111-1111-1111, user@example.com",
    " ".join(f"word{i}" for i in range(400)),  # longer than any max_length below
    "",
]


@pytest.fixture(scope="module")
def reference() -> object:
    return AutoTokenizer.from_pretrained(str(default_model_path()))


@pytest.mark.parametrize("text", TEXTS)
def test_ids_and_offsets_without_special_tokens(reference: object, text: str) -> None:
    ours = load_tokenizer()(text, add_special_tokens=False, return_offsets_mapping=True)
    theirs = reference(text, add_special_tokens=False, return_offsets_mapping=True)
    assert ours["input_ids"] == theirs["input_ids"]
    assert [tuple(o) for o in ours["offset_mapping"]] == [tuple(o) for o in
                                                          theirs["offset_mapping"]]


def test_truncated_lengths_count_special_tokens(reference: object) -> None:
    ours = load_tokenizer()(TEXTS, truncation=True, max_length=256)
    theirs = reference(TEXTS, truncation=True, max_length=256)
    assert ours["input_ids"] == theirs["input_ids"]
    assert max(len(ids) for ids in ours["input_ids"]) == 256


@pytest.mark.parametrize("max_length", [16, 256])
def test_padded_batches_as_numpy(reference: object, max_length: int) -> None:
    ours = load_tokenizer()(TEXTS, padding=True, truncation=True, max_length=max_length,
                            return_tensors="np")
    theirs = reference(TEXTS, padding=True, truncation=True, max_length=max_length,
                       return_tensors="np")
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        assert ours[name].dtype == np.int64
        np.testing.assert_array_equal(ours[name], theirs[name])


def test_the_files_own_128_token_truncation_and_padding_are_not_applied() -> None:
    ids = load_tokenizer()(TEXTS[4], add_special_tokens=False)["input_ids"]
    assert len(ids) > 400  # every wordN is several pieces; none cut at 128


def test_a_forgone_module_fails_to_import_and_loaded_ones_stay() -> None:
    import sys

    name = "streamrag_never_installed_probe"
    try:
        assert forgo(name, "numpy") == [name]  # numpy is loaded already: left alone
        with pytest.raises(ImportError):
            __import__(name)
        assert sys.modules["numpy"] is np
    finally:
        sys.modules.pop(name, None)
