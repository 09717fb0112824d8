"""byoc's disk cache of parsed spec YAML and Lark parser tables (byoc/disk_cache.py):
a hit gives what parsing gives, a broken or unwritable cache only costs time, and an
error is never cached."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from byoc.disk_cache import cache_dir, cached, entry_key
from byoc.errors import SpecError
from byoc.spec.yaml_doc import YamlDoc

SPEC_DIR = Path(__file__).resolve().parents[1] / "spec"


def entries(root: Path, kind: str) -> list[Path]:
    return sorted(p for p in (root / kind).rglob("*") if p.is_file()) if (root / kind).exists() else []


def test_a_hit_does_not_make_the_value_again(private_cache):
    made = []

    def make():
        made.append(1)
        return {"value": [1, 2, 3]}

    key = entry_key("test", "one")
    assert cached("test", key, make) == {"value": [1, 2, 3]}
    assert cached("test", key, make) == {"value": [1, 2, 3]}
    assert len(made) == 1
    assert [p.name for p in entries(private_cache, "test")] == [key]


def test_keys_depend_on_every_part():
    assert entry_key("a", "bc") != entry_key("ab", "c")
    assert entry_key("a") != entry_key("a", "")
    assert len(entry_key("x")) == 64


def test_a_corrupt_entry_is_made_again_and_replaced(private_cache):
    key = entry_key("test", "corrupt")
    cached("test", key, lambda: [1])
    (entry,) = entries(private_cache, "test")
    entry.write_bytes(b"not a pickle")
    assert cached("test", key, lambda: [2]) == [2]
    assert cached("test", key, lambda: [3]) == [2]  # the replacement is used


def test_an_unwritable_cache_still_gives_the_value(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("BYOC_CACHE_DIR", str(blocker))
    assert cache_dir() == blocker
    assert cached("test", entry_key("x"), lambda: "value") == "value"


def test_an_error_propagates_and_nothing_is_stored(private_cache):
    def make():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        cached("test", entry_key("err"), make)
    assert entries(private_cache, "test") == []


def test_a_cached_yaml_document_points_where_the_parsed_one_does(private_cache):
    path = SPEC_DIR / "backends" / "ccompiler.yaml"
    first = YamlDoc(path)
    assert len(entries(private_cache, "yaml")) == 1
    second = YamlDoc(path)
    assert second.root == first.root and second.root is not first.root
    for key in list(first.root)[:12]:
        assert second.at(second.root, key) == first.at(first.root, key)
        assert second.at(second.root, key, value=True) == first.at(first.root, key, value=True)


def test_invalid_yaml_is_an_error_every_time_and_never_cached(private_cache, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: a\nname: b\n")
    for _ in range(2):
        with pytest.raises(SpecError, match="duplicate key 'name'") as info:
            YamlDoc(bad)
        assert (info.value.location.line, info.value.location.column) == (2, 1)
    assert entries(private_cache, "yaml") == []


PARSE = """
import byoc
p = byoc.parse("graph main(x: float32[2]) { y = add(x, x) return y }")
print(byoc.print_program(p), end="")
"""


def test_the_lark_tables_are_cached_and_a_broken_cache_file_is_rebuilt(private_cache):
    def parse() -> str:
        out = subprocess.run([sys.executable, "-c", PARSE], capture_output=True, text=True, check=True)
        assert out.stderr == ""
        return out.stdout

    first = parse()
    (tables,) = entries(private_cache, "lark")
    assert tables.suffix == ".lark"
    assert parse() == first
    tables.write_bytes(b"garbage")
    assert parse() == first
    assert tables.read_bytes() != b"garbage"


def test_the_compiler_banner_is_cached_until_the_compiler_changes(private_cache, tmp_path):
    from byoc.runtime.build import compiler_version

    calls = tmp_path / "calls"
    fake = tmp_path / "fakecc"
    fake.write_text(f'#!/bin/sh\necho x >> "{calls}"\necho "fakecc 1.0"\n')
    fake.chmod(0o755)
    version = compiler_version.__wrapped__  # past the per-process lru_cache
    assert version((str(fake),)) == "fakecc 1.0"
    assert version((str(fake),)) == "fakecc 1.0"
    assert calls.read_text().count("x") == 1
    fake.write_text(f'#!/bin/sh\necho x >> "{calls}"\necho "fakecc 2.0 (upgraded)"\n')
    assert version((str(fake),)) == "fakecc 2.0 (upgraded)"
    assert calls.read_text().count("x") == 2
