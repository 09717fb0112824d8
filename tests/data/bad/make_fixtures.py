"""Make the bad inputs that are too large, binary or derived to commit as files.

``cases.yaml`` names a fixture by ``make: NAME``; ``FIXTURES[NAME](directory)``
writes the case's file(s) into ``directory`` (a fresh directory per case). The
files are deterministic: the same bytes on every run.

Run as a script to write every fixture for a look at it:

    .venv/bin/python tests/data/bad/make_fixtures.py /tmp/bad-fixtures
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import sys
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

FIXTURES: dict[str, Callable[[Path], None]] = {}

NPZ_GRAPH = """\
graph main(x: float32[2, 2], y: float32[2, 2]) {
  s = @json { return add(x, y) }
  return s
}
"""
"""The graph the --inputs cases run: no compiler needed (a JSON-runtime region)."""
NPZ_UINT8_GRAPH = """\
graph main(img: uint8[2, 3]) {
  s = @json { return transpose(img, perm=[1, 0]) }
  return s
}
"""


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


def _graph(body: str, params: str = "x: float32[4]") -> str:
    return f"graph main({params}) {{\n{body}\n}}\n"


# ------------------------------------------------------------------ graph DSL

DEPTH = 10_000
MEGABYTE = 1 << 20


@fixture
def graph_deep_calls(d: Path) -> None:
    """10k nested calls: negative(negative(...(x)...))."""
    expr = "negative(" * DEPTH + "x" + ")" * DEPTH
    (d / "deep.graph").write_text(_graph(f"  return {expr}"))


@fixture
def graph_deep_regions(d: Path) -> None:
    """10k regions nested in each other (regions do not nest: the first inner one is the error)."""
    (d / "deep.graph").write_text("graph main(x: float32[4]) {\n" + "  a = @ccompiler {\n" * DEPTH + "}\n")


@fixture
def graph_deep_brackets(d: Path) -> None:
    """10k nested brackets in an attribute value."""
    (d / "deep.graph").write_text(
        _graph("  y = concatenate(x, axis=" + "[" * DEPTH + "0" + "]" * DEPTH + ")")
    )


@fixture
def graph_long_identifier(d: Path) -> None:
    """A 1 MB value name."""
    name = "v" * MEGABYTE
    (d / "long.graph").write_text(_graph(f"  {name} = add(x, x)\n  return {name}"))


@fixture
def graph_long_graph_name(d: Path) -> None:
    """A 1 MB graph name (graph names become file names: <graph>.graph.json)."""
    (d / "long.graph").write_text(f"graph {'g' * MEGABYTE}(x: float32[4]) {{\n  return x\n}}\n")


@fixture
def graph_long_region_name(d: Path) -> None:
    """A 10k-character region name (it would be a C symbol)."""
    (d / "long.graph").write_text(
        _graph(f"  s = @ccompiler as {'r' * 10_000} {{ return add(x, x) }}\n  return s")
    )


@fixture
def graph_long_comment_is_fine_but_bad_op(d: Path) -> None:
    """A 1 MB comment is not a name: the error is the unknown op after it."""
    (d / "comment.graph").write_text(_graph(f"  # {'c' * MEGABYTE}\n  y = ad(x, x)\n  return y"))


@fixture
def graph_non_utf8(d: Path) -> None:
    (d / "latin1.graph").write_bytes(_graph("  # caf\xe9\n  return x").encode("latin-1"))


@fixture
def graph_nul_byte(d: Path) -> None:
    (d / "nul.graph").write_bytes(_graph("  y = add(x,\0 x)\n  return y").encode())


@fixture
def graph_huge_integer_literal(d: Path) -> None:
    """A 5000-digit integer (Python's int() refuses more than 4300 digits)."""
    (d / "int.graph").write_text(_graph(f"  k = const int64[4] {'7' * 5000}\n  return x"))


@fixture
def graph_huge_dim_digits(d: Path) -> None:
    (d / "dim.graph").write_text(_graph("  return x", f"x: float32[{'9' * 5000}]"))


@fixture
def graph_huge_attribute(d: Path) -> None:
    (d / "attr.graph").write_text(_graph(f"  return concatenate(x, x, axis={'1' * 5000})"))


# ----------------------------------------------------------------- ExampleJSON


@fixture
def examplejson_long_header(d: Path) -> None:
    (d / "long.examplejson").write_text(f"{'s' * MEGABYTE}\n  input 0 4\n  add 1 inputs: 0 0 shape: 4\n")


@fixture
def examplejson_long_id(d: Path) -> None:
    """An id of 5000 digits, mostly leading zeros (int() of it used to raise)."""
    (d / "id.examplejson").write_text(f"sg\n  input {'0' * 4999}1 4\n  add 1 inputs: 1 1 shape: 4\n")


@fixture
def examplejson_huge_dim_digits(d: Path) -> None:
    (d / "dim.examplejson").write_text(f"sg\n  input 0 {'9' * 5000}\n  add 1 inputs: 0 0 shape: 4\n")


@fixture
def examplejson_non_utf8(d: Path) -> None:
    (d / "bad.examplejson").write_bytes(b"sg\n  input 0 4\n  add 1 inputs: 0 0 shape: 4 \xff\xfe\n")


@fixture
def examplejson_nul_byte(d: Path) -> None:
    (d / "nul.examplejson").write_bytes(b"sg\n  input 0 4\n  add 1 inputs: 0 \x00 shape: 4\n")


@fixture
def examplejson_long_cycle(d: Path) -> None:
    """10k op lines, each using the next; the last uses the first: one 10k-node cycle."""
    lines = ["sg", "  input 0 4"]
    lines += [f"  add {i} inputs: 0 {i + 1 if i < DEPTH else 1} shape: 4" for i in range(1, DEPTH + 1)]
    (d / "cycle.examplejson").write_text("\n".join(lines) + "\n")


@fixture
def examplejson_wide_op(d: Path) -> None:
    """An add with 10k inputs."""
    (d / "wide.examplejson").write_text("sg\n  input 0 4\n  add 1 inputs: " + " 0" * DEPTH + " shape: 4\n")


@fixture
def graph_long_cycle(d: Path) -> None:
    """10k statements in one dependency cycle, written in reverse order."""
    body = "".join(f"  v{i} = add(x, v{(i + 1) % DEPTH})\n" for i in range(DEPTH))
    (d / "cycle.graph").write_text(_graph(body + "  return v0"))


# -------------------------------------------------------------------- specs


@fixture
def spec_non_utf8(d: Path) -> None:
    (d / "latin1.yaml").write_bytes("version: 1\nname: latin1\n# caf\xe9\nkind: json\n".encode("latin-1"))


@fixture
def spec_deep_nesting(d: Path) -> None:
    """1000 nested flow sequences (ruamel.yaml's scanner is quadratic in the depth: 10k
    takes seconds; specs are trusted input, so this only checks for a clean error)."""
    depth = 1000
    (d / "deep.yaml").write_text(
        "version: 1\nname: deep\nkind: json\nranks: " + "[" * depth + "]" * depth + "\n"
    )


@fixture
def spec_long_key(d: Path) -> None:
    (d / "long.yaml").write_text(f"version: 1\nname: long\nkind: json\n{'k' * MEGABYTE}: 1\n")


# ---------------------------------------------------------- --inputs npz files


def _npz(
    d: Path, arrays: dict[str, np.ndarray], *, allow_pickle: bool = False, graph: str = NPZ_GRAPH
) -> None:
    (d / "g.graph").write_text(graph)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays, allow_pickle=allow_pickle)
    (d / "inputs.npz").write_bytes(buffer.getvalue())


