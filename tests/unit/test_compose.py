"""docker-compose.yml kept honest without an engine: commands, env vars, topics, and the
broker's principals and ACLs vs the code."""

from __future__ import annotations

import json
import re
from pathlib import Path

from shared.cli.main import HANDLERS
from shared.contract import acls
from shared.contract.audit_signing import AuditSignerSettings
from shared.contract.retention import AuditRetentionSettings
from shared.contract.topics import SERVICES
from shared.settings import KafkaSettings, ProcessSettings
from tests.support.compose import (
    ADMIN_PASSWORD,
    AUDIT_KEY,
    PASSWORDS,
    ROOT,
    SECRETS,
    compose,
    resolved,
)
from tests.support.settings_env import known_env_vars


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


def test_the_topics_job_keeps_the_audit_evidence_as_long_as_the_setting_says() -> None:
    job = resolved("docker-compose.yml")["services"]["topics"]["environment"]
    assert AuditRetentionSettings(retention_ms=job["STREAMRAG_AUDIT_RETENTION_MS"]) == \
        AuditRetentionSettings()  # by default: forever
    out = compose("config", "--format", "json",
                  env={**SECRETS, "STREAMRAG_AUDIT_RETENTION_MS": "7776000000"})
    job = json.loads(out.stdout)["services"]["topics"]["environment"]
    assert AuditRetentionSettings(
        retention_ms=job["STREAMRAG_AUDIT_RETENTION_MS"]).retention_ms == 7_776_000_000


def test_every_service_restarts_when_it_exits_and_the_topics_job_runs_once() -> None:
    for files in (("docker-compose.yml",), ("docker-compose.yml", "docker-compose.gpu.yml")):
        services = resolved(*files)["services"]
        policies = {name: svc.get("restart") for name, svc in services.items()}
        assert policies.pop("topics") == "no"  # one-shot: the others wait for it to succeed
        assert policies.pop("kafka-acls") == "no"
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
    assert "STREAMRAG_DATA_DIR" in known_env_vars()
    assert "STREAMRAG_INGEST_DATA_DIR" not in known_env_vars()  # one name for every service


def test_every_data_volume_is_mounted_where_its_service_keeps_state() -> None:
    services = resolved("docker-compose.yml", "docker-compose.gpu.yml")["services"]
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ").split()
    assert "STREAMRAG_DATA_DIR=/data" in dockerfile
    stateful = {n for n, s in services.items() if s.get("image") == "streamrag:latest"
                and s.get("volumes")}
    assert {"ingest", "redaction", "retrieval", "ledger"} <= stateful
    for name in stateful:
        svc = services[name]
        data_dir = ProcessSettings(data_dir=svc["environment"]["STREAMRAG_DATA_DIR"]).data_dir
        assert [Path(v["target"]) for v in svc["volumes"]] == [data_dir], name


def test_the_broker_takes_only_sasl_and_denies_what_no_acl_allows() -> None:
    env = resolved("docker-compose.yml")["services"]["kafka"]["environment"]
    protocols = dict(p.split(":") for p in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(protocols.values()) == {"SASL_PLAINTEXT"}
    listeners = {x.split("://")[0] for x in env["KAFKA_LISTENERS"].split(",")}
    assert listeners == set(protocols)
    assert env["KAFKA_AUTHORIZER_CLASS_NAME"].endswith(".StandardAuthorizer")
    assert env["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"] == "false"
    assert env["KAFKA_SUPER_USERS"] == f"User:{acls.ADMIN}"
    assert env["KAFKA_SASL_ENABLED_MECHANISMS"].split(",") == [acls.SERVICE_MECHANISM, "PLAIN"]
    assert env["KAFKA_OPTS"] == "-Djava.security.auth.login.config=/tmp/kafka_jaas.conf"
    assert env[ADMIN_PASSWORD] == PASSWORDS[ADMIN_PASSWORD]  # for its JAAS file, at start


def test_every_service_signs_in_as_its_own_principal() -> None:
    services = resolved("docker-compose.yml", "docker-compose.gpu.yml")["services"]
    for name in SERVICES:
        env = services[name]["environment"]
        assert (env["STREAMRAG_KAFKA_SECURITY_PROTOCOL"], env["STREAMRAG_KAFKA_SASL_MECHANISM"],
                env["STREAMRAG_KAFKA_SASL_USERNAME"], env["STREAMRAG_KAFKA_SASL_PASSWORD"]) == (
            "SASL_PLAINTEXT", acls.SERVICE_MECHANISM, name, f"{name}pw")
        KafkaSettings(**{k.removeprefix("STREAMRAG_KAFKA_").lower(): v for k, v in env.items()
                         if k.startswith("STREAMRAG_KAFKA_")})  # the service would accept it
    job = services["topics"]["environment"]
    assert (job["STREAMRAG_KAFKA_SASL_MECHANISM"], job["STREAMRAG_KAFKA_SASL_USERNAME"],
            job["STREAMRAG_KAFKA_SASL_PASSWORD"]) == ("PLAIN", acls.ADMIN, "adminpw")


def test_the_acls_job_applies_the_generated_script_before_any_topic_exists() -> None:
    config = resolved("docker-compose.yml")
    job = config["services"]["kafka-acls"]
    (mounted,) = job["configs"]
    assert job["entrypoint"] == ["/bin/sh", mounted["target"]]
    assert Path(config["configs"][mounted["source"]]["file"]) == ROOT / "deploy" / "kafka-acls.sh"
    assert job["image"] == config["services"]["kafka"]["image"]  # it has the Kafka tools
    assert set(PASSWORDS) <= set(job["environment"])
    assert job["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert config["services"]["topics"]["depends_on"] == {
        "kafka-acls": {"condition": "service_completed_successfully", "required": True}}


def test_no_password_is_written_down_and_none_has_a_default() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    for var in SECRETS:
        uses = re.findall(r"\$\{" + var + r"([^}]*)\}", text)
        assert uses and all(u.startswith(":?") for u in uses), var  # required, no default
    assert not re.search(r"PASSWORD: (?!\$\{)", text)
    missing = compose("config", "--format", "json",
                      env={k: v for k, v in SECRETS.items() if "INGEST" not in k})
    assert not missing.stdout.strip().startswith("{")
    assert "STREAMRAG_KAFKA_PASSWORD_INGEST" in missing.stderr


def test_audit_records_are_signed_with_a_key_of_the_operator_not_the_dev_key() -> None:
    from eth_account import Account

    from services.redaction.settings import RedactionSettings
    from shared.contract.audit_signing import DEV_SIGNER
    services = resolved("docker-compose.yml")["services"]
    key = services["redaction"]["environment"]["STREAMRAG_REDACTION_AUDIT_SIGNING_KEY"]
    assert RedactionSettings(audit_signing_key=key).audit_signing_key.get_secret_value() == \
        AUDIT_KEY
    signers = services["ledger"]["environment"]["STREAMRAG_AUDIT_SIGNERS"]
    assert AuditSignerSettings(signers=json.loads(signers)).known() == {"0xa"}
    assert Account.from_key(AUDIT_KEY).address != DEV_SIGNER
    holders = {n for n, s in services.items()
               if "STREAMRAG_REDACTION_AUDIT_SIGNING_KEY" in s.get("environment", {})}
    assert holders == {"redaction"}  # the key stays with redaction
