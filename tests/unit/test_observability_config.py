"""The compose dashboards and traces kept honest without an engine: Prometheus scrapes
every service on the port compose gives it, Grafana loads the committed dashboard from that
Prometheus, every metric the dashboard queries is one the code exports, and every service's
spans can reach Jaeger through the collector."""

from __future__ import annotations

import ast
import copy
import importlib
import json
import re
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import yaml
from prometheus_client import REGISTRY, CollectorRegistry
from pydantic import ValidationError

from services.inference.telemetry.metrics import InferenceMetrics
from shared.contract.topics import SERVICES
from shared.settings import env_names
from shared.tracing.settings import TracingSettings
from tests.support.compose import ROOT, SECRETS, compose, resolved

PROFILE = "observability"
PROFILE_SERVICES = {"prometheus", "grafana", "otel-collector", "jaeger"}
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "streamrag.json"
COLLECTOR_CONFIG = ROOT / "deploy" / "otel-collector" / "config.yaml"
# What every service must be told: whether to export, where the collector is, how much to keep.
TRACING_FIELDS = ("exporter", "otlp_endpoint", "sample_ratio")
# The modules that define the default registry's metrics (stage counters, lag, heartbeat,
# boundary counters and the dead-letter counter).
METRIC_MODULES = ("shared.worker.metrics", "shared.worker.boundary", "shared.worker.heartbeat",
                  "shared.contract.dlq")
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count"),
            "summary": ("_sum", "_count", ""), "info": ("_info",)}
KINDS = {"Counter": "counter", "Gauge": "gauge", "Histogram": "histogram",
         "Summary": "summary", "Info": "info"}


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


def defined_in_source(paths: list[Path]) -> set[str]:
    """Every series name of a prometheus_client metric made with a literal name in `paths`:
    finds those of modules too heavy to import here (agents that build a Faust app)."""
    names = set()
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        kinds = {a.asname or a.name: KINDS[a.name] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module == "prometheus_client"
                 for a in node.names if a.name in KINDS}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in kinds and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                continue
            kind, name = kinds[node.func.id], node.args[0].value
            if kind == "counter":  # prometheus_client adds _total whether given or not
                name = name.removesuffix("_total")
            names |= {name + s for s in SUFFIXES[kind]}
    return names


def code_paths() -> list[Path]:
    return sorted(p for top in ("services", "shared") for p in (ROOT / top).rglob("*.py"))


def exported() -> set[str]:
    for module in METRIC_MODULES:
        importlib.import_module(module)
    return exported_names([REGISTRY, InferenceMetrics().registry]) | \
        defined_in_source(code_paths())


def dashboard_exprs(dashboard: dict) -> list[str]:
    return [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]


def queried_names(exprs: list[str]) -> set[str]:
    return {n for e in exprs for n in re.findall(r"streamrag_[a-z_]+", e)}


def quantile_problems(exprs: list[str]) -> list[str]:
    """histogram_quantile needs a histogram's buckets, still grouped by their `le`."""
    problems = []
    for e in (e for e in exprs if "histogram_quantile" in e):
        if not all(n.endswith("_bucket") for n in queried_names([e])):
            problems.append(f"quantile of something other than buckets: {e}")
        if not all("le" in {g.strip() for g in by.split(",")}
                   for by in re.findall(r"by \(([^)]*)\)", e)):
            problems.append(f"buckets summed without le: {e}")
    return problems


def quantiles_of(exprs: list[str], metric: str) -> set[float]:
    return {float(q) for e in exprs
            for q in re.findall(r"histogram_quantile\(([\d.]+), .*\b" + metric + "_bucket", e)}


def prometheus_config(services: dict) -> dict:
    svc = services["prometheus"]
    path = mounted(svc, "/etc/prometheus/prometheus.yml")
    assert "--config.file=/etc/prometheus/prometheus.yml" in svc["command"]
    assert path == ROOT / "deploy" / "prometheus" / "prometheus.yml"
    return yaml.safe_load(path.read_text())


def test_the_default_bring_up_runs_without_the_dashboards() -> None:
    default = with_dashboards(())["services"]
    assert not PROFILE_SERVICES & set(default)
    services = with_dashboards()["services"]
    assert set(services) - set(default) == PROFILE_SERVICES
    for name in PROFILE_SERVICES:
        assert services[name]["profiles"] == [PROFILE]
        assert services[name]["restart"] == "unless-stopped"
        # What a person opens (UIs, the collector's OTLP ports) is on the host's loopback.
        assert {p.get("host_ip") for p in services[name].get("ports", [])} <= {"127.0.0.1"}, name
    assert [p["published"] for p in services["jaeger"]["ports"]] == ["16686"]


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
        "streamrag_inference_time_to_first_token_seconds_bucket",
        "streamrag_retrieval_freshness_seconds_bucket",
        "streamrag_ledger_anchor_latency_seconds_bucket",
        "streamrag_records_internal_error_total"} <= names
    unknown = names - exported()
    assert not unknown, f"the dashboard queries metrics nothing exports: {unknown}"
    assert not quantile_problems(exprs)
    for metric in ("streamrag_retrieval_freshness_seconds",
                   "streamrag_ledger_anchor_latency_seconds"):
        assert {0.5, 0.99} <= quantiles_of(exprs, metric), metric