def _ok_arrays() -> dict[str, np.ndarray]:
    return {"x": np.ones((2, 2), np.float32), "y": np.ones((2, 2), np.float32)}


@fixture
def npz_extra_name(d: Path) -> None:
    _npz(d, {**_ok_arrays(), "z": np.ones((2, 2), np.float32)})


@fixture
def npz_missing_array(d: Path) -> None:
    _npz(d, {"x": np.ones((2, 2), np.float32)})


@fixture
def npz_wrong_shape(d: Path) -> None:
    _npz(d, {**_ok_arrays(), "y": np.ones((3, 2), np.float32)})


@fixture
def npz_wrong_dtype(d: Path) -> None:
    _npz(d, {**_ok_arrays(), "x": np.ones((2, 2), np.float64)})


@fixture
def npz_int8_for_uint8(d: Path) -> None:
    """Signed bytes for an unsigned-byte input: same size, different dtype."""
    _npz(d, {"img": np.ones((2, 3), np.int8)}, graph=NPZ_UINT8_GRAPH)


@fixture
def npz_pickled_object_array(d: Path) -> None:
    """An object array: loading it would unpickle (run code from) the file."""
    evil = np.empty((2, 2), dtype=object)
    _npz(d, {**_ok_arrays(), "x": evil}, allow_pickle=True)


@fixture
def npz_raw_pickle(d: Path) -> None:
    """Not an npz at all: a pickle, which np.load would unpickle if allowed."""
    (d / "g.graph").write_text(NPZ_GRAPH)
    (d / "inputs.npz").write_bytes(pickle.dumps({"x": [[1.0, 1.0], [1.0, 1.0]]}))


