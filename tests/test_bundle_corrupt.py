"""Corrupt .byoc bundles: every kind of damage to the file (truncation, bit flips,
not a zip, a changed or resized member) and every kind of bad manifest (fields,
not JSON, absent, unlisted or unsafe members, inconsistent modules and graphs,
deeply nested JSON, library signatures) is a clear RuntimeFailure from
``byoc.runtime.load`` (and exit 2 with no traceback from ``byoc run``), never
another exception."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from bundle_support import entries, make_bundle, write_zip

import byoc.runtime
from byoc import cli
from byoc.errors import ByocError, RuntimeFailure
from byoc.runtime.bundle import MANIFEST, read_bundle


@pytest.fixture(scope="module")
def library_bundle(tmp_path_factory) -> Path:
    return make_bundle("ccompiler", tmp_path_factory)


@pytest.fixture(scope="module")
def json_bundle(tmp_path_factory) -> Path:
    return make_bundle("json", tmp_path_factory)


def manifest_of(path: Path) -> dict:
    return json.loads(dict(entries(path))[MANIFEST])


def with_manifest(path: Path, out: Path, edit, *, extra=(), drop=()) -> Path:
    """A copy of the bundle with ``edit(manifest)`` applied (digests of the members
    left as they were), ``extra`` (name, bytes) members added and ``drop`` removed."""
    items = entries(path)
    manifest = json.loads(dict(items)[MANIFEST])
    edit(manifest)
    rest = [(n, d) for n, d in items if n != MANIFEST and n not in drop]
    return write_zip(out, [(MANIFEST, json.dumps(manifest).encode()), *rest, *extra])


def listed(manifest: dict, name: str, data: bytes) -> None:
    """Record member ``name`` in the manifest with its right size and digest."""
    manifest["members"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def assert_corrupt(path: Path, capsys, *words: str) -> RuntimeFailure:
    with pytest.raises(RuntimeFailure) as info:
        byoc.runtime.load(path)
    message = info.value.render()
    for word in words:
        assert word in message, message
    assert isinstance(info.value, ByocError)
    capsys.readouterr()
    rc = cli.main(["run", str(path)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err and err.startswith("runtime error: "), err
    assert info.value.message in err
    return info.value


# ------------------------------------------------------------------ damaged files


@pytest.mark.parametrize("keep", [0.5, 0.9, -1, -22, 30, 4])
def test_truncated(bundle, tmp_path, capsys, keep):
    raw = bundle.read_bytes()
    cut = int(len(raw) * keep) if isinstance(keep, float) else (keep if keep > 0 else len(raw) + keep)
    path = tmp_path / "truncated.byoc"
    path.write_bytes(raw[:cut])
    assert_corrupt(path, capsys, str(path))


def test_empty_file(tmp_path, capsys):
    path = tmp_path / "empty.byoc"
    path.write_bytes(b"")
    assert_corrupt(path, capsys, "not a valid byoc bundle", "rebuild it")


@pytest.mark.parametrize(
    "content", [b"graph main() {}\n", b"\x7fELF\x02\x01\x01" + bytes(100), b"PK\x03\x04garbage"]
)
def test_not_a_zip(tmp_path, capsys, content):
    path = tmp_path / "text.byoc"
    path.write_bytes(content)
    assert_corrupt(path, capsys, "not a valid byoc bundle")


def test_missing_and_unreadable_paths(tmp_path, capsys):
    assert_corrupt(tmp_path / "absent.byoc", capsys, "cannot read bundle")
    directory = tmp_path / "dir.byoc"
    directory.mkdir()
    assert_corrupt(directory, capsys, "cannot read bundle")


def _data_offset(raw: bytes, info: zipfile.ZipInfo) -> int:
    """Where a member's (compressed) data starts: after its local header."""
    name_len = int.from_bytes(raw[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_len = int.from_bytes(raw[info.header_offset + 28 : info.header_offset + 30], "little")
    return info.header_offset + 30 + name_len + extra_len


def test_bit_flip_in_every_member(bundle, tmp_path, capsys):
    raw = bundle.read_bytes()
    with zipfile.ZipFile(bundle) as archive:
        infos = archive.infolist()
    assert len(infos) >= 5
    original = read_bundle(bundle)
    for info in infos:
        caught = 0
        # (not the last byte: a flip in the deflate stream's final padding bits is harmless)
        for where in (0, info.compress_size // 3, info.compress_size // 2, 2 * info.compress_size // 3):
            flipped = bytearray(raw)
            flipped[_data_offset(raw, info) + where] ^= 0x10
            path = tmp_path / f"flip_{info.filename}_{where}.byoc"
            path.write_bytes(bytes(flipped))
            with zipfile.ZipFile(path) as archive:
                try:
                    same = archive.read(info.filename) == dict(entries(bundle))[info.filename]
                except Exception:  # a stream that no longer decodes, or a bad CRC
                    same = False
            if same:  # a flip deflate ignores (a code for a symbol the stream never uses):
                assert read_bundle(path) == original  # nothing changed, nothing to catch
                continue
            assert_corrupt(path, capsys, str(path))
            caught += 1
        assert caught >= 3, info.filename  # a flip that changes a member is always caught


def test_every_bit_flip_is_caught_or_harmless(bundle, tmp_path):
    """Flip bits all over the file: loading raises RuntimeFailure or reads exactly
    the original contents (a flip in a timestamp or attribute field is harmless)."""
    raw = bundle.read_bytes()
    original = read_bundle(bundle)
    path = tmp_path / "flipped.byoc"
    rng = np.random.default_rng(0)
    positions = sorted(
        set(rng.integers(0, len(raw), 300).tolist()) | set(range(0, 64)) | set(range(len(raw) - 64, len(raw)))
    )
    caught = 0
    for pos in positions:
        flipped = bytearray(raw)
        flipped[pos] ^= 1 << (pos % 8)
        path.write_bytes(bytes(flipped))
        try:
            assert read_bundle(path) == original, pos
        except RuntimeFailure:
            caught += 1
    assert caught > len(positions) // 2


def test_sha256_catches_a_changed_member(bundle, tmp_path, capsys):
    """A member changed with a consistent zip (CRC and size right): only the
    manifest's sha256 can tell."""
    items = entries(bundle)
    name, data = next((n, d) for n, d in items if n == "main.host.graph")
    changed = data.replace(b"subtract", b"multiply")
    assert len(changed) == len(data) and changed != data
    path = write_zip(tmp_path / "changed.byoc", [(n, changed if n == name else d) for n, d in items])
    assert_corrupt(path, capsys, "main.host.graph", "sha256")


def test_size_mismatch(bundle, tmp_path, capsys):
    items = entries(bundle)
    path = write_zip(
        tmp_path / "longer.byoc",
        [(n, d + b"\n" if n == "source.graph" else d) for n, d in items],
    )
    assert_corrupt(path, capsys, "source.graph", "wrong size")


# ------------------------------------------------------------------ the manifest


def _set(key, value):
    def edit(manifest):
        manifest[key] = value

    return edit


def _delete(key):
    def edit(manifest):
        del manifest[key]

    return edit


@pytest.mark.parametrize(
    "edit,words",
    [
        (_set("version", 2), ["bundle version 2", "this byoc reads version 1", "rebuild"]),
        (_set("version", "1"), ["bundle version '1'"]),
        (_delete("version"), ["bundle version None"]),
        (_set("format", "zip"), ["is not a byoc bundle", "'zip'"]),
        (_delete("format"), ["is not a byoc bundle"]),
        (_set("members", []), ["lacks a valid 'members'"]),
        (_set("graphs", {}), ["lacks a valid 'graphs'"]),
        (_delete("modules"), ["lacks a valid 'modules'"]),
    ],
)
def test_manifest_fields(bundle, tmp_path, capsys, edit, words):
    path = with_manifest(bundle, tmp_path / "edited.byoc", edit)
    assert_corrupt(path, capsys, *words)


@pytest.mark.parametrize(
    "text,words",
    [
        (b"{", "manifest.json is not valid JSON"),
        (b"", "manifest.json is not valid JSON"),
        (b"not json", "manifest.json is not valid JSON"),
        (b"\xff\xfe\x00", "manifest.json is not valid JSON"),
        (b"[1, 2]", "is not a byoc bundle"),
        (b'"byoc-bundle"', "is not a byoc bundle"),
        (b"null", "is not a byoc bundle"),
        (b"[" * 100_000, "manifest.json is not valid JSON"),
    ],
    ids=["open", "empty", "words", "not-utf8", "list", "string", "null", "deep"],
)
def test_manifest_not_json_or_not_an_object(bundle, tmp_path, capsys, text, words):
    items = [(n, d) for n, d in entries(bundle) if n != MANIFEST]
    path = write_zip(tmp_path / "bad_manifest.byoc", [(MANIFEST, text), *items])
    assert_corrupt(path, capsys, words)


def test_no_manifest(bundle, tmp_path, capsys):
    items = [(n, d) for n, d in entries(bundle) if n != MANIFEST]
    path = write_zip(tmp_path / "no_manifest.byoc", items)
    assert_corrupt(path, capsys, "has no manifest.json")


def test_manifest_names_an_absent_member(bundle, tmp_path, capsys):
    def edit(manifest):
        listed(manifest, "ghost.json", b"{}")

    path = with_manifest(bundle, tmp_path / "absent.byoc", edit)
    assert_corrupt(path, capsys, "'ghost.json'", "lacks it")
    # a listed member removed from the archive
    path = with_manifest(bundle, tmp_path / "dropped.byoc", lambda m: None, drop=("main.graph.json",))
    assert_corrupt(path, capsys, "'main.graph.json'", "lacks it")


def test_manifest_graph_names_an_absent_member(bundle, tmp_path, capsys):
    def edit(manifest):
        manifest["graphs"][0]["host_graph"] = "other.graph.json"

    path = with_manifest(bundle, tmp_path / "other.byoc", edit)
    assert_corrupt(path, capsys, "'other.graph.json'", "missing")


def test_unlisted_extra_member(bundle, tmp_path, capsys):
    path = with_manifest(bundle, tmp_path / "extra.byoc", lambda m: None, extra=[("notes.txt", b"hi")])
    assert_corrupt(path, capsys, "'notes.txt'", "not listed")


@pytest.mark.parametrize("name", ["../../x", "a/b", "/etc/passwd", "..", ".hidden", "a\\b", "x y", "c:x"])
def test_unsafe_member_names(bundle, tmp_path, capsys, name):
    # not in the manifest: refused as unlisted
    path = with_manifest(bundle, tmp_path / "unlisted.byoc", lambda m: None, extra=[(name, b"x")])
    assert_corrupt(path, capsys, "not listed")

    # listed with the right digest: the name itself is refused
    def edit(manifest):
        listed(manifest, name, b"x")

    path = with_manifest(bundle, tmp_path / "listed.byoc", edit, extra=[(name, b"x")])
    error = assert_corrupt(path, capsys, "invalid member name")
    assert repr(name) in str(error)


def test_duplicate_member(bundle, tmp_path, capsys):
    """A zip may hold one name twice: a second copy with other content is caught."""
    items = entries(bundle)
    data = dict(items)["source.graph"]
    path = tmp_path / "dup.byoc"
    with pytest.warns(UserWarning, match="Duplicate name"):
        write_zip(path, [*items, ("source.graph", data.replace(b"graph", b"Graph"))])
    assert_corrupt(path, capsys, "source.graph")


@pytest.mark.parametrize(
    "edit,words",
    [
        (lambda m: m["modules"][0].update(kind="wasm"), ["unknown module kind 'wasm'"]),
        (lambda m: m["modules"][0].pop("kind"), ["manifest is incomplete"]),
        (lambda m: m["modules"][0].pop("file"), ["manifest is incomplete"]),
        (lambda m: m["modules"].append("library"), ["manifest is incomplete"]),
        (lambda m: m["graphs"].append("main"), ["manifest is incomplete"]),
        (lambda m: m["graphs"][0].pop("host_graph"), ["manifest is incomplete"]),
        (lambda m: m["graphs"][0].update(host_functions="source.graph"), ["main"]),
        (lambda m: m["graphs"][0].update(host_graph="source.graph"), ["not valid JSON"]),
        (
            lambda m: m["graphs"][0].update(name=7),
            ["manifest is incomplete", "graphs[0]: 'name' is not a string"],
        ),
        (
            lambda m: m["modules"][0].update(backend=None),
            ["manifest is incomplete", "modules[0] has no 'backend'"],
        ),
        (lambda m: m.pop("source"), ["manifest is incomplete", "manifest.json has no 'source'"]),
        (
            lambda m: m["members"]["source.graph"].update(size="366"),
            ["'source.graph'", "'size' is not an integer"],
        ),
        (lambda m: m["members"]["source.graph"].update(size=-1), ["'source.graph'", "'size' is negative"]),
        (lambda m: m["members"]["source.graph"].pop("sha256"), ["'source.graph'", "has no 'sha256'"]),
        (lambda m: m.update(version=True), ["bundle version True"]),
    ],
)
def test_inconsistent_manifest(bundle, tmp_path, capsys, edit, words):
    path = with_manifest(bundle, tmp_path / "inconsistent.byoc", edit)
    assert_corrupt(path, capsys, *words)


@pytest.mark.parametrize("member", ["main.graph.json", "json.json"])
def test_deeply_nested_json_member(json_bundle, tmp_path, capsys, member):
    """A member with consistent digests whose JSON is nested too deeply to parse."""
    deep = b"[" * 100_000
    items = [(n, d) for n, d in entries(json_bundle) if n not in (MANIFEST, member)]
    manifest = manifest_of(json_bundle)
    listed(manifest, member, deep)
    path = write_zip(
        tmp_path / "deep.byoc", [(MANIFEST, json.dumps(manifest).encode()), *items, (member, deep)]
    )
    assert_corrupt(path, capsys, "not valid JSON")


def test_library_manifest_errors(tmp_path, capsys, library_bundle):
    bundle = library_bundle
    module = manifest_of(bundle)["modules"][0]
    assert module["kind"] == "library"
    symbol = next(iter(module["functions"]))

    def bad_signature(m):
        m["modules"][0]["functions"][symbol]["inputs"] = [["float32"]]

    def bad_dtype(m):
        m["modules"][0]["functions"][symbol]["inputs"][0][0] = "complex64"

    def bad_extent(m):
        m["modules"][0]["functions"][symbol]["inputs"][0][1] = ["three", 4]

    def functions_list(m):
        m["modules"][0]["functions"] = [symbol]

    def missing_symbol(m):
        m["modules"][0]["functions"]["nowhere"] = m["modules"][0]["functions"][symbol]

    def library_is_text(m):
        m["modules"][0]["file"] = "source.graph"

    cases = [
        (bad_signature, "manifest"),
        (bad_dtype, "invalid tensor type"),
        (bad_extent, "manifest"),
        (functions_list, "manifest"),
        (missing_symbol, "no function 'nowhere'"),
        (library_is_text, "cannot load the library"),
    ]
    for edit, word in cases:
        path = with_manifest(bundle, tmp_path / f"{edit.__name__}.byoc", edit)
        assert_corrupt(path, capsys, word)
