"""Test-only fault injection, loaded by a mesh worker whose PYTHONPATH starts with this
folder (tests/integration/test_poison.py): chunking blocks the event loop for good on a
document whose id starts with STREAMRAG_TEST_HANG_DOC_PREFIX. Production never loads it."""

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