def test_the_source_scan_finds_what_the_registries_export() -> None:
    for module in METRIC_MODULES:
        importlib.import_module(module)
    registered = {n for n in exported_names([REGISTRY, InferenceMetrics().registry])
                  if n.startswith("streamrag_")}
    scanned = defined_in_source(code_paths())
    assert registered and registered <= scanned, registered - scanned
    assert {"streamrag_retrieval_freshness_seconds_bucket",
            "streamrag_ledger_anchor_latency_seconds_count",
            "streamrag_inference_searches_total"} <= scanned
    assert not {"streamrag_retrieval_freshness_seconds", "streamrag_inference_searches_total_total",
                "streamrag_stage_records_in"} & scanned


def test_a_wrong_metric_name_would_be_caught() -> None:
    known = exported()
    assert {"streamrag_stage_latency_seconds_bucket", "streamrag_consumer_lag",
            "streamrag_inference_answer_modes_total"} <= known
    for wrong in ("streamrag_stage_latency_seconds", "streamrag_stage_records_in",
                  "streamrag_inference_answer_modes", "streamrag_consumer_lag_total"):
        assert wrong not in known
    planted = queried_names(["rate(streamrag_stage_records_inn_total[1m])"])
    assert planted - known == {"streamrag_stage_records_inn_total"}
    assert len(quantile_problems([
        "histogram_quantile(0.5, sum by (le) (rate(streamrag_stage_latency_seconds_sum[5m])))",
        "histogram_quantile(0.5, sum by (stage) (rate(streamrag_stage_latency_seconds_bucket"
        "[5m])))"])) == 2


def host_port(endpoint: str) -> tuple[str | None, int | None]:
    """("jaeger", 4317) from "jaeger:4317" or "http://jaeger:4317"."""
    url = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    return url.hostname, url.port


def collector_config(services: dict) -> dict:
    svc = services["otel-collector"]
    (flag,) = [a for a in svc["command"] if a.startswith("--config=")]
    path = mounted(svc, flag.removeprefix("--config="))
    assert path == COLLECTOR_CONFIG
    return yaml.safe_load(path.read_text())


def streamrag_services(services: dict) -> dict[str, dict]:
    """The long-running services: those compose runs with `python -m services.<name>`."""
    return {n: s for n, s in services.items() if (s.get("command") or [])[:2] == ["python", "-m"]
            and s["command"][2].startswith("services.")}


def tracing_env_problems(services: dict) -> list[str]:
    """Each service must name every tracing setting a collector needs, only real ones, with
    values TracingSettings accepts, and must start without the optional collector."""
    names = env_names(TracingSettings)  # field -> env var, from TracingSettings.model_fields
    fields = {var: field for field, var in names.items()}
    prefix = TracingSettings.model_config["env_prefix"]
    problems = []
    for name, svc in streamrag_services(services).items():
        env = svc.get("environment", {})
        given = {k for k in env if k.startswith(prefix)}
        if unknown := given - set(fields):
            problems.append(f"{name}: no TracingSettings field reads {sorted(unknown)}")
        if missing := {names[f] for f in TRACING_FIELDS} - given:
            problems.append(f"{name}: missing {sorted(missing)}")
        try:
            TracingSettings(**{fields[k]: env[k] for k in given & set(fields)})
        except ValidationError as exc:
            problems.append(f"{name}: {exc.errors()[0]['loc']} rejected")
        if waits := {"otel-collector", "jaeger"} & set(svc.get("depends_on") or {}):
            problems.append(f"{name}: depends on the optional {sorted(waits)}")
    return problems


def trace_path_problems(services: dict, config: dict) -> list[str]:
    """Breaks on the way service -> collector (OTLP/gRPC) -> batch -> Jaeger (OTLP/gRPC)."""
    problems = []
    collector = services["otel-collector"]
    grpc = config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    http = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    if (host_port(grpc), host_port(http)) != (("0.0.0.0", 4317), ("0.0.0.0", 4318)):
        problems.append(f"the collector does not take OTLP on 0.0.0.0:4317/4318: {grpc} {http}")
    for name, svc in streamrag_services(services).items():
        target = svc["environment"].get(env_names(TracingSettings)["otlp_endpoint"], "")
        if host_port(target) != ("otel-collector", host_port(grpc)[1]):
            problems.append(f"{name} exports to {target}, not the collector's OTLP/gRPC port")
    if {str(host_port(e)[1]) for e in (grpc, http)} - set(collector.get("expose", [])):
        problems.append("the collector does not expose its OTLP ports")
    (traces,) = [p for n, p in config["service"]["pipelines"].items()
                 if n.split("/")[0] == "traces"]
    for kind in ("receivers", "processors", "exporters"):
        if undefined := set(traces.get(kind, [])) - set(config.get(kind) or {}):
            problems.append(f"the pipeline names undefined {kind}: {sorted(undefined)}")
    if "otlp" not in traces.get("receivers", []):
        problems.append("the traces pipeline does not read the otlp receiver")
    if not any(p.split("/")[0] == "batch" for p in traces.get("processors", [])):
        problems.append("the traces pipeline does not batch")
    exporters = {n: (config.get("exporters") or {}).get(n) or {}
                 for n in traces.get("exporters", [])}
    jaeger = [n for n, e in exporters.items() if n.split("/")[0] == "otlp"
              and host_port(e.get("endpoint", ""))[0] in services
              and services[host_port(e["endpoint"])[0]]["image"].startswith("jaegertracing/")]
    if not jaeger:
        problems.append(f"no OTLP exporter of the pipeline points at a Jaeger: {exporters}")
    for n in jaeger:
        host, port = host_port(exporters[n]["endpoint"])
        if str(port) not in services[host].get("expose", []) or port != 4317:
            problems.append(f"{n} sends to {host}:{port}, not Jaeger's OTLP/gRPC port 4317")
        if (exporters[n].get("tls") or {}).get("insecure") is not True:
            problems.append(f"{n} would speak TLS to Jaeger's plain OTLP port")
    return problems


