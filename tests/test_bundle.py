""".byoc bundles that load: a round trip keeps the outputs and the bytes (fresh
builds, ``byoc build`` and saving a loaded model all write the same bytes), the
manifest records every member's size and sha256, and any zip with the right
members loads, from a str or a Path. Corrupt bundles are in
test_bundle_corrupt.py."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from bundle_support import entries, write_zip

import byoc.runtime
from byoc import cli
from byoc.building import build
from byoc.runtime.bundle import read_bundle
from byoc.runtime.manifest import MANIFEST, GraphEntry, LibraryEntry, Manifest


@pytest.fixture
def inputs():
    rng = np.random.default_rng(3)
    return {n: rng.uniform(-2, 2, (3, 4)).astype(np.float32) for n in ("x", "y")}


def expected(inputs):
    s = (inputs["x"] + inputs["y"]) * np.float32(0.5)
    return s, s - inputs["y"]


def check(outputs, inputs):
    assert len(outputs) == 2
    for got, want in zip(outputs, expected(inputs)):
        assert got.dtype == np.float32 and got.shape == (3, 4)
        np.testing.assert_allclose(got, want, rtol=1e-6)


# ------------------------------------------------------------------ round trip


def test_round_trip(bundle, inputs, tmp_path):
    model = byoc.runtime.load(bundle)
    check(model(**inputs), inputs)
    check(model.run("main", **inputs), inputs)
    # saving the loaded model gives the very same bytes, and so does saving twice
    again, twice = tmp_path / "again.byoc", tmp_path / "twice.byoc"
    model.save(again)
    model.save(twice)
    assert again.read_bytes() == bundle.read_bytes() == twice.read_bytes()
    check(byoc.runtime.load(again)(**inputs), inputs)


def test_fresh_builds_save_identical_bytes(bundle, tmp_path):
    source = bundle.parent / "g.graph"
    first, second = tmp_path / "1.byoc", tmp_path / "2.byoc"
    build(source).save(first)
    build(source).save(second)
    assert first.read_bytes() == second.read_bytes() == bundle.read_bytes()


def test_contents(bundle):
    manifest, members = read_bundle(bundle)
    raw = json.loads(dict(entries(bundle))[MANIFEST])
    assert raw["format"] == "byoc-bundle" and raw["version"] == 1
    assert set(manifest.members) == set(members) == set(raw["members"])
    for name, record in manifest.members.items():
        assert record.size == len(members[name])
        assert record.sha256 == hashlib.sha256(members[name]).hexdigest()
    assert {"main.graph.json", "main.host.graph", "source.graph"} <= set(members)
    assert manifest.source == "source.graph"
    assert manifest.graphs == (GraphEntry("main", "main.graph.json", "main.host.graph"),)
    (module,) = manifest.modules
    if isinstance(module, LibraryEntry):
        assert module.file in members and all(s in members for s in module.sources)
        assert len(members[module.file]) > 0
        assert raw["modules"][0]["kind"] == "library"
    else:
        assert "const_values" in json.loads(members[module.file])
        assert raw["modules"][0]["kind"] == module.module_format.value


def test_manifest_json_round_trip(bundle):
    """The typed manifest writes the very JSON it was read from."""
    manifest, _ = read_bundle(bundle)
    text = dict(entries(bundle))[MANIFEST].decode()
    assert manifest.to_json() == text
    assert Manifest.from_json(text, "again") == manifest


def test_cli_build_then_run(bundle, tmp_path, capsys):
    path = tmp_path / "cli.byoc"
    assert cli.main(["build", str(bundle.parent / "g.graph"), "-o", str(path)]) == 0
    assert path.read_bytes() == bundle.read_bytes()
    capsys.readouterr()
    assert cli.main(["run", str(path)]) == 0
    assert "result: every output matches the numpy reference" in capsys.readouterr().out


# ------------------------------------------------------------------ loading


def test_bundle_written_by_a_zip_tool_is_fine(bundle, tmp_path, inputs):
    """Any zip with the right members and manifest loads: stored, not deflated."""
    path = write_zip(tmp_path / "stored.byoc", entries(bundle), compression=zipfile.ZIP_STORED)
    check(byoc.runtime.load(path)(**inputs), inputs)


def test_load_takes_str_or_path(bundle, inputs):
    check(byoc.runtime.load(str(bundle))(**inputs), inputs)
    check(byoc.runtime.load(Path(bundle))(**inputs), inputs)
