"""Keep a worker process from loading deep-learning libraries it never runs.

spaCy's thinc and Presidio's device check import torch whenever it is installed, and
Presidio imports transformers for a recognizer the mesh does not use: about 340 MB of
resident memory in the redaction process, which runs no torch model. A module set to
None in `sys.modules` makes its import raise ImportError, the branch those libraries
already take when the package is absent. Only a process's entry point calls `forgo`, for
what none of its services needs (services/<name>/__main__.py): redaction and chunking
always, embedding, inference and the one-process worker when their settings run no torch
model (`may_run_torch`: ONNX on CPU, no generator or reranker; the ONNX export then runs
in a child process, shared/encoder/onnx.py).

A generator loaded on demand (a CPU's default) needs torch only when a call first asks for
a generated answer: the worker forgoes torch while it builds and starts (so spaCy and
Presidio take their torch-less branch, as in redaction), and the generator's loader
`allow`s it again just before it imports it.
"""

from __future__ import annotations

import sys

DEEP_LEARNING = ("torch", "transformers")


def forgo(*modules: str) -> list[str]:
    """Make later imports of `modules` fail as if not installed; the ones already loaded
    are left alone (and not returned)."""
    blocked = [m for m in modules if m not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    return blocked


def allow(*modules: str) -> list[str]:
    """Undo `forgo` for `modules`: a later import loads them. Returns the ones lifted."""
    lifted = [m for m in modules if m in sys.modules and sys.modules[m] is None]
    for name in lifted:
        del sys.modules[name]
    return lifted
