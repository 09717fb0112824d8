"""Fixtures of make_fixtures.py: bundles (model.byoc) broken after a valid build:
truncated, bit-flipped, with a wrong or edited manifest, members that escape the
directory, absent, unlisted or tampered with, garbage modules and host graphs."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

FIXTURES: dict[str, Callable[[Path], None]] = {}


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


BUNDLE_GRAPH = """\
graph main(x: float32[3, 4], y: float32[3, 4]) {
  s = @json {
    k = const float32[3, 4] 0.5
    return multiply(add(x, y), k)
  }
  return s, subtract(s, y)
}
"""


@cache
def valid_bundle() -> bytes:
    """A valid bundle of BUNDLE_GRAPH (a JSON-runtime module: no compiler needed)."""
    import tempfile

    from byoc.building import build

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "g.graph"
        source.write_text(BUNDLE_GRAPH)
        build(source).save(Path(tmp) / "model.byoc")
        return (Path(tmp) / "model.byoc").read_bytes()


def _members(raw: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        return {name: z.read(name) for name in z.namelist()}


def _zip(d: Path, members: dict[str, bytes]) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
    (d / "model.byoc").write_bytes(buffer.getvalue())


def _edit_manifest(d: Path, edit, *, extra: dict[str, bytes] | None = None, relist: bool = True) -> None:
    """Rewrite the valid bundle with ``edit(manifest)`` applied and ``extra`` members
    added; with ``relist`` every member is listed with its true sha256 and size."""
    import hashlib

    members = _members(valid_bundle())
    manifest = json.loads(members.pop("manifest.json"))
    members.update(extra or {})
    if relist:
        manifest["members"] = {
            n: {"sha256": hashlib.sha256(b).hexdigest(), "size": len(b)} for n, b in members.items()
        }
    edit(manifest)
    _zip(d, {"manifest.json": json.dumps(manifest).encode(), **members})


@fixture
def bundle_truncated(d: Path) -> None:
    raw = valid_bundle()
    (d / "model.byoc").write_bytes(raw[: len(raw) * 2 // 3])


@fixture
def bundle_bit_flipped(d: Path) -> None:
    """One bit flipped in the stored bytes of the JSON module member."""
    raw = bytearray(valid_bundle())
    with zipfile.ZipFile(io.BytesIO(bytes(raw))) as z:
        info = z.getinfo("json.json")
    name_len = int.from_bytes(raw[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_len = int.from_bytes(raw[info.header_offset + 28 : info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len
    raw[start + info.compress_size // 2] ^= 0x10
    (d / "model.byoc").write_bytes(bytes(raw))


@fixture
def bundle_wrong_version(d: Path) -> None:
    _edit_manifest(d, lambda m: m.update(version=2))


@fixture
def bundle_wrong_format(d: Path) -> None:
    _edit_manifest(d, lambda m: m.update(format="not-a-bundle"))


@fixture
def bundle_manifest_names_absent_member(d: Path) -> None:
    def edit(m):
        m["members"]["ghost.json"] = {"sha256": "0" * 64, "size": 1}

    _edit_manifest(d, edit)


@fixture
def bundle_module_names_absent_file(d: Path) -> None:
    def edit(m):
        m["modules"][0]["file"] = "ghost.json"

    _edit_manifest(d, edit)


@fixture
def bundle_json_const_file_absent(d: Path) -> None:
    """A JSON module whose constant names a ``.npz`` member the bundle lacks."""
    members = _members(valid_bundle())
    module = json.loads(members["json.json"])
    for value in module["const_values"].values():
        del value["data"]
        value["file"] = "ghost.npz"
    _edit_manifest(d, lambda m: None, extra={"json.json": json.dumps(module).encode()})


@fixture
def bundle_path_traversal_listed(d: Path) -> None:
    """A member ``../../x`` that the manifest lists, with its true digest."""
    _edit_manifest(d, lambda m: None, extra={"../../x": b"escape"})


@fixture
def bundle_path_traversal_unlisted(d: Path) -> None:
    members = _members(valid_bundle())
    members["../../x"] = b"escape"
    _zip(d, members)


@fixture
def bundle_absolute_member(d: Path) -> None:
    _edit_manifest(d, lambda m: None, extra={"/etc/cron.d/x": b"escape"})


@fixture
def bundle_unlisted_member(d: Path) -> None:
    members = _members(valid_bundle())
    members["extra.txt"] = b"not in the manifest"
    _zip(d, members)


@fixture
def bundle_tampered_member(d: Path) -> None:
    """A member changed after the manifest recorded its sha256."""
    members = _members(valid_bundle())
    members["json.json"] = members["json.json"].replace(b"0.5", b"9.5")
    _zip(d, members)


@fixture
def bundle_manifest_not_json(d: Path) -> None:
    members = _members(valid_bundle())
    members["manifest.json"] = b"{not json"
    _zip(d, members)


@fixture
def bundle_manifest_too_deep(d: Path) -> None:
    members = _members(valid_bundle())
    members["manifest.json"] = b"[" * 100_000 + b"]" * 100_000
    _zip(d, members)


@fixture
def bundle_no_manifest(d: Path) -> None:
    members = _members(valid_bundle())
    del members["manifest.json"]
    _zip(d, members)


@fixture
def bundle_library_is_garbage(d: Path) -> None:
    """A module of kind library whose .so is garbage (correctly listed)."""

    def edit(m):
        m["modules"][0] = {"backend": "json", "kind": "library", "file": "libjson.so", "functions": {}}

    _edit_manifest(d, edit, extra={"libjson.so": b"\x7fELF" + b"\x01" * 200})


@fixture
def bundle_host_graph_garbage(d: Path) -> None:
    _edit_manifest(d, lambda m: None, extra={"main.graph.json": b'{"nodes": 7}'})


@fixture
def bundle_host_graph_huge_row_pointer(d: Path) -> None:
    """A host graph whose node_row_ptr jumps to 2**70 (found by the bundle fuzzer: the
    executor used to build a range of that size)."""
    members = _members(valid_bundle())
    graph = json.loads(members["main.graph.json"])
    graph["node_row_ptr"][1] = 2**70

    def edit(m):
        pass

    _edit_manifest(d, edit, extra={"main.graph.json": json.dumps(graph).encode()})


@fixture
def bundle_not_a_zip(d: Path) -> None:
    (d / "model.byoc").write_text("graph main(x: float32[4]) { return x }\n")


@fixture
def bundle_empty(d: Path) -> None:
    (d / "model.byoc").write_bytes(b"")