@fixture
def npz_single_npy(d: Path) -> None:
    (d / "g.graph").write_text(NPZ_GRAPH)
    buffer = io.BytesIO()
    np.save(buffer, np.ones((2, 2), np.float32))
    (d / "inputs.npz").write_bytes(buffer.getvalue())


@fixture
def npz_truncated(d: Path) -> None:
    _npz(d, _ok_arrays())
    data = (d / "inputs.npz").read_bytes()
    (d / "inputs.npz").write_bytes(data[: len(data) // 2])


@fixture
def npz_empty(d: Path) -> None:
    (d / "g.graph").write_text(NPZ_GRAPH)
    (d / "inputs.npz").write_bytes(b"")


@fixture
def npz_corrupt_member_header(d: Path) -> None:
    """A zip whose x.npy is not an .npy file."""
    (d / "g.graph").write_text(NPZ_GRAPH)
    with zipfile.ZipFile(d / "inputs.npz", "w") as z:
        z.writestr("x.npy", b"\x93NUMPY\x01\x00garbage that is not a header")
        z.writestr("y.npy", b"")


@fixture
def npz_huge_declared_shape(d: Path) -> None:
    """An .npy header that declares 2**40 elements in a file of a few bytes."""
    (d / "g.graph").write_text(NPZ_GRAPH)
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }"
    header += " " * (118 - len(header)) + "\n"
    member = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 16
    with zipfile.ZipFile(d / "inputs.npz", "w") as z:
        z.writestr("x.npy", member)
        z.writestr("y.npy", member)


NPZ_NEW_DTYPES_GRAPH = """\
graph main(x: float16[2, 2], h: bfloat16[2, 2], b: bool[2, 2]) {
  s = @json { return negative(x) }
  return s, h, b
}
"""


def _new_dtype_arrays(**changed) -> dict[str, np.ndarray]:
    """Good --inputs for NPZ_NEW_DTYPES_GRAPH (h as bits listed in the marker), with
    ``changed`` replacing some."""
    arrays = {
        "x": np.ones((2, 2), np.float16),
        "h": _bfloat16(np.ones((2, 2))).view(np.uint16),
        "b": np.ones((2, 2), np.bool_),
        BFLOAT16_MARKER: np.array(["h"]),
    }
    return {**arrays, **changed}


@fixture
def npz_float32_for_float16(d: Path) -> None:
    _npz(d, _new_dtype_arrays(x=np.ones((2, 2), np.float32)), graph=NPZ_NEW_DTYPES_GRAPH)


@fixture
def npz_byteswapped_float16(d: Path) -> None:
    _npz(d, _new_dtype_arrays(x=np.ones((2, 2), ">f2")), graph=NPZ_NEW_DTYPES_GRAPH)


@fixture
def npz_float16_for_bfloat16(d: Path) -> None:
    arrays = _new_dtype_arrays(h=np.ones((2, 2), np.float16))
    del arrays[BFLOAT16_MARKER]
    _npz(d, arrays, graph=NPZ_NEW_DTYPES_GRAPH)


@fixture
def npz_bits_for_bfloat16(d: Path) -> None:
    """uint16 bits not listed as bfloat16 are uint16."""
    arrays = _new_dtype_arrays()
    del arrays[BFLOAT16_MARKER]
    _npz(d, arrays, graph=NPZ_NEW_DTYPES_GRAPH)


@fixture
def npz_bfloat16_saved_by_savez(d: Path) -> None:
    arrays = _new_dtype_arrays(h=_bfloat16(np.ones((2, 2))))
    del arrays[BFLOAT16_MARKER]
    _npz(d, arrays, graph=NPZ_NEW_DTYPES_GRAPH)


@fixture
def npz_bfloat16_marker_names_missing_entry(d: Path) -> None:
    _npz(d, _new_dtype_arrays(**{BFLOAT16_MARKER: np.array(["h", "q"])}), graph=NPZ_NEW_DTYPES_GRAPH)


@fixture
def npz_uint8_for_bool(d: Path) -> None:
    _npz(d, _new_dtype_arrays(b=np.ones((2, 2), np.uint8)), graph=NPZ_NEW_DTYPES_GRAPH)


# ------------------------------------------------------------------- bundles

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


# --------------------------------------------------------------------- CLI


@fixture
def cli_graph(d: Path) -> None:
    """A valid graph with a JSON-runtime region, for the flag cases."""
    (d / "g.graph").write_text(NPZ_GRAPH)


@fixture
def cli_plain_graph(d: Path) -> None:
    """A valid graph with no region: nothing to offload without --backend."""
    (d / "plain.graph").write_text(_graph("  return add(x, x)"))


@fixture
def cli_not_byoc_output(d: Path) -> None:
    """A graph, and an output directory that byoc did not write."""
    (d / "g.graph").write_text(NPZ_GRAPH)
    (d / "out").mkdir()
    (d / "out" / "keep.txt").write_text("mine\n")


@fixture
def cli_directory_named_graph(d: Path) -> None:
    (d / "dir.graph").mkdir()


@fixture
def cli_fifo_output(d: Path) -> None:
    """A graph, and a FIFO where the bundle should go: byoc must not replace a special
    file (as root, a rename over /dev/null would replace the device node)."""
    import os

    (d / "g.graph").write_text(NPZ_GRAPH)
    os.mkfifo(d / "out.byoc")


@fixture
def cli_bundle(d: Path) -> None:
    (d / "model.byoc").write_bytes(valid_bundle())


# ------------------------------------------------------------------ graph DSL: external weights

WEIGHTS_GRAPH = """\
weights "w.npz" sha256 "{digest}"
graph main(x: float32[2, 3]) {{
  k = const {type} weights["{entry}"]
  return add(x, k)
}}
"""


def _weights(d: Path, digest: str | None = None, type_: str = "float32[2, 3]", entry: str = "k", **arrays):
    """w.npz holding ``arrays`` (default: k, a float32[2, 3]) and w.graph reading entry
    ``entry`` as ``type_``, declaring ``digest`` (default: the file's own)."""
    buffer = io.BytesIO()
    np.savez(buffer, **(arrays or {"k": np.arange(6, dtype=np.float32).reshape(2, 3)}))
    (d / "w.npz").write_bytes(buffer.getvalue())
    digest = digest or hashlib.sha256(buffer.getvalue()).hexdigest()
    (d / "w.graph").write_text(WEIGHTS_GRAPH.format(digest=digest, type=type_, entry=entry))


@fixture
def weights_missing_file(d: Path) -> None:
    _weights(d)
    (d / "w.npz").unlink()


@fixture
def weights_checksum_mismatch(d: Path) -> None:
    _weights(d, digest="0" * 64)


@fixture
def weights_missing_entry(d: Path) -> None:
    _weights(d, entry="conv1.weight")


@fixture
def weights_wrong_dtype(d: Path) -> None:
    _weights(d, k=np.zeros((2, 3), np.float64))


@fixture
def weights_wrong_shape(d: Path) -> None:
    _weights(d, k=np.zeros((3, 2), np.float32))


@fixture
def weights_pickled(d: Path) -> None:
    _weights(d, k=np.array([{"a": 1}, None], dtype=object))


@fixture
def weights_device(d: Path) -> None:
    """A weights file that is a device: reading /dev/zero would never end."""
    (d / "w.graph").write_text(WEIGHTS_GRAPH.format(digest="0" * 64, type="float32[2, 3]", entry="k"))
    (d / "w.graph").write_text((d / "w.graph").read_text().replace('"w.npz"', '"/dev/zero"'))


@fixture
def weights_not_a_digest(d: Path) -> None:
    _weights(d, digest="9f2c")


# The new dtypes' weights files. A bfloat16 entry is stored as its uint16 bits and listed
# in the entry __byoc_bfloat16__ (byoc/npz_files.py); these break that form.
BFLOAT16_MARKER = "__byoc_bfloat16__"


def _bfloat16(values) -> np.ndarray:
    import ml_dtypes

    return np.asarray(values, dtype=np.float32).astype(ml_dtypes.bfloat16)


@fixture
def weights_bool_stored_as_float32(d: Path) -> None:
    _weights(d, type_="bool[2, 3]", k=np.ones((2, 3), np.float32))


@fixture
def weights_bfloat16_without_marker(d: Path) -> None:
    """The bits of a bfloat16 array, not listed as bfloat16: plain uint16."""
    _weights(d, type_="bfloat16[2, 3]", k=_bfloat16(np.ones((2, 3))).view(np.uint16))


@fixture
def weights_bfloat16_marker_names_float32(d: Path) -> None:
    _weights(d, type_="bfloat16[2, 3]", k=np.ones((2, 3), np.float32), **{BFLOAT16_MARKER: np.array(["k"])})


@fixture
def weights_bfloat16_marker_names_missing_entry(d: Path) -> None:
    bits = _bfloat16(np.ones((2, 3))).view(np.uint16)
    _weights(d, type_="bfloat16[2, 3]", k=bits, **{BFLOAT16_MARKER: np.array(["k", "w"])})


@fixture
def weights_bfloat16_marker_not_names(d: Path) -> None:
    bits = _bfloat16(np.ones((2, 3))).view(np.uint16)
    _weights(d, type_="bfloat16[2, 3]", k=bits, **{BFLOAT16_MARKER: np.array([0, 1])})


@fixture
def weights_bfloat16_saved_by_savez(d: Path) -> None:
    """np.savez of an ml_dtypes bfloat16 array writes raw |V2 bytes."""
    _weights(d, type_="bfloat16[2, 3]", k=_bfloat16(np.ones((2, 3))))


# ------------------------------------------------------------------ ONNX models (byoc import)


def _onnx_model(
    d: Path,
    nodes,
    inputs=(("x", [2, 3]),),
    initializers=(),
    opset: int = 13,
    check: bool = True,
    output=(1, None),
):
    """m.onnx: a graph of ``nodes`` from float inputs to the last node's first output,
    of ``output`` (an ONNX element type and a shape; None: inferred)."""
    import onnx
    from onnx import helper

    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, 1, s) for n, s in inputs],
        [helper.make_tensor_value_info(nodes[-1].output[0], *output)],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if check:
        model = onnx.shape_inference.infer_shapes(model)
    (d / "m.onnx").write_bytes(model.SerializeToString())


