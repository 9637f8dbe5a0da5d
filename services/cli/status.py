"""`streamrag status`: services up (group members), lag per topic, per-stage record counts,
each stage's progress (stalled: records waiting for it and none handled for a while),
each source's event time (watermark, lag behind real time, late changes), and the SLO
guard's newest incidents (guard.incidents.v1).

`--json` prints the same as one JSON object for scripts."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaConnectionError
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.cli import incidents as guard_incidents
from services.cli.ready import Metadata, bearer
from services.cli.settings import MeshSettings
from shared.contract.topics import (
    CHUNKS_EMBEDDED,
    ONEBOX_APP,
    SEARCH_REPLIES,
    SERVICE_INPUTS,
    SERVICES,
)
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc
from shared.settings import KafkaSettings
from shared.worker import members
from shared.worker.status_files import COUNTS_FILE, EVENT_TIME_FILE, MODELS_FILE, PROGRESS_FILE


@dataclass(frozen=True)
class GroupStatus:
    service: str
    members: int | None
    lag: dict[str, int]
    state: str
    group: str = ""  # the consumer group holding the service's offsets
    # per topic: when the oldest record still waiting for the service was written (Unix s)
    waiting_since: dict[str, float] = field(default_factory=dict)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="services up, consumer lag, event time per source")
    p.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    p.add_argument("--stalled-after", type=float, default=STALLED_AFTER_S, metavar="S",
                   help="a stage is stalled when a record has waited for it S seconds and "
                        "none was handled for as long, or one record has been in hand that "
                        "long (default %(default)s)")


async def collect(kafka: KafkaSettings) -> list[GroupStatus]:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, **kafka.client_options())
    await admin.start()
    try:
        # One-process mode: every service's agents consume in the one worker's group.
        onebox = await _describe(admin, ONEBOX_APP)
        out = []
        for service, group in SERVICES.items():
            members, state = await _describe(admin, group)
            if not members and onebox[0]:
                group, (members, state) = ONEBOX_APP, onebox
            lag, waiting = await _lag(kafka, service, group)
            out.append(GroupStatus(service, members, lag, state, group, waiting))
        return out
    finally:
        await admin.close()


async def _describe(admin: AIOKafkaAdminClient, group: str) -> tuple[int | None, str]:
    """(members, state) of a consumer group; (None, "unknown") when the broker cannot say."""
    try:
        desc = (await admin.describe_consumer_groups([group]))[0]
        groups = getattr(desc, "groups", None) or []
        if groups:
            return len(groups[0][5]), groups[0][2]
    except Exception:  # noqa: BLE001 - some brokers lack DescribeGroups: show unknown
        pass
    return None, "unknown"


# Inputs a service never commits, so a group lag would be a false figure growing for ever:
# retrieval's position on chunks.embedded.v1 is each shard's snapshot offset
# (services/retrieval/positions.py); each inference instance reads search.replies.v1
# without a group, from its end at start (services/inference/search/client.py), and a
# reply is of use only until its query's deadline.
UNCOMMITTED = {("retrieval", CHUNKS_EMBEDDED.name), ("inference", SEARCH_REPLIES.name)}


async def _lag(kafka: KafkaSettings, service: str,
               group: str) -> tuple[dict[str, int], dict[str, float]]:
    """End offset minus committed offset, summed over each input topic's partitions; and
    per topic, when the oldest record still waiting was written."""
    tps = [TopicPartition(t.name, p) for t in SERVICE_INPUTS[service]
           if (service, t.name) not in UNCOMMITTED for p in range(t.partitions)]
    reader = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group,
                              enable_auto_commit=False, **kafka.client_options())
    await reader.start()
    try:
        ends = await reader.end_offsets(tps)
        lag: dict[str, int] = {}
        waiting: dict[TopicPartition, int] = {}
        for tp in tps:
            committed = await reader.committed(tp) or 0
            lag[tp.topic] = lag.get(tp.topic, 0) + max(0, ends[tp] - committed)
            if ends[tp] > committed:
                waiting[tp] = committed
    finally:
        await reader.stop()
    since: dict[str, float] = {}
    for tp, written in (await _written_at(kafka, waiting)).items():
        since[tp.topic] = min(since.get(tp.topic, written), written)
    return lag, since


async def _written_at(kafka: KafkaSettings,
                      offsets: dict[TopicPartition, int]) -> dict[TopicPartition, float]:
    """The timestamp (Unix s) of the record at each partition's offset (the first one
    there, if retention removed it), for those read within a few seconds."""
    if not offsets:
        return {}
    reader = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                              enable_auto_commit=False, auto_offset_reset="earliest",
                              **kafka.client_options())
    await reader.start()
    out: dict[TopicPartition, float] = {}
    try:
        reader.assign(list(offsets))
        for tp, offset in offsets.items():
            reader.seek(tp, offset)
        deadline = time.monotonic() + 5.0
        while len(out) < len(offsets) and time.monotonic() < deadline:
            got = await reader.getmany(timeout_ms=500, max_records=len(offsets))
            for tp, records in got.items():
                if records and tp not in out:
                    out[tp] = records[0].timestamp / 1000.0
                    reader.pause(tp)
    finally:
        await reader.stop()
    return out


def render(rows: list[GroupStatus]) -> str:
    lines = [f"{'service':<11} {'group':<20} {'state':<12} {'members':>7}  lag by topic"]
    for r in rows:
        members = "?" if r.members is None else str(r.members)
        lag = ", ".join(f"{t}={n}" for t, n in sorted(r.lag.items())) or "-"
        lines.append(f"{r.service:<11} {r.group:<20} {r.state:<12} {members:>7}  {lag}")
    return "\n".join(lines)


def stage_counts(data_dir: Path) -> dict[str, dict[str, float]]:
    """Each stage's boundary counters (shared.worker.boundary), summed over its workers:
    what each live or not yet retired worker last wrote, plus the totals of the workers
    that ended (shared/worker/members.py)."""
    out: dict[str, dict[str, float]] = {}

    def add(counters: dict[str, Any]) -> None:
        for stage, values in counters.items():
            into = out.setdefault(stage, {})
            for key, value in values.items():
                into[key] = into.get(key, 0) + value

    for stage_dir in sorted(p for p in data_dir.glob("*") if p.is_dir()):
        add(members.read_retired(stage_dir)["counters"])
    for written in members.files(data_dir, COUNTS_FILE, live_only=False):
        if isinstance(written.value, dict):
            add(written.value)
    return out


def counting_since(data_dir: Path) -> float | None:
    """When the oldest worker whose counts are in `stage_counts` started (Unix s)."""
    starts = [members.read_retired(d).get("since") for d in data_dir.glob("*") if d.is_dir()]
    starts += [w.value.get("started_at") for w in
               members.files(data_dir, PROGRESS_FILE, live_only=False)
               if isinstance(w.value, dict)]
    known = [float(t) for t in starts if isinstance(t, int | float)]
    return min(known) if known else None


def render_counts(counts: dict[str, dict[str, float]], since: float | None = None) -> str:
    lines = ([f"record counts since {_utc(since)} (every worker, restarts included)"]
             if since is not None else [])
    lines += [f"{'stage':<17} {'processed':>9} {'dead':>6} {'internal':>8}  dead letters by reason"]
    for stage, c in sorted(counts.items()):
        dead = {k.split(".", 1)[1]: int(v) for k, v in c.items()
                if k.startswith("dead_lettered.")}
        internal = sum(int(v) for k, v in c.items() if k.startswith("internal_error."))
        reasons = ", ".join(f"{r}={n}" for r, n in sorted(dead.items())) or "-"
        lines.append(f"{stage:<17} {int(c.get('processed', 0)):>9} {sum(dead.values()):>6} "
                     f"{internal:>8}  {reasons}")
    return "\n".join(lines)


STALLED_AFTER_S = 60.0


def stage_progress(data_dir: Path, lag_by_topic: dict[str, int], now: float,
                   stalled_after_s: float = STALLED_AFTER_S,
                   waiting_since: dict[str, float] | None = None) -> dict[str, dict]:
    """Each stage's progress as its live workers last wrote it (shared.worker.heartbeat), and
    whether it is stalled: a record has waited on its topics (`lag_by_topic`, the oldest
    written at `waiting_since`) for `stalled_after_s` and none left its boundary for as long
    (since the worker started, if none ever did), or one record has been in hand that long.
    A worker that stopped writing counts as making no progress; one that ended is left out
    (its partitions are another worker's now)."""
    merged: dict[str, dict] = {}
    for worker in members.files(data_dir, PROGRESS_FILE, live_only=True):
        written = worker.value
        silent = max(0.0, now - written.get("written_at", now))
        for stage, p in written.get("stages", {}).items():
            last = p.get("last_progress") or written.get("started_at")
            have = merged.setdefault(stage, {"last_progress": None, "in_flight": 0,
                                             "oldest_in_hand_s": 0.0, "topics": [],
                                             "workers": 0})
            have["workers"] += 1
            if last is not None:
                have["last_progress"] = max(have["last_progress"] or last, last)
            have["in_flight"] += p.get("in_flight", 0)
            if p.get("in_flight"):
                have["oldest_in_hand_s"] = max(have["oldest_in_hand_s"],
                                               p.get("oldest_in_hand_s", 0.0) + silent)
            have["topics"] = sorted(set(have["topics"]) | set(p.get("topics", [])))
    since = waiting_since or {}
    for have in merged.values():
        have["lag"] = sum(lag_by_topic.get(t, 0) for t in have["topics"])
        last = have["last_progress"]
        have["idle_s"] = None if last is None else round(max(0.0, now - last), 3)
        have["oldest_in_hand_s"] = round(have["oldest_in_hand_s"], 3)
        oldest = min((since[t] for t in have["topics"] if t in since), default=None)
        # Without the record's time (not read in time), lag alone counts as waiting.
        have["waited_s"] = (None if not have["lag"] else
                            None if oldest is None else round(max(0.0, now - oldest), 3))
        waited = have["lag"] and (have["waited_s"] is None
                                  or have["waited_s"] > stalled_after_s)
        have["stalled"] = bool(
            (waited and have["idle_s"] is not None and have["idle_s"] > stalled_after_s)
            or have["oldest_in_hand_s"] > stalled_after_s)
    return dict(sorted(merged.items()))


def lag_by_topic(rows: list[GroupStatus]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        for topic, n in r.lag.items():
            out[topic] = max(out.get(topic, 0), n)
    return out


def waiting_since(rows: list[GroupStatus]) -> dict[str, float]:
    """Per topic, when the oldest record some service still waits for was written."""
    out: dict[str, float] = {}
    for r in rows:
        for topic, t in r.waiting_since.items():
            out[topic] = min(out.get(topic, t), t)
    return out


def render_progress(progress: dict[str, dict]) -> str:
    lines = [f"{'stage':<17} {'workers':>7} {'in hand':>7} {'oldest':>8} {'last done':>10} "
             f"{'lag':>7} {'waited':>7}  state"]
    for stage, p in progress.items():
        idle = "-" if p["idle_s"] is None else f"{p['idle_s']:.0f}s ago"
        oldest = f"{p['oldest_in_hand_s']:.0f}s" if p["in_flight"] else "-"
        waited = "-" if p.get("waited_s") is None else f"{p['waited_s']:.0f}s"
        state = "STALLED" if p["stalled"] else "ok"
        lines.append(f"{stage:<17} {p.get('workers', 1):>7} {p['in_flight']:>7} {oldest:>8} "
                     f"{idle:>10} {p['lag']:>7} {waited:>7}  {state}")
    return "\n".join(lines)


def event_time(data_dir: Path, now: float) -> list[dict]:
    """Each source's watermark and lag (ingest's services.ingest.watermarks summary), the
    lag taken against `now`; with several ingest workers, their partitions combined."""
    merged: dict[str, dict] = {}
    for written in (w.value for w in members.files(data_dir, EVENT_TIME_FILE, live_only=True)):
        for src in written.get("sources", []):
            have = merged.get(src["source"])
            if have is None:
                merged[src["source"]] = dict(src)
                continue
            have["partitions"] = {**have["partitions"], **src["partitions"]}
            have["watermark"] = min(have["watermark"], src["watermark"])
            have["freshest_applied"] = max(have["freshest_applied"], src["freshest_applied"])
            for k in ("seen", "late", "late_applied"):
                have[k] += src[k]
            have["lateness"] = {b: n + src["lateness"].get(b, 0)
                                for b, n in have["lateness"].items()}
    for src in merged.values():
        fresh = src["freshest_applied"]
        src["lag_s"] = round(now - fresh, 3) if fresh else None
    return [merged[k] for k in sorted(merged)]


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def render_event_time(sources: list[dict]) -> str:
    lines = [f"{'source':<20} {'watermark (UTC)':<20} {'lag':>9} {'seen':>7} {'late':>6} "
             f"{'late ok':>7}  lateness"]
    for s in sources:
        lag = "-" if s["lag_s"] is None else f"{s['lag_s']:.1f}s"
        hist = ", ".join(f"{b}={n}" for b, n in s["lateness"].items() if n) or "-"
        lines.append(f"{s['source'][:20]:<20} {_utc(s['watermark']):<20} {lag:>9} "
                     f"{s['seen']:>7} {s['late']:>6} {s['late_applied']:>7}  {hist}")
    return "\n".join(lines)


def index_models(data_dir: Path) -> dict[str, dict]:
    """Each embedding model's index in retrieval, its shards of every worker combined:
    {model: {"dim", "chunks", "documents", "shards", "caught_up": [partitions]}}."""
    out: dict[str, dict] = {}
    for written in (w.value for w in members.files(data_dir, MODELS_FILE, live_only=True)):
        for model, state in written.get("models", {}).items():
            have = out.setdefault(model, {"dim": state["dim"], "chunks": 0, "documents": 0,
                                          "shards": [], "caught_up": []})
            for p, shard in state["shards"].items():
                have["chunks"] += shard["chunks"]
                have["documents"] += shard["documents"]
                have["shards"].append(int(p))
                if shard["caught_up"]:
                    have["caught_up"].append(int(p))
    for have in out.values():
        have["shards"].sort()
        have["caught_up"].sort()
    return out


def render_models(models: dict[str, dict], serving: str) -> str:
    lines = [f"{'embedding model (retrieval index)':<44} {'dim':>5} {'chunks':>8} {'docs':>7}"
             "  caught up"]
    for model, m in sorted(models.items()):
        mark = " <- queries" if model == serving else ""
        lines.append(f"{model[:44]:<44} {m['dim']:>5} {m['chunks']:>8} {m['documents']:>7}"
                     f"  {len(m['caught_up'])}/{len(m['shards'])} shards{mark}")
    return "\n".join(lines)


def inference_model(target: str, metadata: Metadata = ()) -> str:
    """The embedding model inference encodes queries with ("" when it does not answer)."""
    with grpc.insecure_channel(target) as channel:
        try:
            return str(inference_pb2_grpc.InferenceStub(channel).Info(
                inference_pb2.InfoRequest(), timeout=2, metadata=metadata).model_id)
        except grpc.RpcError:
            return ""


def inference_health(target: str) -> str:
    """Inference answers over gRPC; its reply reader has no consumer group to count."""
    with grpc.insecure_channel(target) as channel:
        try:
            resp = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                             timeout=2)
        except grpc.RpcError as exc:
            return exc.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)


