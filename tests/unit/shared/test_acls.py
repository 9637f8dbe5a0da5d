"""The ACL list: derived from the topic contract, checked against what the agents do, and
applied exactly by the generated kafka-acls script."""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest

from shared.contract import acls, topics
from shared.contract.acls import Grant

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "deploy" / "kafka-acls.sh"
SPECS = {name: getattr(topics, name) for name in dir(topics)
         if isinstance(getattr(topics, name), topics.TopicSpec)}


def _app_topics(service: str) -> dict[str, str]:
    """{field: topic name} for each `field=topic(app, SPEC)` (or the field's position) of
    the `Topics(...)` that services/<service>/app.py's `declare` returns."""
    tree = ast.parse((ROOT / "services" / service / "app.py").read_text())
    fields = [n.target.id for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
              and cls.name == "Topics" for n in cls.body
              if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
    out = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Topics"):
            continue
        given = [*zip(fields, node.args, strict=False),
                 *((k.arg, k.value) for k in node.keywords)]
        for name, value in given:
            if (isinstance(value, ast.Call) and getattr(value.func, "id", "") == "topic"
                    and isinstance(value.args[1], ast.Name)):
                out[name] = SPECS[value.args[1].id].name
    return out


DECLARED = ("t", "topics")  # the names the services give `declare(app)`'s result


def _topic_of(node: ast.AST, fields: dict[str, str], aliases: dict[str, str]) -> str | None:
    """The topic an expression names: `t.<field>` (`t`, `topics`: what `declare` returned;
    also a stage object's `self.topics.<field>`) or a name bound to one (`x`, or a stage
    object's field `self.x`)."""
    if isinstance(node, ast.Attribute) and node.attr in fields and (
            (isinstance(node.value, ast.Name) and node.value.id in DECLARED)
            or (isinstance(node.value, ast.Attribute) and node.value.attr in DECLARED)):
        return fields[node.attr]
    name = _bound_name(node)
    return aliases.get(name) if name else None


def _bound_name(node: ast.AST) -> str | None:
    """`x` for a name, `self.x` for a stage object's field; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == "self":
        return f"self.{node.attr}"
    return None


def _aliases(tree: ast.AST, fields: dict[str, str]) -> dict[str, str]:
    """Names bound to a topic field: `x = t.field`, `x, y = t.a, t.b`, and the same with a
    stage object's fields (`self.x = t.field`)."""
    out = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = (zip(target.elts, node.value.elts, strict=False)
                     if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                     else [(target, node.value)])
            for name, value in pairs:
                topic = _topic_of(value, fields, {})
                bound = _bound_name(name)
                if bound is not None and topic is not None:
                    out[bound] = topic
    return out


def agent_io(service: str) -> tuple[set[str], set[str]]:
    """(topics its Faust agents read, topics its code sends to), from the source: a topic
    read is `app.agent(topic)` (or inference's `agent(topic, fn)`); a write is
    `topic.send(...)` or a topic handed to any other call (a dead-letter boundary, a
    delivery helper)."""
    fields = _app_topics(service)
    reads, writes = set(), set()
    for path in (ROOT / "services" / service).rglob("*.py"):
        if path.name == "app.py":
            continue
        tree = ast.parse(path.read_text())
        aliases = _aliases(tree, fields)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            is_agent = ((isinstance(func, ast.Attribute) and func.attr == "agent")
                        or (isinstance(func, ast.Name) and func.id == "agent"))
            named = [_topic_of(a, fields, aliases) for a in node.args]
            for i, topic in enumerate(named):
                if topic is not None:
                    (reads if is_agent and i == 0 else writes).add(topic)
            if isinstance(func, ast.Attribute) and func.attr == "send":
                topic = _topic_of(func.value, fields, aliases)
                if topic is not None:
                    writes.add(topic)
    return reads, writes


@pytest.mark.parametrize("service", sorted(topics.SERVICES))
def test_the_contract_says_what_the_agents_do(service: str) -> None:
    reads, writes = agent_io(service)
    assert reads == {t.name for t in topics.SERVICE_INPUTS[service]} - _plain_reads(service)
    assert writes | _plain_writes(service) == {t.name for t in topics.SERVICE_OUTPUTS[service]}


def _plain_reads(service: str) -> set[str]:
    # Inference reads search replies with its own consumer (search/client.py), no agent.
    return {topics.SEARCH_REPLIES.name} if service == "inference" else set()


def _plain_writes(service: str) -> set[str]:
    # ... and sends search requests with its own producer; its SLO guard writes
    # configuration versions with the CLI's writer (shared/kafka/config_log.py).
    return ({topics.SEARCH_REQUESTS.name, topics.CONFIG_QUERY.name} if service == "inference"
            else set())


def test_the_plain_clients_named_above_are_the_real_ones() -> None:
    import inspect

    from services.inference.search.client import SearchClient
    defaults = inspect.signature(SearchClient).parameters
    assert (defaults["requests"].default, defaults["replies"].default) == (
        topics.SEARCH_REQUESTS, topics.SEARCH_REPLIES)
    agents = (ROOT / "services/redaction/agents.py").read_text()
    assert "read_back(self.kafka, AUDIT_BATCHES" in agents  # SERVICE_LOOKUPS["redaction"]


def test_only_redaction_writes_redacted_documents_and_audit_records() -> None:
    assert acls.allowed("Write", topics.DOCS_REDACTED.name) == {"redaction"}
    assert acls.allowed("Write", topics.AUDIT_BATCHES.name) == {"redaction"}
    assert acls.allowed("Write", topics.LEDGER_ANCHORS.name) == {"ledger"}
    assert acls.allowed("Write", topics.DOCS_RAW.name) == {"producer"}
    assert acls.allowed("Read", topics.DOCS_RAW.name) == {"ingest"}  # raw PII: one reader
    assert acls.allowed("Read", topics.DEADLETTER_RAW.name) == set()


def test_every_service_gets_exactly_its_topics_group_and_changelogs() -> None:
    for service, group in topics.SERVICES.items():
        mine = {g for g in acls.grants() if g.principal == service}
        changelogs = {t.changelog for t in topics.TABLES if t.app_id == group}
        reads = {t.name for t in (*topics.SERVICE_INPUTS[service],
                                  *topics.SERVICE_LOOKUPS.get(service, ()))} | changelogs
        writes = {t.name for t in topics.SERVICE_OUTPUTS[service]} | changelogs
        assert mine == ({Grant(service, "Read", "topic", n) for n in reads}
                        | {Grant(service, "Write", "topic", n) for n in writes}
                        | {Grant(service, "Read", "group", group,
                                 "prefixed" if service == "embedding" else "literal")})
    # no Create/Alter/All; DescribeConfigs only for the auditor, only on the redacted text
    # (verify reads its retention)
    assert {g.operation for g in acls.grants()} == {"Read", "Write", "DescribeConfigs"}
    assert {(g.principal, g.name) for g in acls.grants()
            if g.operation == "DescribeConfigs"} == {("auditor", "docs.redacted.v1")}
    contract = {s.name for s in topics.all_topic_specs()}
    assert {g.name for g in acls.grants() if g.resource == "topic"} <= contract
    assert all("*" not in g.name for g in acls.grants())


def test_the_committed_script_is_generated_from_the_contract() -> None:
    assert SCRIPT.read_text() == acls.script(), "run scripts/gen_acls"
    assert os.access(SCRIPT, os.X_OK)


def test_the_script_creates_every_credential_and_exactly_the_grants(tmp_path: Path) -> None:
    """Run it with stand-ins for the Kafka tools that record their arguments."""
    log = tmp_path / "calls"
    for tool in ("kafka-topics.sh", "kafka-configs.sh", "kafka-acls.sh"):
        stub = tmp_path / tool
        stub.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\n')
        stub.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "KAFKA_BIN": str(tmp_path),
           "STREAMRAG_KAFKA_BOOTSTRAP": "kafka:9092", "STREAMRAG_KAFKA_ADMIN_PASSWORD": "a1",
           **{acls.password_env(p): f"pw{i}" for i, p in enumerate(acls.principals())}}
    subprocess.run(["sh", str(SCRIPT)], env=env, check=True, capture_output=True, timeout=30)
    calls = [line.split() for line in log.read_text().splitlines()]
    assert all(c[1:3] == ["--bootstrap-server", "kafka:9092"] and c[3] == "--command-config"
               for c in calls)
    users = {(c[c.index("--entity-name") + 1], c[c.index("--add-config") + 1])
             for c in calls if c[0] == "kafka-configs.sh"}
    assert users == {(p, f"SCRAM-SHA-512=[password=pw{i}]")
                     for i, p in enumerate(acls.principals())}
    applied = set()
    for c in calls:
        if c[0] == "kafka-acls.sh":
            principal = c[c.index("--allow-principal") + 1].removeprefix("User:")
            operation = c[c.index("--operation") + 1]
            pattern = c[c.index("--resource-pattern-type") + 1]
            applied |= {Grant(principal, operation, c[i][2:], c[i + 1], pattern)
                        for i in range(len(c)) if c[i] in ("--topic", "--group")}
    assert applied == set(acls.grants())

    # A password the SCRAM syntax would misread is refused, and nothing is applied.
    log.unlink()
    bad = subprocess.run(["sh", str(SCRIPT)], env={**env, acls.password_env("ingest"): "a,b]"},
                         capture_output=True, text=True, timeout=30, check=False)
    assert bad.returncode != 0 and "letters and digits only" in bad.stderr
    assert "kafka-acls.sh" not in log.read_text()
