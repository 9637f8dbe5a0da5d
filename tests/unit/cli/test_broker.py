"""The embedded Kafka's pure parts: cluster ids a command line can take, and each node's
server.properties (one node, a replicated cluster, the SASL listener compose runs)."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import pytest

from services.cli import broker
from services.cli.broker import Node, Sasl, cluster_id, render, server_properties


def test_cluster_ids_are_kafka_s_shape_and_never_read_as_an_option(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xf8.. encodes to "-"...: the first such draw is skipped, the next one taken.
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(int=7)])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(draws))
    made = cluster_id()
    assert made == base64.urlsafe_b64encode(uuid.UUID(int=7).bytes).decode().rstrip("=")
    for _ in range(500):
        monkeypatch.undo()
        made = cluster_id()
        assert len(made) == 22 and not made.startswith("-")
        assert len(base64.urlsafe_b64decode(made + "==")) == 16


def test_one_node_is_its_own_quorum_with_one_replica(tmp_path: Path) -> None:
    props = server_properties(Node(1, "127.0.0.1", 19092, 19093, tmp_path / "node-1"))
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert props["advertised.listeners"] == "CLIENTS://127.0.0.1:19092"
    assert props["listener.security.protocol.map"] == "CLIENTS:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["log.dirs"] == str((tmp_path / "node-1").resolve())
    assert "authorizer.class.name" not in props
    assert props["auto.create.topics.enable"] == "false"  # as compose's broker


def test_a_replicated_node_names_every_voter_and_its_insync_minimum(tmp_path: Path) -> None:
    voters = "1@h:1,2@h:2,3@h:3"
    props = server_properties(Node(2, "h", 9092, 2, tmp_path, voters=voters, replication=3,
                                   min_insync=2, extra={"num.partitions": "6"}))
    assert props["controller.quorum.voters"] == voters
    assert (props["default.replication.factor"], props["min.insync.replicas"]) == ("3", "2")
    assert props["transaction.state.log.min.isr"] == "2"
    assert props["num.partitions"] == "6"  # extra wins over the embedded defaults


def test_the_sasl_listener_denies_what_no_acl_allows(tmp_path: Path) -> None:
    props = server_properties(Node(1, "h", 1, 2, tmp_path, sasl=Sasl("s3cret")))
    assert props["listener.security.protocol.map"] == ("CLIENTS:SASL_PLAINTEXT,"
                                                       "CONTROLLER:SASL_PLAINTEXT")
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:admin"
    assert 'password="s3cret"' in props["listener.name.clients.plain.sasl.jaas.config"]
    assert render({"a": "1", "b": "x y"}) == "a=1\nb=x y\n"