STATS_WINDOWS = {"minute": inference_pb2.STATS_WINDOW_MINUTE,
                 "hour": inference_pb2.STATS_WINDOW_HOUR}


def stream_stats(target: str, metadata: Metadata = ()) -> dict[str, Any] | str:
    """The current minute's and hour's counts from inference's Stats RPC, and the drift of
    each source, domain and model (under "drift"), or why not."""
    out: dict[str, Any] = {}
    with grpc.insecure_channel(target) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        for name, window in STATS_WINDOWS.items():
            try:
                resp = stub.Stats(inference_pb2.StatsRequest(window=window), timeout=5,
                                  metadata=metadata)
            except grpc.RpcError as exc:
                return exc.code().name
            out[name] = {"window_start": resp.window_start, "window_end": resp.window_end,
                         "counts": [{"source": c.source, "domain": c.domain, "kind": c.kind,
                                     "count": c.count} for c in resp.counts]}
            out["drift"] = [drift_state(d) for d in resp.drift]
    return out


def drift_state(state: Any) -> dict[str, Any]:
    """A Stats DriftState as plain data (MessageToDict keeps the optional fields unset)."""
    data = json_format.MessageToDict(state, preserving_proto_field_name=True)
    return {"source": state.source, "domain": state.domain, "model_id": state.model_id,
            "latest": data.get("latest", {}), "last_event": data.get("last_event")}