def _node(op: str, inputs=("x",), outputs=("y",), name: str = "n0", **attrs):
    from onnx import helper

    return helper.make_node(op, list(inputs), list(outputs), name=name, **attrs)


def _int64(values, name: str):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(values, np.int64), name)


@fixture
def onnx_truncated(d: Path) -> None:
    _onnx_model(d, [_node("Relu")])
    data = (d / "m.onnx").read_bytes()
    (d / "m.onnx").write_bytes(data[: len(data) // 2])


@fixture
def onnx_garbage(d: Path) -> None:
    (d / "m.onnx").write_bytes(b"\xff" * 64)


@fixture
def onnx_unsupported_op(d: Path) -> None:
    _onnx_model(d, [_node("Relu", outputs=("r",), name="first"), _node("Unique", ("r",), name="hm")])


@fixture
def onnx_unsupported_attribute(d: Path) -> None:
    params = [_float([1.0, 1.0, 1.0], name) for name in ("scale", "bias", "mean", "var")]
    node = _node("BatchNormalization", ("x", "scale", "bias", "mean", "var"), spatial=0)
    _onnx_model(d, [node], initializers=params, opset=7)


@fixture
def onnx_dynamic_dimension(d: Path) -> None:
    _onnx_model(d, [_node("Relu")], inputs=(("x", ["batch", 3]),))


@fixture
def onnx_custom_domain(d: Path) -> None:
    from onnx import helper

    node = helper.make_node("Fancy", ["x"], ["y"], name="custom", domain="com.example")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", 1, [2])],
        [helper.make_tensor_value_info("y", 1, [2])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)]
    )
    (d / "m.onnx").write_bytes(model.SerializeToString())


