"""The cache as a bounded store (runtime/cache_store.py) and ``byoc cache``: entries of
every kind listed, least-recently-used eviction down to $BYOC_CACHE_MAX sparing recent
entries, builds touching what they find and pruning after what they make, and the
command's info, prune and clear, with located errors for a bad size."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_cli

import byoc
from byoc.errors import UsageError
from byoc.runtime import cache_store
from byoc.runtime.cache_store import bound, entries, parse_size, prune


def fake_entry(root: Path, kind_dir: str, key: str, size: int, age_s: float) -> Path:
    """An entry of ``size`` bytes last used ``age_s`` seconds ago."""
    entry = root / kind_dir / key[:2] / key if kind_dir else root / key[:2] / key
    entry.mkdir(parents=True)
    (entry / "payload").write_bytes(b"x" * size)
    when = time.time() - age_s
    os.utime(entry, (when, when))
    return entry


def test_sizes_read_as_people_write_them():
    assert parse_size("123") == 123
    assert parse_size("500M") == 500 << 20
    assert parse_size("2g") == 2 << 30
    assert parse_size("1.5GiB") == 3 << 29
    assert parse_size("0") == 0
    with pytest.raises(UsageError, match=r"\$BYOC_CACHE_MAX is 'lots', not a size"):
        parse_size("lots")
    assert bound({}) == cache_store.DEFAULT_MAX
    assert bound({"BYOC_CACHE_MAX": "64K"}) == 64 << 10


def test_every_kind_of_entry_is_listed(tmp_path):
    fake_entry(tmp_path, "", "ab" + "0" * 62, 10, 5)
    fake_entry(tmp_path, "bundles", "cd" + "1" * 62, 20, 5)
    fake_entry(tmp_path, "yaml", "ef" + "2" * 62, 30, 5)
    (tmp_path / "lark").mkdir()
    (tmp_path / "lark" / "k.lark").write_bytes(b"y" * 40)
    fake_entry(tmp_path, "onnx-checked", "01" + "3" * 62, 50, 5)
    (tmp_path / "tmp" / "build.x").mkdir(parents=True)  # a build in progress is no entry
    found = {e.kind: e.size for e in entries(tmp_path)}
    assert found == {"build": 10, "bundle": 20, "spec": 30, "parser": 40, "check": 50}


def test_prune_evicts_the_least_recently_used_first(tmp_path):
    old = fake_entry(tmp_path, "", "aa" + "0" * 62, 1000, 300)
    middle = fake_entry(tmp_path, "bundles", "bb" + "0" * 62, 1000, 200)
    new = fake_entry(tmp_path, "", "cc" + "0" * 62, 1000, 100)
    gone = prune(2100, tmp_path)
    assert [e.path for e in gone] == [old]
    assert middle.exists() and new.exists() and not old.exists()
    assert sum(e.size for e in entries(tmp_path)) <= 2100
    assert prune(0, tmp_path) == []  # 0: no bound


def test_prune_spares_entries_used_recently(tmp_path):
    old = fake_entry(tmp_path, "", "aa" + "0" * 62, 1000, 300)
    recent = fake_entry(tmp_path, "", "bb" + "0" * 62, 1000, 5)
    gone = prune(10, tmp_path, keep_recent=60)
    assert [e.path for e in gone] == [old] and recent.exists()


def libraries(root):
    """The build entries that hold a library (not a support object that libraries link)."""
    return [e for e in entries(root) if e.kind == "build" and any(e.path.glob("lib*.so"))]


def test_a_build_touches_what_it_finds_and_prunes_after_what_it_makes(private_cache, monkeypatch):
    graph = EXAMPLES / "mlp.graph"
    byoc.build(graph, backends=["fused"])
    (built,) = libraries(private_cache)
    os.utime(built.path, (1, 1))
    byoc.build(graph, backends=["fused"])  # a hit: the entry is used now
    (found,) = libraries(private_cache)
    assert found.path == built.path and found.used > time.time() - 60
    # an old entry beyond the bound goes when the next build makes a new one
    stale = fake_entry(private_cache, "", "ee" + "0" * 62, 4096, 3600)
    monkeypatch.setenv("BYOC_CACHE_MAX", "1K")
    monkeypatch.setattr(cache_store, "_last_pruned", {})
    byoc.build(EXAMPLES / "resnet_basic_block.graph", backends=["fused"])
    assert not stale.exists()
    assert all(e.used > time.time() - 60 for e in entries(private_cache))  # recent ones stay


def test_cache_command_shows_prunes_and_clears(private_cache, capsys):
    fake_entry(private_cache, "", "aa" + "0" * 62, 3000, 300)
    fake_entry(private_cache, "bundles", "bb" + "0" * 62, 2000, 100)
    rc, out, _ = run_cli(capsys, "cache", "info")
    assert rc == 0 and f"cache: {private_cache}" in out
    assert (
        "build          1 entry" in out
        and "bundle         1 entry" in out
        and "total          2 entries" in out
    )
    rc, out, _ = run_cli(capsys, "cache", "prune", "--max", "2500")
    assert rc == 0 and out.startswith("evicted 1 entry (2.9 KiB)")
    assert [e.kind for e in entries(private_cache)] == ["bundle"]
    rc, out, _ = run_cli(capsys, "cache", "clear")
    assert rc == 0 and out.startswith("removed 1 entry") and entries(private_cache) == []


def test_cache_command_refuses_bad_sizes_with_a_hint(private_cache, capsys, monkeypatch):
    rc, _, err = run_cli(capsys, "cache", "prune", "--max", "huge")
    assert rc == 2 and "--max is 'huge', not a size" in err and "500M, 2G" in err
    rc, _, err = run_cli(capsys, "cache", "info", "--max", "1G")
    assert rc == 2 and "--max applies to prune, not info" in err
    monkeypatch.setenv("BYOC_CACHE_MAX", "lots")
    rc, _, err = run_cli(capsys, "cache", "info")
    assert rc == 2 and "$BYOC_CACHE_MAX is 'lots', not a size" in err


def test_a_build_stores_each_library_once(private_cache, tmp_path):
    """A model built in this process loads its libraries from their build entries; only
    a bundle read from a file unpacks them (once per content)."""
    import byoc.runtime

    model = byoc.build(EXAMPLES / "mlp.graph", backends=["fused"])
    assert (
        len(libraries(private_cache)) == 1 and [e for e in entries(private_cache) if e.kind == "bundle"] == []
    )
    model.save(tmp_path / "mlp.byoc")
    byoc.runtime.load(tmp_path / "mlp.byoc")
    byoc.runtime.load(tmp_path / "mlp.byoc")
    assert (
        len(libraries(private_cache)) == 1
        and len([e for e in entries(private_cache) if e.kind == "bundle"]) == 1
    )
