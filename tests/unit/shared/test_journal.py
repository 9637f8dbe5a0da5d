"""The journal's frames and files (shared/cli/journal.py) and the backup copy of them
(shared/cli/backup.py), without a broker: tests/integration/test_durable.py runs both
against the real one."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from aiokafka import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.cli.backup import backup, place
from shared.cli.journal import Frame, Journal, encode_frame, read_frames

frames = st.builds(
    Frame, offset=st.integers(0, 2**63 - 1), timestamp_ms=st.integers(-1, 2**62),
    key=st.none() | st.binary(max_size=64), value=st.none() | st.binary(max_size=256),
    headers=st.lists(st.tuples(st.text(max_size=10), st.binary(max_size=20)), max_size=3
                     ).map(tuple))


@settings(max_examples=200, deadline=None)
@given(st.lists(frames, max_size=8), st.integers(0, 200))
def test_frames_read_back_as_written_and_a_torn_tail_is_dropped(
        tmp_path_factory: pytest.TempPathFactory, written: list[Frame], cut: int) -> None:
    path = tmp_path_factory.mktemp("j") / "0.log"
    data = b"".join(encode_frame(f) for f in written)
    path.write_bytes(data)
    assert [f for f, _ in read_frames(path)] == written
    torn = data[:max(0, len(data) - cut)]
    path.write_bytes(torn)
    back = [f for f, _ in read_frames(path)]
    assert back == written[:len(back)]  # a prefix: whole frames only, nothing invented
    assert sum(len(encode_frame(f)) for f in back) <= len(torn)


def test_a_corrupt_byte_ends_the_log_there(tmp_path: Path) -> None:
    one, two = (Frame(i, 1, b"k", b"v%d" % i, ()) for i in range(2))
    data = bytearray(encode_frame(one) + encode_frame(two))
    data[len(encode_frame(one)) + 20] ^= 0xFF
    path = tmp_path / "0.log"
    path.write_bytes(bytes(data))
    assert [f for f, _ in read_frames(path)] == [one]


def record(offset: int, value: bytes) -> SimpleNamespace:
    return SimpleNamespace(offset=offset, timestamp=1_700_000_000_000 + offset, key=b"k",
                           value=value, headers=[("h", b"x")])


def test_the_journal_appends_once_cuts_a_torn_tail_and_resumes_after_it(tmp_path: Path) -> None:
    tp = TopicPartition("docs.raw.v1", 2)
    journal = Journal(tmp_path)
    assert journal.next_offset(tp) == 0
    for i in range(3):
        journal.append(tp, record(i, b"v%d" % i))
    journal.append(tp, record(1, b"again"))  # a re-fetch: already journaled
    journal.close()
    with open(journal.path(tp), "ab") as f:
        f.write(encode_frame(Frame(3, 0, None, b"torn", ()))[:-3])
    again = Journal(tmp_path)
    assert again.next_offset(tp) == 3
    again.close()
    assert [f.value for f, _ in read_frames(again.path(tp))] == [b"v0", b"v1", b"v2"]


def test_a_backup_copies_offsets_logs_and_chain_and_is_placed_for_the_next_start(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    journal = Journal(run / "journal")
    tp = TopicPartition("chunks.v1", 0)
    for i in range(4):
        journal.append(tp, record(i, b"c%d" % i))
    journal.note_topics({"chunks.v1": 4})
    journal.save_groups({"streamrag-onebox": [("chunks.v1", 0, 3)]})
    (run / "chain-state.json").write_text('{"block": 7}')
    counts = backup(run, tmp_path / "copy")
    assert counts == {"records": 4, "partitions": 1}
    assert json.loads((tmp_path / "copy" / "manifest.json").read_text())["records"] == 4
    with pytest.raises(FileExistsError):
        backup(run, tmp_path / "copy")
    place(tmp_path / "copy", tmp_path / "elsewhere")
    moved = Journal(tmp_path / "elsewhere" / "journal")
    assert moved.groups() == {"streamrag-onebox": [("chunks.v1", 0, 3)]}
    assert [f.value for f, _ in read_frames(moved.path(tp))] == [b"c0", b"c1", b"c2", b"c3"]
    assert (tmp_path / "elsewhere" / "chain-state.json").read_text() == '{"block": 7}'
    with pytest.raises(FileExistsError):
        place(tmp_path / "copy", tmp_path / "elsewhere")