@fixture
def onnx_runtime_reshape_shape(d: Path) -> None:
    _onnx_model(d, [_node("Reshape", ("x", "s"))], inputs=(("x", [2, 3]), ("s", [2])), output=(1, [3, 2]))


@fixture
def onnx_training_batchnorm(d: Path) -> None:
    from onnx import numpy_helper

    inits = [numpy_helper.from_array(np.ones(3, np.float32), n) for n in ("s", "b", "m", "v")]
    _onnx_model(
        d,
        [_node("BatchNormalization", ("x", "s", "b", "m", "v"), ("y", "mean", "var"), training_mode=1)],
        inputs=(("x", [2, 3]),),
        initializers=inits,
        opset=15,
    )


@fixture
def onnx_runtime_cast(d: Path) -> None:
    """A Cast at run time to a type byoc lacks (float8); a Cast between byoc's dtypes
    imports, and this case's Cast to int32 did not before byoc had run-time casts."""
    from onnx import TensorProto

    _onnx_model(
        d, [_node("Cast", to=TensorProto.FLOAT8E5M2)], output=(TensorProto.FLOAT8E5M2, [2, 3]), opset=19
    )


@fixture
def onnx_complex_input(d: Path) -> None:
    """A complex64 input (bool, this case's dtype before, is one of byoc's now)."""
    from onnx import helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"], name="copy")],
        "g",
        [helper.make_tensor_value_info("x", 14, [2])],
        [helper.make_tensor_value_info("y", 14, [2])],
    )
    (d / "m.onnx").write_bytes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    )


@fixture
def onnx_invalid_graph(d: Path) -> None:
    _onnx_model(d, [_node("Relu", ("nowhere",))], check=False)


@fixture
def onnx_dropout_in_training(d: Path) -> None:
    from onnx import numpy_helper

    _onnx_model(
        d,
        [_node("Dropout", ("x", "r", "t"), ("y", "mask"))],
        initializers=[
            numpy_helper.from_array(np.float32(0.5), "r"),
            numpy_helper.from_array(np.array(True), "t"),
        ],
        opset=12,
    )