def render_drift(states: list[dict[str, Any]]) -> str:
    """One line per source, domain and model: the newest window, then the last event."""
    lines = ["semantic drift (newest window | last drift event)"]
    for d in states:
        w, e = d["latest"], d["last_event"]
        z = f" z={w['z']:.1f}" if "z" in w else ""
        line = (f"  {d['source']}/{d['domain']} [{d['model_id']}]: {w.get('status', '-')}{z}"
                f" docs={w.get('docs', 0)} at {_iso(w.get('window_start', 0))}")
        if e:
            docs = ", ".join(doc.get("doc_id", "") for doc in e.get("documents", []))
            line += (f" | DRIFT at {_iso(e['window_start'])} z={e.get('z', 0):.1f}"
                     f" words: {', '.join(e.get('terms', []))} docs: {docs}")
        lines.append(line)
    return "\n".join(lines if states else [lines[0], "  no drift windows closed yet"])


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def render_stats(stats: dict[str, Any] | str) -> str:
    """One line per source and domain: the hour's counts, then the minute's; then drift."""
    if isinstance(stats, str):
        return f"stream statistics: {stats}"
    per: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    for window in STATS_WINDOWS:
        for c in stats.get(window, {}).get("counts", []):
            kinds = per.setdefault((c["source"], c["domain"]), {}).setdefault(window, {})
            kinds[c["kind"]] = c["count"]
    lines = ["stream statistics (last hour | this minute)"]
    for (source, domain), windows in sorted(per.items()):
        hour = ", ".join(f"{k}={n}" for k, n in sorted(windows.get("hour", {}).items()))
        minute = ", ".join(f"{k}={n}" for k, n in sorted(windows.get("minute", {}).items()))
        lines.append(f"  {source}/{domain}: {hour or '-'} | {minute or '-'}")
    if "drift" in stats:
        lines += ["", render_drift(stats["drift"])]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    kafka = KafkaSettings()
    try:
        rows = asyncio.run(collect(kafka))
    except KafkaConnectionError:
        print(f"broker not reachable at {kafka.bootstrap}: is the mesh up (scripts/up)?")
        return 1
    mesh = MeshSettings()
    target = mesh.inference_target
    health = inference_health(target)
    data_dir = mesh.run_dir / "data"
    counts, since = stage_counts(data_dir), counting_since(data_dir)
    progress = stage_progress(data_dir, lag_by_topic(rows), time.time(), args.stalled_after,
                              waiting_since(rows))
    sources = event_time(data_dir, time.time())
    # With auth on, Info and Stats need a token (the health check does not).
    token = bearer(mesh.inference_token.get_secret_value() if mesh.inference_token else None)
    stats = stream_stats(target, token) if health == "SERVING" else health
    models = index_models(data_dir)
    serving = inference_model(target, token) if health == "SERVING" else ""
    incidents = asyncio.run(guard_incidents.newest(kafka))
    workers_up = all(r.members for r in rows if r.service != "inference")
    stalled = any(p["stalled"] for p in progress.values())
    code = 0 if workers_up and health == "SERVING" and not stalled else 1
    if args.json:
        print(json.dumps({"services": [asdict(r) for r in rows], "stage_counts": counts,
                          "counting_since": since,
                          "stage_progress": progress,
                          "event_time": sources, "stream_stats": stats,
                          "index_models": models,
                          "guard_incidents": guard_incidents.as_json(incidents),
                          "inference": {"target": target, "health": health,
                                        "model_id": serving}},
                         sort_keys=True))
        return code
    print(render(rows))
    if counts:
        print("\n" + render_counts(counts, since))
    if progress:
        print("\n" + render_progress(progress))
    if sources:
        print("\n" + render_event_time(sources))
    if models:
        print("\n" + render_models(models, serving))
    print("\n" + render_stats(stats))
    print("\n" + guard_incidents.render(incidents))
    print(f"\ninference gRPC {target}: {health}")
    return code
