"""The compose dashboards kept honest without an engine: Prometheus scrapes every service
on the port compose gives it, Grafana loads the committed dashboard from that Prometheus,
and every metric the dashboard queries is one the code exports."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path, PurePosixPath

import yaml
from prometheus_client import REGISTRY, CollectorRegistry

from services.inference.telemetry.metrics import InferenceMetrics
from tests.support.compose import ROOT, compose

PROFILE = "observability"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "streamrag.json"
# The modules that define the default registry's metrics (stage counters, lag, heartbeat,
# boundary counters and the dead-letter counter).
METRIC_MODULES = ("shared.worker.metrics", "shared.worker.boundary", "shared.worker.heartbeat",
                  "shared.contract.dlq")
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count"),
            "summary": ("_sum", "_count", ""), "info": ("_info",)}


def with_dashboards(profiles: tuple[str, ...] = (PROFILE,)) -> dict:
    out = compose(*[a for p in profiles for a in ("--profile", p)], "config", "--format", "json")
    assert out.stdout.strip().startswith("{"), out.stderr
    return json.loads(out.stdout)


def mounted(svc: dict, target: str) -> Path:
    """The host path bound at `target` in the container, or one bound at a folder above it."""
    for volume in svc.get("volumes", []):
        if volume["type"] != "bind":
            continue
        inside = PurePosixPath(target).relative_to(volume["target"]) \
            if PurePosixPath(target).is_relative_to(volume["target"]) else None
        if inside is not None:
            return Path(volume["source"]) / inside
    raise AssertionError(f"nothing bound at {target}")


def exported_names(registries: list[CollectorRegistry]) -> set[str]:
    """Every series name the registries expose, histogram and counter suffixes included."""
    names = set()
    for registry in registries:
        for family in registry.collect():
            names |= {family.name + s for s in SUFFIXES.get(family.type, ("",))}
    return names


def exported() -> set[str]:
    for module in METRIC_MODULES:
        importlib.import_module(module)
    return exported_names([REGISTRY, InferenceMetrics().registry])


def dashboard_exprs(dashboard: dict) -> list[str]:
    return [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]


def queried_names(exprs: list[str]) -> set[str]:
    return {n for e in exprs for n in re.findall(r"streamrag_[a-z_]+", e)}


def prometheus_config(services: dict) -> dict:
    svc = services["prometheus"]
    path = mounted(svc, "/etc/prometheus/prometheus.yml")
    assert "--config.file=/etc/prometheus/prometheus.yml" in svc["command"]
    assert path == ROOT / "deploy" / "prometheus" / "prometheus.yml"
    return yaml.safe_load(path.read_text())


def test_the_default_bring_up_runs_without_the_dashboards() -> None:
    default = with_dashboards(())["services"]
    assert not {"prometheus", "grafana"} & set(default)
    services = with_dashboards()["services"]
    assert set(services) - set(default) == {"prometheus", "grafana"}
    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == [PROFILE]
        assert services[name]["restart"] == "unless-stopped"


def test_prometheus_scrapes_every_service_on_the_port_compose_gives_it() -> None:
    services = with_dashboards()["services"]
    expected = {}
    for name, svc in services.items():
        command = svc.get("command") or []
        if svc.get("image") != "streamrag:latest" or command[:2] != ["python", "-m"] \
                or not command[2].startswith("services."):
            continue  # the one-shot topics job serves no metrics
        env, prefix = svc["environment"], f"STREAMRAG_{name.upper()}_"
        port = env[f"{prefix}METRICS_PORT"]
        # Inference serves /metrics on its gRPC host (services/inference/runtime.py).
        host = env.get(f"{prefix}METRICS_HOST", env.get(f"{prefix}GRPC_HOST"))
        assert host == "0.0.0.0", f"{name} serves /metrics on {host}: no scraper reaches it"
        assert port in svc["expose"], name
        expected[name] = [f"{name}:{port}"]
    assert {"ingest", "redaction", "chunking", "embedding", "retrieval", "inference",
            "ledger"} <= set(expected)
    jobs = prometheus_config(services)["scrape_configs"]
    scraped = {job["job_name"]: [t for c in job["static_configs"] for t in c["targets"]]
               for job in jobs}
    assert scraped == expected
    assert all(job.get("metrics_path", "/metrics") == "/metrics" for job in jobs)


def test_grafana_loads_the_dashboard_from_the_compose_prometheus() -> None:
    services = with_dashboards()["services"]
    grafana = services["grafana"]
    provisioning = mounted(grafana, "/etc/grafana/provisioning")
    assert provisioning == ROOT / "deploy" / "grafana" / "provisioning"
    (source,) = yaml.safe_load(
        (provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    (port,) = [p["target"] for p in services["prometheus"]["ports"]]
    assert (source["type"], source["url"]) == ("prometheus", f"http://prometheus:{port}")
    assert "prometheus" in grafana["depends_on"]
    (provider,) = yaml.safe_load(
        (provisioning / "dashboards" / "streamrag.yml").read_text())["providers"]
    folder = mounted(grafana, provider["options"]["path"])
    assert DASHBOARD in folder.glob("*.json")
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert mounted(grafana, home) == DASHBOARD
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for ds in [panel["datasource"], *[t["datasource"] for t in panel["targets"]]]:
            assert ds == {"type": "prometheus", "uid": source["uid"]}, panel["title"]


def test_every_metric_the_dashboard_queries_is_exported() -> None:
    exprs = dashboard_exprs(json.loads(DASHBOARD.read_text()))
    names = queried_names(exprs)
    assert len(exprs) >= 10 and {
        "streamrag_stage_records_in_total", "streamrag_stage_records_out_total",
        "streamrag_records_dead_lettered_total", "streamrag_consumer_lag",
        "streamrag_stage_latency_seconds_bucket", "streamrag_inference_request_seconds_bucket",
        "streamrag_inference_batch_fill_sum", "streamrag_inference_answer_modes_total",
        "streamrag_inference_time_to_first_token_seconds_bucket"} <= names
    unknown = names - exported()
    assert not unknown, f"the dashboard queries metrics nothing exports: {unknown}"


def test_a_wrong_metric_name_would_be_caught() -> None:
    known = exported()
    assert {"streamrag_stage_latency_seconds_bucket", "streamrag_consumer_lag",
            "streamrag_inference_answer_modes_total"} <= known
    for wrong in ("streamrag_stage_latency_seconds", "streamrag_stage_records_in",
                  "streamrag_inference_answer_modes", "streamrag_consumer_lag_total"):
        assert wrong not in known
    planted = queried_names(["rate(streamrag_stage_records_inn_total[1m])"])
    assert planted - known == {"streamrag_stage_records_inn_total"}
