"""The auditor's commands ask the broker what evidence it holds before reading it: in these
unit tests, a broker that holds the evidence topics and keeps redacted text forever."""

from __future__ import annotations

import pytest

from services.audit.documents import auditor
from services.audit.documents.evidence import Evidence


@pytest.fixture(autouse=True)
def evidence_kept_forever(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auditor, "read_evidence", lambda *_: Evidence(None))
