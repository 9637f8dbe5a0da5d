"""docker-compose.yml kept honest without an engine: commands, env vars, topics, and the
broker's principals and ACLs vs the code."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from services.cli.main import HANDLERS
from shared.contract import acls
from shared.contract.audit_signing import AuditSignerSettings
from shared.contract.retention import AuditRetentionSettings
from shared.contract.topics import SERVICES
from shared.settings import KafkaSettings, PartitionSettings, ProcessSettings
from tests.support.compose import (
    ADMIN_PASSWORD,
    AUDIT_KEY,
    PASSWORDS,
    ROOT,
    SECRETS,
    compose,
    resolved,
)
from tests.support.settings_env import known_env_vars, read_under

KRAFT = ("docker-compose.yml", "docker-compose.kraft.yml")  # the replicated-Kafka override


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
        if cmd[:3] == ["python", "-m", "services.cli.main"]:
            assert cmd[3] in HANDLERS


def test_every_env_var_is_read_by_a_settings_class() -> None:
    known = known_env_vars()
    services = {**resolved(*KRAFT)["services"],
                **resolved("docker-compose.yml", "docker-compose.gpu.yml")["services"]}
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
    for files in (("docker-compose.yml",), ("docker-compose.yml", "docker-compose.gpu.yml"),
                  KRAFT):
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
        env = svc["environment"]
        data_dir = ProcessSettings(data_dir=env["STREAMRAG_DATA_DIR"]).data_dir
        # The data-key store is its own volume, shared by the stages that seal and open.
        keys = [Path(env["STREAMRAG_KEYS_PATH"]).parent] if "STREAMRAG_KEYS_PATH" in env else []
        wanted = [data_dir] if name not in ("chunking", "embedding") else []
        assert [Path(v["target"]) for v in svc["volumes"]] == wanted + keys, name


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
        read_under(KafkaSettings, env)  # the service would accept it
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


def test_the_subject_index_is_keyed_with_a_key_of_the_operator_not_the_dev_key() -> None:
    from services.redaction.settings import RedactionSettings
    from shared.contract.subjects import DEV_SUBJECT_KEY
    services = resolved("docker-compose.yml")["services"]
    key = services["redaction"]["environment"]["STREAMRAG_REDACTION_SUBJECT_KEY"]
    assert RedactionSettings(subject_key=key).subject_key.get_secret_value() == "e" * 64
    assert key != DEV_SUBJECT_KEY
    holders = {n for n, s in services.items()
               if "STREAMRAG_REDACTION_SUBJECT_KEY" in s.get("environment", {})}
    assert holders == {"redaction"}


def test_the_stages_that_seal_and_open_text_share_one_key_store_under_the_operators_kek(
) -> None:
    from shared.keys.settings import DEV_KEK, KeySettings
    services = resolved("docker-compose.yml")["services"]
    holders = {n for n, s in services.items()
               if "STREAMRAG_KEYS_PATH" in s.get("environment", {})}
    assert holders == {"ingest", "redaction", "chunking", "embedding", "retrieval"}
    for name in holders:
        env = services[name]["environment"]
        settings = KeySettings(path=env["STREAMRAG_KEYS_PATH"], kek=env["STREAMRAG_KEYS_KEK"])
        assert settings.kek_bytes() == bytes.fromhex("c" * 64) != bytes.fromhex(DEV_KEK)
        mounts = {v["target"]: v.get("source") for v in services[name]["volumes"]}
        assert mounts[str(settings.store_path().parent)] == "data-keys"


def test_the_query_api_is_never_open_and_listens_on_the_hosts_loopback_only() -> None:
    from services.inference.api.auth import TokenVerifier
    from services.inference.settings import InferenceSettings

    def inference(env: dict[str, str]) -> dict[str, Any]:
        services = json.loads(compose("config", "--format", "json", env=env).stdout)["services"]
        return services["inference"]  # type: ignore[no-any-return]

    served = inference(SECRETS)
    settings = read_under(InferenceSettings, served["environment"])
    assert settings.auth_token is not None
    assert settings.auth_token.get_secret_value() == SECRETS["STREAMRAG_INFERENCE_AUTH_TOKEN"]
    assert not settings.jwt_configured() and not TokenVerifier(settings).open
    assert [(p["host_ip"], p["published"]) for p in served["ports"]] == [("127.0.0.1", "50051")]
    # Users' tokens when .env names a secret and an audience.
    jwt = {"STREAMRAG_INFERENCE_JWT_SECRET": "j" * 32, "STREAMRAG_INFERENCE_JWT_AUDIENCE": "rag"}
    users = read_under(InferenceSettings, inference({**SECRETS, **jwt})["environment"])
    assert users.jwt_configured() and users.jwt.audience == "rag"
    # Without the token compose refuses to start rather than serve everything to anyone.
    missing = compose("config", "--format", "json", env={
        k: v for k, v in SECRETS.items() if k != "STREAMRAG_INFERENCE_AUTH_TOKEN"})
    assert "STREAMRAG_INFERENCE_AUTH_TOKEN" in missing.stderr


# Replicated Kafka (docker-compose.kraft.yml): three KRaft brokers, every topic created with
# replication 3 and min.insync.replicas 2.


def kafka_settings(env: dict[str, str]) -> KafkaSettings:
    """What a process with this compose environment reads as its KafkaSettings."""
    return read_under(KafkaSettings, env)


def brokers(services: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The Kafka nodes among the services, by name: their environment."""
    return {n: s["environment"] for n, s in services.items()
            if "KAFKA_NODE_ID" in s.get("environment", {})}