@fixture
def onnx_shape_for_unknown_input(d: Path) -> None:
    _onnx_model(d, [_node("Relu")])


@fixture
def onnx_empty_file(d: Path) -> None:
    (d / "m.onnx").write_bytes(b"")


@fixture
def onnx_opset_too_old(d: Path) -> None:
    _onnx_model(d, [_node("Relu")], opset=5, output=(1, [2, 3]))


def _onnx_io_model(d: Path, inputs, outputs, nodes) -> None:
    """m.onnx of the given value infos (any ONNX type), unchecked."""
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    (d / "m.onnx").write_bytes(model.SerializeToString())


@fixture
def onnx_sequence_input(d: Path) -> None:
    from onnx import helper

    seq = helper.make_tensor_sequence_value_info
    _onnx_io_model(d, [seq("x", 1, [2])], [seq("y", 1, [2])], [_node("Identity")])


@fixture
def onnx_sequence_output(d: Path) -> None:
    from onnx import helper

    _onnx_io_model(
        d,
        [helper.make_tensor_value_info("x", 1, [2])],
        [helper.make_tensor_sequence_value_info("y", 1, [2])],
        [_node("SequenceConstruct")],
    )


@fixture
def onnx_string_input(d: Path) -> None:
    from onnx import helper

    _onnx_io_model(
        d,
        [helper.make_tensor_value_info("x", 8, [2])],
        [helper.make_tensor_value_info("y", 8, [2])],
        [_node("Identity")],
    )


def _external_weights(d: Path, location: str) -> None:
    """m.onnx whose initializer 'w' keeps its data in the file ``location`` (not written)."""
    from onnx import TensorProto, numpy_helper

    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "24")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    _onnx_model(d, [_node("Add", ("x", "w"))], initializers=[w], output=(1, [2, 3]), check=False)


@fixture
def onnx_external_data_missing(d: Path) -> None:
    _external_weights(d, "weights.bin")


@fixture
def onnx_external_data_outside(d: Path) -> None:
    _external_weights(d, "../weights.bin")


@fixture
def onnx_softmax_with_spec_path(d: Path) -> None:
    """A softmax model, and specs/json.yaml: a json backend without softmax."""
    _onnx_model(d, [_node("Softmax")])
    shipped = Path(__file__).resolve().parents[3] / "spec" / "backends" / "json.yaml"
    lines = shipped.read_text().splitlines(keepends=True)
    ops = lines.index("ops:\n")
    (d / "specs").mkdir()
    (d / "specs" / "json.yaml").write_text("".join(lines[: ops + 1]) + "  add: {kernel: add}\n")


def _tensor_file(path: Path, array) -> None:
    from onnx import numpy_helper

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(numpy_helper.from_array(np.asarray(array)).SerializeToString())


def _test_data(d: Path, files: dict[str, object]) -> None:
    """m.onnx (relu of float32[2, 3]) and data/NAME for each ``files`` entry: an array
    (a TensorProto file) or bytes (written as they are)."""
    _onnx_model(d, [_node("Relu")])
    (d / "data").mkdir()
    for name, content in files.items():
        if isinstance(content, bytes):
            (d / "data" / name).write_bytes(content)
        else:
            _tensor_file(d / "data" / name, content)


X23 = np.arange(6, dtype=np.float32).reshape(2, 3) - 2


@fixture
def onnx_test_data_empty(d: Path) -> None:
    _test_data(d, {"notes.txt": b"no tensors here"})


@fixture
def onnx_test_data_truncated(d: Path) -> None:
    from onnx import numpy_helper

    data = numpy_helper.from_array(X23).SerializeToString()
    _test_data(d, {"input_0.pb": data[: len(data) - 5]})


@fixture
def onnx_test_data_garbage(d: Path) -> None:
    _test_data(d, {"input_0.pb": b"\xff" * 32})


@fixture
def onnx_test_data_too_many(d: Path) -> None:
    _test_data(d, {"input_0.pb": X23, "input_1.pb": X23})


@fixture
def onnx_test_data_gap(d: Path) -> None:
    _test_data(d, {"input_0.pb": X23, "input_2.pb": X23})


@fixture
def onnx_test_data_wrong_shape(d: Path) -> None:
    _test_data(d, {"input_0.pb": X23.T.copy()})


@fixture
def onnx_test_data_wrong_dtype(d: Path) -> None:
    _test_data(d, {"input_0.pb": X23.astype(np.float64)})


@fixture
def onnx_test_data_string_tensor(d: Path) -> None:
    _test_data(d, {"input_0.pb": np.array(["a", "b"], dtype=object)})


@fixture
def onnx_test_data_output_shape(d: Path) -> None:
    _test_data(d, {"input_0.pb": X23, "output_0.pb": X23.ravel()})


