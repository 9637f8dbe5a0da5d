"""deploy/kubernetes read without a cluster: the manifests, each workload's container and the
environment it would see, and KEDA's objects checked against the fields of KEDA's CRDs.

Each `*_problems` function returns what is wrong (empty: nothing), so a test can show that a
planted mistake in a loaded copy is caught."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tests.support.compose import ROOT

K8S_DIR = ROOT / "deploy" / "kubernetes"
JOBS_DIR = K8S_DIR / "jobs"
# The Kubernetes release the manifests are validated against (kubernetes-validate ships its
# schemas; the strict ones refuse unknown fields). Native gRPC probes are GA since 1.27,
# StatefulSet PVC retention since 1.32.
K8S_VERSION = "1.33.0"
SECRET = "streamrag-secrets"
CONFIG = "streamrag-config"
COMPONENT = "app.kubernetes.io/component"
KEDA_API = "keda.sh/v1alpha1"
WORKLOADS = ("Deployment", "StatefulSet", "Job")

Doc = dict[str, Any]


def files() -> list[Path]:
    """Every manifest, the kustomization aside."""
    return [p for p in sorted(K8S_DIR.glob("*.yaml")) + sorted(JOBS_DIR.glob("*.yaml"))
            if p.name != "kustomization.yaml"]


def load() -> list[Doc]:
    """Every object of every manifest."""
    docs = []
    for path in files():
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def of_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def named(docs: list[Doc], kind: str, name: str) -> Doc:
    (doc,) = [d for d in of_kind(docs, kind) if d["metadata"]["name"] == name]
    return doc


def workloads(docs: list[Doc]) -> Iterator[Doc]:
    return (d for d in docs if d["kind"] in WORKLOADS)


def components(docs: list[Doc]) -> list[str]:
    """The component label of every workload's pods."""
    return [d["spec"]["template"]["metadata"]["labels"][COMPONENT] for d in workloads(docs)]


def workload(docs: list[Doc], component: str) -> Doc:
    (doc,) = [d for d in workloads(docs)
              if d["spec"]["template"]["metadata"]["labels"].get(COMPONENT) == component]
    return doc


def container(doc: Doc) -> Doc:
    (one,) = doc["spec"]["template"]["spec"]["containers"]
    return one


def environment(ctr: Doc, docs: list[Doc], secrets: Mapping[str, str],
                ) -> tuple[dict[str, str], list[str]]:
    """The variables the container would get, with `secrets` as the Secret's data, and what
    cannot be resolved (a ConfigMap or Secret key that is not there)."""
    env: dict[str, str] = {}
    problems: list[str] = []
    config = {d["metadata"]["name"]: d.get("data", {}) for d in of_kind(docs, "ConfigMap")}
    for source in ctr.get("envFrom", []):
        name = source["configMapRef"]["name"]
        if name not in config:
            problems.append(f"envFrom: no ConfigMap {name}")
        env.update(config.get(name, {}))
    for var in ctr.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
            continue
        if "secretKeyRef" in var["valueFrom"]:
            ref = var["valueFrom"]["secretKeyRef"]
            data = secrets if ref["name"] == SECRET else {}
        else:
            ref = var["valueFrom"]["configMapKeyRef"]
            data = config.get(ref["name"], {})
        if ref["key"] in data:
            env[var["name"]] = data[ref["key"]]
        elif not ref.get("optional"):
            problems.append(f"{var['name']}: {ref['name']} has no key {ref['key']}")
    return env, problems


def secret_keys(docs: list[Doc]) -> set[str]:
    """Every key of the Secret a manifest reads, optional ones aside."""
    keys = set()
    for doc in workloads(docs):
        for var in container(doc).get("env", []):
            ref = var.get("valueFrom", {}).get("secretKeyRef")
            if ref and not ref.get("optional"):
                keys.add(ref["key"])
    return keys


# KEDA's CRDs are not vendored: this is the part of keda.sh/v1alpha1 ScaledObject and
# TriggerAuthentication these manifests use, with the field names and types of KEDA's API
# types (apis/keda/v1alpha1: ScaledObjectSpec, ScaleTarget, ScaleTriggers,
# ScaledObjectAuthRef, AuthEnvironment, AuthSecretTargetRef), closed to unknown fields so a
# misspelt one fails as the API server would reject it.
_NAME = {"type": "string", "minLength": 1}
_META = {"type": "object", "required": ["name"], "properties": {"name": _NAME}}