def listeners(value: str) -> dict[str, tuple[str, int]]:
    """NAME://host:port,... -> name -> (host, port)."""
    out = {}
    for item in value.split(","):
        name, address = item.split("://")
        host, port = address.rsplit(":", 1)
        out[name] = (host, int(port))
    return out


def test_the_kraft_brokers_agree_on_ids_quorum_listeners_and_cluster() -> None:
    services = resolved(*KRAFT)["services"]
    nodes = brokers(services)
    assert set(nodes) == {"kafka", "kafka-2", "kafka-3"}
    ids = {name: int(env["KAFKA_NODE_ID"]) for name, env in nodes.items()}
    assert sorted(ids.values()) == [1, 2, 3]  # unique
    (voters,) = {env["KAFKA_CONTROLLER_QUORUM_VOTERS"] for env in nodes.values()}
    quorum = {int(v.split("@")[0]): v.split("@")[1] for v in voters.split(",")}
    assert len({env["CLUSTER_ID"] for env in nodes.values()}) == 1
    for name, env in nodes.items():
        assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
        own = listeners(env["KAFKA_LISTENERS"])
        # Each voter is this node's controller listener, under its compose service name.
        assert quorum[ids[name]] == f"{name}:{own['CONTROLLER'][1]}"
        assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] == "CONTROLLER"
        # Clients and the other brokers reach it by its service name on its client listener.
        assert listeners(env["KAFKA_ADVERTISED_LISTENERS"]) == {
            "BROKER": (name, own["BROKER"][1])}
        assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "BROKER"
        protocols = dict(p.split(":")
                         for p in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
        assert set(protocols.values()) == {"SASL_PLAINTEXT"} and set(own) == set(protocols)
        assert env["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"] == "false"
        assert env["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"] == "false"
        # Kafka's own topics survive a broker too; a write to them needs two replicas.
        assert int(env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"]) == len(nodes)
        assert int(env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"]) == len(nodes) - 1
    assert len(quorum) == len(nodes)
    # One log dir volume each; only node 1 (`kafka`) listens on the host.
    volumes = [services[n]["volumes"][0]["source"] for n in nodes]
    assert len(set(volumes)) == len(nodes)
    assert [n for n in nodes if services[n].get("ports")] == ["kafka"]


def test_every_contract_topic_is_created_with_the_clusters_replication() -> None:
    from shared.kafka.admin import contract_specs, new_topic

    services = resolved(*KRAFT)["services"]
    nodes = brokers(services)
    advertised = {f"{h}:{p}" for env in nodes.values()
                  for h, p in listeners(env["KAFKA_ADVERTISED_LISTENERS"]).values()}
    job = kafka_settings(services["topics"]["environment"])
    assert (job.replication_factor, job.min_insync_replicas) == (3, 2)
    # One broker may die and writes go on: more replicas than must be in sync, on as many
    # brokers as there are replicas.
    assert job.min_insync_replicas < job.replication_factor <= len(nodes)
    for spec in contract_specs():
        made = new_topic(spec, job)
        assert (made.name, made.replication_factor, made.topic_configs["min.insync.replicas"]) \
            == (spec.name, 3, "2")
    for name in ("topics", *SERVICES):
        kafka = kafka_settings(services[name]["environment"])
        assert set(kafka.bootstrap.split(",")) == advertised, name
        assert (kafka.replication_factor, kafka.min_insync_replicas) == (3, 2), name
        assert kafka.producer_options() == {"acks": "all", "enable_idempotence": True}, name
    # The ACLs (and after them the topics) wait for every broker: RF 3 needs all three.
    assert {n: d["condition"] for n, d in services["kafka-acls"]["depends_on"].items()} == \
        dict.fromkeys(nodes, "service_healthy")


def test_the_single_broker_keeps_one_replica() -> None:
    services = resolved("docker-compose.yml")["services"]
    assert list(brokers(services)) == ["kafka"]
    job = kafka_settings(services["topics"]["environment"])
    assert (job.replication_factor, job.min_insync_replicas) == (1, 1)
    assert job.producer_options()["enable_idempotence"] is True  # the setting's default


def test_every_process_and_the_topics_job_read_one_partition_layout() -> None:
    def layouts(env: dict[str, str]) -> set[PartitionSettings]:
        services = json.loads(compose("config", "--format", "json", env=env).stdout)["services"]
        return {read_under(PartitionSettings, services[n]["environment"])
                for n in ("topics", *SERVICES)}
    assert layouts(SECRETS) == {PartitionSettings()}  # 4 each, as before the setting
    (grown,) = layouts({**SECRETS, "STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS": "8"})
    assert (grown.partitions_documents, grown.partitions_audit) == (8, 4)