@fixture
def onnx_test_data_external(d: Path) -> None:
    from onnx import TensorProto, numpy_helper

    t = numpy_helper.from_array(X23)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    entry = t.external_data.add()
    entry.key, entry.value = "location", "/dev/zero"
    _test_data(d, {"input_0.pb": t.SerializeToString()})


@fixture
def onnx_test_data_float16_for_float32(d: Path) -> None:
    _test_data(d, {"input_0.pb": X23.astype(np.float16)})


@fixture
def onnx_test_data_bfloat16_for_float32(d: Path) -> None:
    _test_data(d, {"input_0.pb": _bfloat16(X23)})


@fixture
def onnx_test_data_float8(d: Path) -> None:
    import ml_dtypes

    _test_data(d, {"input_0.pb": X23.astype(ml_dtypes.float8_e4m3fn)})


# ------------------------------------------------------------------ hostile ONNX models (tests/test_onnx_hostile.py too)


def _float(values, name: str):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(values, np.float32), name)


def _external_extent(d: Path, offset: str, length: str, location: str | None = "weights.bin") -> None:
    """m.onnx whose initializer 'w' (float32[2, 3], 24 bytes) is at ``offset`` and
    ``length`` of ``location``, a 24-byte file beside it."""
    (d / "weights.bin").write_bytes(np.ones(6, np.float32).tobytes())
    from onnx import TensorProto, numpy_helper

    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = w.external_data.add()
            entry.key, entry.value = key, value
    _onnx_model(d, [_node("Add", ("x", "w"))], initializers=[w], output=(1, [2, 3]), check=False)


@fixture
def onnx_external_data_no_location(d: Path) -> None:
    _external_extent(d, "0", "24", location=None)


@fixture
def onnx_external_data_nul_in_location(d: Path) -> None:
    _external_extent(d, "0", "24", location="weights.bin\0x")


@fixture
def onnx_external_offset_negative(d: Path) -> None:
    _external_extent(d, "-4", "24")


@fixture
def onnx_external_offset_not_a_number(d: Path) -> None:
    _external_extent(d, "abc", "24")


@fixture
def onnx_external_offset_overflow(d: Path) -> None:
    _external_extent(d, "99999999999999999999999", "24")


@fixture
def onnx_external_length_negative(d: Path) -> None:
    _external_extent(d, "0", "-1")


@fixture
def onnx_external_length_overflow(d: Path) -> None:
    _external_extent(d, "0", "99999999999999999999999")


@fixture
def onnx_external_data_fifo(d: Path) -> None:
    """External data in a FIFO: opening it would block until a writer comes."""
    import os

    _external_extent(d, "0", "24", location="pipe")
    os.mkfifo(d / "pipe")


@fixture
def onnx_external_data_directory(d: Path) -> None:
    _external_extent(d, "0", "24", location="data")
    (d / "data").mkdir()


@fixture
def onnx_raw_data_not_whole_elements(d: Path) -> None:
    """An initializer's raw_data one byte longer than its 6 float32 values: 25 bytes."""
    w = _float(np.ones((2, 3)), "w")
    w.raw_data = w.raw_data + b"\0"
    _onnx_model(d, [_node("Add", ("x", "w"))], initializers=[w], output=(1, [2, 3]), check=False)


def _non_utf8(d: Path, placeholder: bytes) -> None:
    """m.onnx with ``placeholder`` (a name or string of the model) replaced by bytes
    that are not UTF-8."""
    data = (d / "m.onnx").read_bytes()
    assert data.count(placeholder) >= 1, placeholder
    (d / "m.onnx").write_bytes(data.replace(placeholder, placeholder[:1] + b"\xff\xfe" + placeholder[3:]))


@fixture
def onnx_non_utf8_node_name(d: Path) -> None:
    _onnx_model(d, [_node("Relu", name="NODENAME")])
    _non_utf8(d, b"NODENAME")


@fixture
def onnx_non_utf8_input_name(d: Path) -> None:
    _onnx_model(d, [_node("Relu", ("XINPUT",))], inputs=(("XINPUT", [2, 3]),))
    _non_utf8(d, b"XINPUT")


@fixture
def onnx_non_utf8_initializer_name(d: Path) -> None:
    _onnx_model(
        d,
        [_node("Add", ("x", "WEIGHTS"))],
        initializers=[_float(np.ones((2, 3)), "WEIGHTS")],
        output=(1, [2, 3]),
    )
    _non_utf8(d, b"WEIGHTS")


@fixture
def onnx_non_utf8_attribute(d: Path) -> None:
    _onnx_model(
        d,
        [_node("Pad", ("x", "pads"), mode="constant")],
        initializers=[_int64([0, 1, 0, 1], "pads")],
        output=(1, [2, 5]),
        check=False,
    )
    _non_utf8(d, b"constant")


