"""Test-only fault injection, loaded by a mesh worker whose PYTHONPATH starts with this
folder: chunking blocks the event loop for good on a document whose id starts with
STREAMRAG_TEST_HANG_DOC_PREFIX (tests/integration/test_poison.py); inference delays the
calls of the variants STREAMRAG_TEST_DELAY_FILE names (the session mesh's SLO guard tests).
Each fault is off unless its variable is set. Production never loads it."""

from __future__ import annotations

import os
import time

_PREFIX = os.environ.get("STREAMRAG_TEST_HANG_DOC_PREFIX")

if _PREFIX:
    from typing import Any

    from services.chunking.documents import DocumentChunker

    _chunk = DocumentChunker.chunk

    def _hanging_chunk(self: DocumentChunker, doc: Any, *args: Any, **kwargs: Any) -> Any:
        if doc.doc_id.startswith(_PREFIX):
            time.sleep(3600)  # on the event loop: nothing else in the worker runs
        return _chunk(self, doc, *args, **kwargs)

    DocumentChunker.chunk = _hanging_chunk  # type: ignore[method-assign]

# Inference answers late per variant: STREAMRAG_TEST_DELAY_FILE names a JSON file of
# {variant: seconds} ("*": every variant), read at each routed call, so a test can slow the
# whole machine or hang one variant while the mesh runs (tests/integration/
# test_slo_guard_fail_safe.py). The delay sits where the call's search starts, inside the
# call as the guard watches it; the guard's own probes go round it.
_DELAYS = os.environ.get("STREAMRAG_TEST_DELAY_FILE")

if _DELAYS:
    import asyncio
    import importlib.abc
    import importlib.machinery
    import json
    import sys
    from pathlib import Path
    from types import ModuleType
    from typing import Any

    _PIPELINE = "services.inference.pipeline"

    def _delay(variant: str) -> float:
        try:
            delays = json.loads(Path(_DELAYS).read_text())
        except (OSError, ValueError):
            return 0.0
        return float(delays.get(variant, delays.get("*", 0.0)))

    def _slow_down(module: ModuleType) -> None:
        pipeline = module.QueryPipeline
        search = pipeline.search

        async def _late_search(self: Any, params: Any, *args: Any, **kwargs: Any) -> Any:
            served = params.served
            if (seconds := _delay(served.variant if served else "")) > 0:
                await asyncio.sleep(seconds)
            return await search(self, params, *args, **kwargs)

        pipeline.search = _late_search

    class _AfterImport(importlib.abc.MetaPathFinder):
        """Patches the query pipeline's module right after it is first imported."""

        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            if name != _PIPELINE:
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            run = spec.loader.exec_module

            def exec_module(module: ModuleType) -> None:
                run(module)
                _slow_down(module)

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, _AfterImport())
