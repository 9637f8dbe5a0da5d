"""The data-key store: one key per version, the same for every caller, wrapped on disk,
gone for good when destroyed (its bytes overwritten), and never made again after."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.keywrap import InvalidUnwrap
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.keys.sealing import key_id_for
from shared.keys.settings import KeySettings
from shared.keys.store import Destroyed, KeyStoreError, VersionKey, VersionKeys

KEK = bytes(range(32))


def store(tmp: Path, kek: bytes = KEK) -> VersionKeys:
    return VersionKeys(tmp / "keys" / "versions.sqlite", kek)


def test_a_version_gets_one_key_whoever_asks_and_however_often(tmp_path: Path) -> None:
    one, two = store(tmp_path), store(tmp_path)  # two workers sharing the store
    a = one.create([("d", 1), ("d", 2)])
    b = two.create([("d", 2), ("d", 1)])
    assert a[("d", 1)] == b[("d", 1)] and a[("d", 2)] == b[("d", 2)]
    assert a[("d", 1)] != a[("d", 2)]  # never shared between versions
    key = a[("d", 1)]
    assert isinstance(key, VersionKey) and key.key_id == key_id_for("d", 1)
    assert two.get("d", 1) == key and two.get("d", 3) is None
    assert "secret" not in repr(key) and key.secret.hex() not in repr(key)


def test_keys_are_wrapped_on_disk_and_a_wrong_kek_cannot_unwrap_them(tmp_path: Path) -> None:
    key = store(tmp_path).create([("d", 1)])[("d", 1)]
    assert isinstance(key, VersionKey)
    files = b"".join(p.read_bytes() for p in (tmp_path / "keys").iterdir())
    assert key.secret not in files
    with pytest.raises(KeyStoreError) as err:  # the stage stops: no record's fault
        store(tmp_path, bytes(32)).get("d", 1)
    assert isinstance(err.value.__cause__, InvalidUnwrap)
    assert os.stat(tmp_path / "keys" / "versions.sqlite").st_mode & 0o077 == 0


def test_a_destroyed_key_is_gone_from_every_file_and_never_made_again(tmp_path: Path) -> None:
    keys = store(tmp_path)
    made = keys.create([("d", 1), ("d", 2), ("d", 3), ("e", 1)])
    wrapped = [row[0] for row in keys._db.execute("SELECT wrapped FROM keys "  # noqa: SLF001
                                                  "WHERE doc_id = 'd' AND version < 3")]
    gone = keys.destroy("d", 3, "forget r1", now=100.0)
    assert [(g.version, g.key_id, g.reason) for g in gone] == [
        (1, key_id_for("d", 1), "forget r1"), (2, key_id_for("d", 2), "forget r1")]
    files = b"".join(p.read_bytes() for p in (tmp_path / "keys").iterdir())
    assert not any(w in files for w in wrapped)  # overwritten (secure_delete) and no WAL copy
    assert isinstance(keys.get("d", 1), Destroyed) and keys.get("d", 3) == made[("d", 3)]
    assert keys.get("e", 1) == made[("e", 1)]
    again = store(tmp_path).create([("d", 1), ("d", 2)])  # a replay of a forgotten version
    assert all(isinstance(v, Destroyed) for v in again.values())
    assert keys.destroy("d", 3, "forget r2") == gone  # idempotent: the markers stand


@settings(max_examples=30)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 4)), max_size=12),
       st.sampled_from("abc"), st.integers(1, 5))
def test_destroy_takes_exactly_the_versions_below(tmp_path_factory: pytest.TempPathFactory,
                                                  made: list[tuple[str, int]], doc: str,
                                                  below: int) -> None:
    keys = store(tmp_path_factory.mktemp("k"))
    keys.create(made)
    gone = {(g.doc_id, g.version) for g in keys.destroy(doc, below, "x")}
    assert gone == {(d, v) for d, v in made if d == doc and v < below}
    for d, v in set(made):
        assert isinstance(keys.get(d, v), Destroyed) == ((d, v) in gone)


def test_the_settings_name_a_bad_kek(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="STREAMRAG_KEYS_KEK must hold 64 hex"):
        KeySettings(kek="abc").kek_bytes()
    path = tmp_path / "kek"
    path.write_text("ab" * 32 + "\n")
    assert KeySettings(kek_file=path).kek_bytes() == bytes([0xAB] * 32)
    monkeypatch.setenv("STREAMRAG_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.delenv("STREAMRAG_KEYS_PATH", raising=False)
    assert KeySettings().store_path() == tmp_path / "d" / "keys" / "versions.sqlite"


def test_the_text_retention_destroys_the_keys_made_before_its_cut(tmp_path: Path) -> None:
    keys = store(tmp_path)
    keys.create([("old", 1), ("old", 2)])
    cut = time.time() + 0.001
    time.sleep(0.01)
    made = keys.create([("new", 1)])
    assert keys.expire(cut - 3600) == 0  # nothing that old
    assert keys.expire(cut) == 2
    assert isinstance(keys.get("old", 1), Destroyed) and isinstance(keys.get("old", 2),
                                                                   Destroyed)
    assert keys.get("new", 1) == made[("new", 1)] and keys.expire(cut) == 0
    assert keys.destroyed_of(["old"])[0].reason == "text retention"


def test_a_forget_of_a_document_ingest_forgot_takes_the_keys_made_before_it(
        tmp_path: Path) -> None:
    keys = store(tmp_path)
    keys.create([("d", 3)])
    asked = time.time() + 0.001
    time.sleep(0.01)
    later = keys.create([("d", 9)])[("d", 9)]  # made after the request: new content
    assert keys.held_below("d", 1, made_before=asked) == [(key_id_for("d", 3), 3)]
    gone = keys.destroy("d", 1, "forget r", made_before=asked)
    assert [g.version for g in gone] == [3] and keys.get("d", 9) == later
    assert keys.held_below("d", 1, made_before=asked) == []  # destroyed: no longer live
    assert keys.held_below("d", 4) == [(key_id_for("d", 3), 3)]  # its marker, by version


def test_an_unreachable_store_is_an_infrastructure_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(KeyStoreError):
        VersionKeys(tmp_path / "file" / "versions.sqlite", KEK)


def test_a_documents_transit_key_lasts_until_a_forget_or_its_rotation(tmp_path: Path) -> None:
    one, two = store(tmp_path), store(tmp_path)
    first = one.transit("d", now=100.0)
    assert two.transit("d", now=150.0) == first  # every parser of the store agrees
    assert first.version == -1 and first.key_id.startswith("t")
    assert one.transit("e", now=150.0) != first  # never shared between documents
    assert one.transit("d", now=100.0 + 3601.0).version == -2  # rotated by age
    assert one.close_transit("d") == 2
    after_forget = one.transit("d", now=3800.0)
    assert after_forget.version == -3
    assert two.by_id(first.key_id) == first and two.by_id(after_forget.key_id) == after_forget


def test_a_forget_takes_the_transit_keys_made_before_it_was_parsed_not_after(
        tmp_path: Path) -> None:
    keys = store(tmp_path)
    keys.create([("d", 1)])
    before = keys.transit("d", now=time.time() - 10)
    keys.close_transit("d")  # the forget is parsed ...
    asked = time.time()
    time.sleep(0.01)
    after = keys.transit("d")  # ... and a new change of the document after it
    held = keys.held_below("d", 2, asked)
    assert sorted(held) == sorted([(before.key_id, -1), (keys.get("d", 1).key_id, 1)])
    gone = keys.destroy("d", 2, "forget r1", made_before=asked)
    assert {g.key_id for g in gone} == {before.key_id, key_id_for("d", 1)}
    assert isinstance(keys.by_id(before.key_id), Destroyed)
    assert keys.by_id(after.key_id) == after  # what came after the forget still opens
    assert keys.transit("d") == after
    assert keys.by_id("t-no-such-key") is None


def test_a_destroyed_generation_is_never_made_again(tmp_path: Path) -> None:
    keys = store(tmp_path)
    gens = []
    for _ in range(3):
        gens.append(keys.transit("d").key_id)
        keys.destroy("d", None, "forget", made_before=time.time() + 1)
    assert len(set(gens)) == 3 and all(isinstance(keys.by_id(k), Destroyed) for k in gens)


def test_the_parsed_retention_takes_transit_keys_only(tmp_path: Path) -> None:
    keys = store(tmp_path)
    version = keys.create([("d", 1)])[("d", 1)]
    transit = keys.transit("d")
    assert keys.expire(time.time() + 1, "parsed retention", transit_only=True) == 1
    assert isinstance(keys.by_id(transit.key_id), Destroyed)
    assert keys.get("d", 1) == version
    assert keys.expire(time.time() + 1) == 1  # the text retention takes both kinds
    assert isinstance(keys.get("d", 1), Destroyed)


def test_content_hashes_are_keyed_by_the_kek(tmp_path: Path) -> None:
    import hashlib
    digest = hashlib.sha256(b"some text").hexdigest()
    one, other = store(tmp_path), store(tmp_path / "x", bytes(32))
    assert one.content_mac(digest) == store(tmp_path).content_mac(digest)
    assert one.content_mac(digest) != other.content_mac(digest)
    assert digest not in one.content_mac(digest)
    assert one.content_mac(digest) != one.content_mac(hashlib.sha256(b"other").hexdigest())
