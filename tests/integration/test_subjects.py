"""`streamrag subjects` on the real one-process mesh: a document produced the way a user's
client does, with an e-mail and a phone number in it, is found by that e-mail in another
case and that number in another format, and not by another address; the index on the
broker holds neither value in clear."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest

from services.cli import main
from services.cli import subjects as cli_subjects
from services.cli.mesh import Endpoints
from shared.contract.topics import PII_SUBJECTS
from tests.support.mesh import produce, read_topic, uid
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
EMAIL, PHONE = "Marguerite.Okafor@Example.org", "+1 (415) 555-0143"


def subjects(mesh: Endpoints, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap}
    return subprocess.run([sys.executable, "-m", "services.cli.main", "subjects", *args],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


def test_a_person_is_found_however_written_and_nobody_else_is(onebox_mesh: Endpoints,
                                                              ) -> None:
    mesh, doc_id, other = onebox_mesh, uid("subjects"), uid("subjects-other")
    produce(mesh, [json.dumps({"id": doc_id, "source": "subjects", "title": "Callback",
                               "text": f"Please call {EMAIL} back on {PHONE} about the "
                                       f"refund."}).encode(),
                   json.dumps({"id": other, "source": "subjects",
                               "text": "The refund desk opens at nine."}).encode()])

    def found() -> dict[str, Any] | None:
        done = subjects(mesh, "marguerite.okafor@EXAMPLE.ORG", "--json")
        return json.loads(done.stdout) if done.returncode == 0 else None
    answer = eventually(found, "the document in the subject index", timeout_s=240)
    [match] = answer["matches"]
    assert (match["doc_id"], match["version"]) == (doc_id, 1)
    assert match["batch_id"].split("/")[1] == "docs.normalized.v1"  # its audit batch

    by_phone = subjects(mesh, "415.555.0143", "--kind", "phone")
    assert by_phone.returncode == 0, by_phone.stdout + by_phone.stderr
    assert [line.split()[:2] for line in by_phone.stdout.splitlines()[1:]] == [[doc_id, "1"]]
    assert match["batch_id"] in by_phone.stdout

    nobody = subjects(mesh, "marguerite.okafor@example.com")
    assert nobody.returncode == 1 and doc_id not in nobody.stdout, nobody.stdout
    as_a_name = subjects(mesh, "marguerite.okafor@example.org", "--kind", "name")
    assert as_a_name.returncode == 1  # an e-mail is keyed as an e-mail only

    index = [r for r in read_topic(mesh, "pii.subjects.v1") if r.key in (doc_id.encode(),
                                                                          other.encode())]
    held = {json.loads(r.value)["doc_id"]: json.loads(r.value) for r in index}
    assert set(held) == {doc_id, other} and len(index) == 2
    assert held[doc_id]["kinds"] == {"email": 1, "phone": 1} and held[other]["subjects"] == []
    raw = b"".join(r.value for r in index).lower()
    for clear in (EMAIL, "okafor", "example.org", "555-0143", "4155550143"):
        assert clear.lower().encode() not in raw


def test_a_broker_without_the_index_is_said_in_one_sentence(onebox_mesh: Endpoints,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str],
                                                            ) -> None:
    """As on a mesh from before the index: the topic is not there (another name stands in
    for it on this broker, which has it), so the command answers 2 and says why."""
    absent = replace(PII_SUBJECTS, name=uid("pii.subjects.absent"))
    monkeypatch.setattr(cli_subjects, "PII_SUBJECTS", absent)
    monkeypatch.setenv("STREAMRAG_KAFKA_BOOTSTRAP", onebox_mesh.bootstrap)
    assert main.main(["subjects", "anyone@example.org"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"streamrag subjects: {absent.name} is not on the "
                                        f"broker at {onebox_mesh.bootstrap}: ")
    assert len(err.strip().splitlines()) == 1