def _conv_model(d: Path, x_shape, w_shape, output, op: str = "Conv", **attrs) -> None:
    inits = [_float(np.ones(w_shape), "W")] if op == "Conv" else []
    inputs = ("x", "W") if op == "Conv" else ("x",)
    _onnx_model(
        d,
        [_node(op, inputs, name="c", **attrs)],
        inputs=(("x", x_shape),),
        initializers=inits,
        output=output,
        check=False,
    )


@fixture
def onnx_same_upper_zero_stride(d: Path) -> None:
    _conv_model(d, [1, 1, 4, 4], [1, 1, 3, 3], (1, [1, 1, 4, 4]), auto_pad="SAME_UPPER", strides=[0, 0])


@fixture
def onnx_same_lower_zero_stride_pool(d: Path) -> None:
    _conv_model(
        d,
        [1, 1, 4, 4],
        None,
        (1, [1, 1, 4, 4]),
        op="MaxPool",
        auto_pad="SAME_LOWER",
        strides=[1, 0],
        kernel_shape=[2, 2],
    )


@fixture
def onnx_conv_kernel_shape_mismatch(d: Path) -> None:
    _conv_model(d, [1, 1, 4, 4], [1, 1, 3, 3], (1, [1, 1, 3, 3]), kernel_shape=[2, 2])


@fixture
def onnx_conv_zero_stride(d: Path) -> None:
    """strides=[0, 0] without auto_pad: the importer writes them, and the parser of the
    imported text refuses them (an error in the text, reported at the ONNX node)."""
    _conv_model(d, [1, 1, 4, 4], [1, 1, 3, 3], (1, [1, 1, 2, 2]), strides=[0, 0])


@fixture
def onnx_cast_unknown_type(d: Path) -> None:
    """A Cast to element type 77, which no ONNX version defines (the output declared so)."""
    _onnx_model(d, [_node("Cast", to=77)], output=(77, [2, 3]), check=False)


@fixture
def onnx_cast_unknown_type_folded(d: Path) -> None:
    """The same Cast of a constant, which the importer folds."""
    _onnx_model(
        d,
        [_node("Cast", ("w",), ("c",), to=77), _node("Add", ("x", "c"), name="n1")],
        initializers=[_float(np.ones((2, 3)), "w")],
        output=(1, [2, 3]),
        check=False,
    )


@fixture
def onnx_split_axis_out_of_range(d: Path) -> None:
    _onnx_model(d, [_node("Split", outputs=("a", "b"), axis=5)], opset=11, output=(1, [2, 2]), check=False)


@fixture
def onnx_split_axis_out_of_range_num_outputs(d: Path) -> None:
    _onnx_model(
        d,
        [_node("Split", outputs=("a", "b"), axis=-3, num_outputs=2)],
        opset=18,
        output=(1, [1, 3]),
        check=False,
    )


@fixture
def onnx_clip_empty_bound(d: Path) -> None:
    _onnx_model(
        d,
        [_node("Clip", ("x", "lo"))],
        initializers=[_float(np.zeros(0), "lo")],
        output=(1, [2, 3]),
        check=False,
    )


@fixture
def onnx_clip_bound_of_two_values(d: Path) -> None:
    _onnx_model(
        d,
        [_node("Clip", ("x", "", "hi"))],
        initializers=[_float([1.0, 2.0], "hi")],
        output=(1, [2, 3]),
        check=False,
    )


@fixture
def onnx_pad_empty_value(d: Path) -> None:
    _onnx_model(
        d,
        [_node("Pad", ("x", "pads", "v"))],
        initializers=[_int64([0, 1, 0, 1], "pads"), _float(np.zeros(0), "v")],
        output=(1, [2, 5]),
        check=False,
    )


@fixture
def onnx_expand_scalar_shape(d: Path) -> None:
    _onnx_model(
        d, [_node("Expand", ("x", "s"))], initializers=[_int64(3, "s")], output=(1, [2, 3]), check=False
    )


@fixture
def onnx_softmax_axis_out_of_range(d: Path) -> None:
    _onnx_model(d, [_node("Softmax", axis=5)], opset=11, output=(1, [2, 3]), check=False)


@fixture
def onnx_opset_too_new(d: Path) -> None:
    _onnx_model(d, [_node("Relu")], opset=99, output=(1, [2, 3]), check=False)


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path("bad-fixtures")
    for name, make in FIXTURES.items():
        target = out / name
        target.mkdir(parents=True, exist_ok=True)
        make(target)
        print(f"{target}: {', '.join(sorted(p.name for p in target.iterdir()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