def test_every_service_is_told_where_traces_go_by_real_tracing_settings() -> None:
    for files in (("docker-compose.yml",), ("docker-compose.yml", "docker-compose.gpu.yml")):
        services = resolved(*files)["services"]
        assert set(streamrag_services(services)) == set(SERVICES)
        assert tracing_env_problems(services) == []


def test_tracing_is_off_unless_the_host_turns_it_on() -> None:
    names = env_names(TracingSettings)

    def settings(env: dict[str, str]) -> set[TracingSettings]:
        out = compose("--profile", PROFILE, "config", "--format", "json", env={**SECRETS, **env})
        assert out.stdout.strip().startswith("{"), out.stderr
        services = streamrag_services(json.loads(out.stdout)["services"])
        return {TracingSettings(**{f: s["environment"][v] for f, v in names.items()
                                   if v in s["environment"]}) for s in services.values()}

    assert settings({}) == {TracingSettings(exporter="none", sample_ratio=1.0,
                                            otlp_endpoint="http://otel-collector:4317")}
    assert settings({names["exporter"]: "otlp", names["sample_ratio"]: "0.25"}) == {
        TracingSettings(exporter="otlp", sample_ratio=0.25,
                        otlp_endpoint="http://otel-collector:4317")}


def test_spans_reach_jaeger_through_the_collector() -> None:
    services = with_dashboards()["services"]
    assert services["otel-collector"]["image"].startswith(
        "otel/opentelemetry-collector-contrib:0.")
    assert re.fullmatch(r"jaegertracing/jaeger:2\.\d+\.\d+", services["jaeger"]["image"])
    assert trace_path_problems(services, collector_config(services)) == []


def test_a_broken_trace_path_would_be_caught() -> None:
    services = with_dashboards()["services"]
    config = collector_config(services)

    def planted(change: str) -> list[str]:
        s, c = copy.deepcopy(services), copy.deepcopy(config)
        jaeger = c["exporters"][c["service"]["pipelines"]["traces"]["exporters"][0]]
        env = s["ingest"]["environment"]
        if change == "jaeger's http port":
            jaeger["endpoint"] = "jaeger:4318"
        elif change == "a typo in jaeger":
            jaeger["endpoint"] = "jaegre:4317"
        elif change == "tls":
            del jaeger["tls"]
        elif change == "receiver on localhost":
            c["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"] = "localhost:4317"
        elif change == "no batch":
            c["service"]["pipelines"]["traces"]["processors"] = ["memory_limiter"]
        elif change == "service to the http port":
            env["STREAMRAG_TRACING_OTLP_ENDPOINT"] = "http://otel-collector:4318"
        elif change == "no sample ratio":
            del env["STREAMRAG_TRACING_SAMPLE_RATIO"]
        elif change == "a made-up setting":
            env["STREAMRAG_TRACING_SAMPLE_RATE"] = "0.5"
        elif change == "a ratio above 1":
            env["STREAMRAG_TRACING_SAMPLE_RATIO"] = "2"
        elif change == "waits for the collector":
            s["ingest"]["depends_on"]["otel-collector"] = {"condition": "service_started"}
        return tracing_env_problems(s) + trace_path_problems(s, c)

    assert planted("nothing") == []
    for change in ("jaeger's http port", "a typo in jaeger", "tls", "receiver on localhost",
                   "no batch", "service to the http port", "no sample ratio",
                   "a made-up setting", "a ratio above 1", "waits for the collector"):
        assert len(planted(change)) == 1, (change, planted(change))


def test_grafana_reads_traces_from_the_compose_jaeger() -> None:
    services = with_dashboards()["services"]
    provisioning = mounted(services["grafana"], "/etc/grafana/provisioning")
    (source,) = yaml.safe_load(
        (provisioning / "datasources" / "jaeger.yml").read_text())["datasources"]
    host, port = host_port(source["url"])
    assert (source["type"], host) == ("jaeger", "jaeger")
    assert port in {p["target"] for p in services["jaeger"]["ports"]}  # the UI and its API
