"""`streamrag config` against an in-memory config.query.v1: set, show, history, rollback,
and refusals that exit 2 and write nothing."""

from __future__ import annotations

import io
import json

import pytest

from services.cli import config
from services.cli.main import build_parser
from shared.contract.query_config import key_of, parse


class FakeLog:
    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    async def read(self) -> list[bytes | None]:
        return [v for _, v in self.records]

    async def write(self, key: bytes, value: bytes) -> None:
        self.records.append((key, value))


def cli(log: FakeLog, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = config.run(build_parser().parse_args(["config", *argv]), log, out)
    return code, out.getvalue()


def test_set_writes_the_next_version_with_the_current_content_and_the_change() -> None:
    log = FakeLog()
    assert cli(log, "set", "default_top_k=3", "hybrid=false", "--author", "ann")[0] == 0
    assert cli(log, "set", "canary.weight=5", "stable.weight=95", "canary.hybrid=true",
               "--author", "bob", "--note", "try hybrid")[0] == 0
    assert [k for k, _ in log.records] == [key_of(1), key_of(2)]
    v2 = parse(log.records[1][1])
    assert (v2.version, v2.author, v2.note) == (2, "bob", "try hybrid")
    assert v2.knobs.set() == {"default_top_k": 3, "hybrid": False}
    assert {n: v.weight for n, v in v2.variants.items()} == {"canary": 5, "stable": 95}
    assert v2.variants["canary"].overrides.set() == {"hybrid": True}
    code, shown = cli(log, "show")
    assert code == 0 and json.loads(shown)["version"] == 2
    # null unsets a knob; removing a variant drops it.
    cli(log, "set", "hybrid=null", "--remove-variant", "canary", "--remove-variant", "stable")
    v3 = parse(log.records[2][1])
    assert v3.knobs.set() == {"default_top_k": 3} and not v3.variants


@pytest.mark.parametrize("change", ["top_k=3", "default_top_k=0", "default_top_k=abc",
                                    "hybrid=1", "dense_weight=1e9", "canary.weight=-1",
                                    "Bad Name.weight=3", "fusion_method=max", "nokeyvalue"])
def test_a_bad_change_exits_2_with_a_reason_and_writes_nothing(
        change: str, capsys: pytest.CaptureFixture[str]) -> None:
    log = FakeLog()
    cli(log, "set", "default_top_k=4")
    code, _ = cli(log, "set", change)
    assert code == config.REFUSED and len(log.records) == 1
    assert "refused" in capsys.readouterr().err


def test_rollback_writes_a_new_version_with_the_old_content() -> None:
    log = FakeLog()
    cli(log, "set", "default_top_k=3")
    cli(log, "set", "default_top_k=9", "rrf_k=10")
    code, said = cli(log, "rollback", "1", "--author", "ops")
    assert code == 0 and "version 3" in said
    v3 = parse(log.records[2][1])
    assert (v3.version, v3.rollback_of, v3.author) == (3, 1, "ops")
    assert v3.knobs.set() == {"default_top_k": 3}
    assert cli(log, "rollback", "7")[0] == config.REFUSED  # no such version
    assert len(log.records) == 3


def test_history_lists_every_version_and_each_refused_record() -> None:
    log = FakeLog()
    cli(log, "set", "default_top_k=3", "--author", "ann", "--note", "first")
    log.records.append((key_of(1), log.records[0][1]))  # a stale repeat of version 1
    log.records.append((b"query/x", b"{broken"))
    cli(log, "set", "canary.weight=1", "stable.weight=9", "--author", "bob")
    cli(log, "rollback", "1", "--author", "ops")
    code, text = cli(log, "history")
    lines = text.splitlines()
    assert code == 0 and len(lines) == 5
    assert lines[0].startswith("version 1 ") and "ann" in lines[0] and "(first)" in lines[0]
    assert "refused, stale_version" in lines[1] and "refused, malformed_json" in lines[2]
    assert lines[3].startswith("version 2 ") and "canary 1, stable 9" in lines[3]
    assert lines[4].startswith("version 3 ") and "rollback to 1" in lines[4]
    # The next version follows the highest applied one, whatever was refused between.
    assert parse(log.records[-1][1]).version == 3


def test_wait_asks_inference_until_the_version_is_applied() -> None:
    args = build_parser().parse_args(["config", "set", "hybrid=false", "--wait", "2",
                                      "--target", "inference:1"])
    answers = iter([0, 0, 4])
    out = io.StringIO()
    assert config._waited(args, 4, out, lambda target: next(answers)) == 0
    assert "applied by inference:1" in out.getvalue()


def test_wait_exits_1_when_the_version_is_never_applied(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["config", "rollback", "2", "--wait", "0.3",
                                      "--target", "inference:1"])
    assert config._waited(args, 5, io.StringIO(), lambda target: 4) == config.NOT_APPLIED
    assert "version 5 not applied by inference:1" in capsys.readouterr().err