def _closed(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props,
            "additionalProperties": False}


SCALED_OBJECT = _closed(
    ["apiVersion", "kind", "metadata", "spec"], apiVersion={"const": KEDA_API},
    kind={"const": "ScaledObject"}, metadata=_META,
    spec=_closed(
        ["scaleTargetRef", "triggers"],
        scaleTargetRef=_closed(["name"], name=_NAME, apiVersion={"type": "string"},
                               kind={"type": "string"},
                               envSourceContainerName={"type": "string"}),
        pollingInterval={"type": "integer", "minimum": 1},
        cooldownPeriod={"type": "integer", "minimum": 0},
        initialCooldownPeriod={"type": "integer", "minimum": 0},
        idleReplicaCount={"type": "integer", "minimum": 0},
        minReplicaCount={"type": "integer", "minimum": 0},
        maxReplicaCount={"type": "integer", "minimum": 1},
        advanced={"type": "object"}, fallback={"type": "object"},
        triggers={"type": "array", "minItems": 1, "items": _closed(
            ["type", "metadata"], type=_NAME, name={"type": "string"},
            useCachedMetrics={"type": "boolean"},
            metricType={"enum": ["AverageValue", "Value", "Utilization"]},
            metadata={"type": "object", "additionalProperties": {"type": "string"}},
            authenticationRef=_closed(["name"], name=_NAME, kind={
                "enum": ["TriggerAuthentication", "ClusterTriggerAuthentication"]}))}))
_PARAM = {"type": "array", "items": _closed(
    ["parameter", "name"], parameter=_NAME, name=_NAME, key=_NAME,
    containerName={"type": "string"})}
TRIGGER_AUTHENTICATION = _closed(
    ["apiVersion", "kind", "metadata", "spec"], apiVersion={"const": KEDA_API},
    kind={"const": "TriggerAuthentication"}, metadata=_META,
    spec=_closed([], env=_PARAM, secretTargetRef=_PARAM))
KEDA_SCHEMAS = {"ScaledObject": SCALED_OBJECT, "TriggerAuthentication": TRIGGER_AUTHENTICATION}
# KEDA's Kafka scaler (keda.sh/docs, scalers/apache-kafka): every metadata key it reads, and
# the values of those that take a fixed set.
KAFKA_METADATA = {"bootstrapServers", "consumerGroup", "topic", "lagThreshold",
                  "activationLagThreshold", "offsetResetPolicy", "allowIdleConsumers",
                  "scaleToZeroOnInvalidOffset", "excludePersistentLag", "version",
                  "partitionLimitation", "sasl", "tls", "limitToPartitionsWithLag",
                  "ensureEvenDistributionOfPartitions"}
KAFKA_VALUES = {"offsetResetPolicy": {"earliest", "latest"}, "tls": {"enable", "disable"},
                "sasl": {"none", "plaintext", "scram_sha256", "scram_sha512", "oauthbearer",
                         "gssapi"}}
# The client settings' names for what the scaler calls sasl and tls.
SASL = {"PLAIN": "plaintext", "SCRAM-SHA-256": "scram_sha256", "SCRAM-SHA-512": "scram_sha512"}
TLS = {"PLAINTEXT": "disable", "SASL_PLAINTEXT": "disable", "SASL_SSL": "enable"}


def keda_problems(doc: Doc) -> list[str]:
    problems = [f"{doc['kind']} {'.'.join(map(str, e.path))}: {e.message}"
                for e in jsonschema.Draft202012Validator(KEDA_SCHEMAS[doc["kind"]])
                .iter_errors(doc)]
    for trigger in doc["spec"].get("triggers", []) if doc["kind"] == "ScaledObject" else []:
        meta = trigger.get("metadata", {})
        if trigger.get("type") != "kafka":
            problems.append(f"trigger type {trigger.get('type')}, not kafka")
        problems += [f"kafka trigger: unknown key {k}" for k in set(meta) - KAFKA_METADATA]
        problems += [f"kafka trigger: {k}={meta[k]}" for k, allowed in KAFKA_VALUES.items()
                     if k in meta and meta[k] not in allowed]
    return problems
