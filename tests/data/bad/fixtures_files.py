"""Fixtures of cases_files.yaml: special files (a FIFO, /dev/zero, a directory, /dev/stdin)
in the place of every input file, and bombs (zip bombs, alias bombs, files past their
size limit). See byoc/input_files.py and docs/input-limits.md.

A special file is made in the case's directory: ``os.mkfifo``, or a symbolic link to
``/dev/zero`` or ``/dev/stdin`` (byoc follows links, so it meets the device or the
pipe its standard input is), or a directory. Bombs are written cheaply: a deflate
stream of a repeated block is the block's compressed form repeated, and a file past
its limit is sparse (``os.truncate``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import zlib
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
from make_bundles import _members, _zip, valid_bundle
from make_npz_inputs import NPZ_GRAPH
from make_onnx_models import _node
from make_onnx_models import _onnx_model as onnx_model
from make_weights import WEIGHTS_GRAPH

FIXTURES: dict[str, Callable[[Path], None]] = {}

GiB, MiB = 1 << 30, 1 << 20
BLOCK = 16 * MiB


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


# ------------------------------------------------------------------ special files

KINDS = ("fifo", "zero", "dir", "stdin")


def special(path: Path, kind: str) -> None:
    """Make ``path`` a special file of ``kind``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "dir":
        path.mkdir()
    elif kind == "stdin":
        path.symlink_to("/dev/stdin")
    else:
        raise ValueError(kind)


def _graph(d: Path) -> None:
    pass


def _npz_graph(d: Path) -> None:
    (d / "g.graph").write_text(NPZ_GRAPH)


def _weights_graph(d: Path) -> None:
    (d / "w.graph").write_text(WEIGHTS_GRAPH.format(digest="0" * 64, type="float32[2, 3]", entry="k"))


def _spec_dir(d: Path) -> None:
    (d / "specs").mkdir()


def _onnx_model(d: Path) -> None:
    onnx_model(d, [_node("Relu")])


def _test_data(d: Path) -> None:
    onnx_model(d, [_node("Relu")])
    (d / "data").mkdir()


SPECIAL_PLACES: dict[str, tuple[Callable[[Path], None], str]] = {
    "graph": (_graph, "f.graph"),
    "examplejson": (_graph, "f.examplejson"),
    "spec": (_spec_dir, "specs/mine.yaml"),
    "ops_yaml": (_spec_dir, "specs/ops.yaml"),
    "npz": (_npz_graph, "f.npz"),
    "weights": (_weights_graph, "w.npz"),
    "bundle": (_graph, "m.byoc"),
    "onnx": (_graph, "m.onnx"),
    "test_data": (_test_data, "data/input_0.pb"),
}
"""surface -> (what else the case needs, the input file that is made special)."""


def _special_fixture(setup: Callable[[Path], None], place: str, kind: str) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        setup(d)
        special(d / place, kind)

    return make


for _surface, (_setup, _place) in SPECIAL_PLACES.items():
    for _kind in KINDS:
        FIXTURES[f"special_{_surface}_{_kind}"] = _special_fixture(_setup, _place, _kind)


@fixture
def special_spec_checked_fifo(d: Path) -> None:
    """``byoc check f.yaml`` of a FIFO named on the command line."""
    special(d / "f.yaml", "fifo")


# ------------------------------------------------------------------ zip bombs


def _deflated_repeat(prefix: bytes, fill: int, count: int) -> tuple[list[bytes], int, int]:
    """A raw deflate stream of ``prefix`` and then ``count`` blocks of the byte ``fill``:
    its pieces (the block's compressed form repeated), its CRC-32 and its size. After a
    full flush, deflate starts afresh, so each block compresses to the same bytes."""
    block = bytes([fill]) * BLOCK
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    one = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    two = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    assert one == two, "deflate did not repeat itself"
    crc = zlib.crc32(prefix)
    for _ in range(count):
        crc = zlib.crc32(block, crc)
    return [head, *([one] * count), c.flush()], crc, len(prefix) + count * BLOCK


def _write_zip(path: Path, members: list[tuple[str, list[bytes], int, int, int]]) -> None:
    """A zip archive of members (name, data pieces, CRC-32, size, method) written as they
    are (zipfile would compress gigabytes itself); sizes under 4 GiB, no zip64."""
    central = []
    with open(path, "wb") as f:
        for name, pieces, crc, size, method in members:
            offset = f.tell()
            stored = sum(map(len, pieces))
            raw = name.encode()
            f.write(
                struct.pack(
                    "<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x5021, crc, stored, size, len(raw), 0
                )
            )
            f.write(raw)
            for piece in pieces:
                f.write(piece)
            central.append(
                struct.pack(
                    "<IHHHHHHIIIHHHHHII",
                    0x02014B50,
                    20,
                    20,
                    0,
                    method,
                    0,
                    0x5021,
                    crc,
                    stored,
                    size,
                    len(raw),
                    0,
                    0,
                    0,
                    0,
                    0o644 << 16,
                    offset,
                )
                + raw
            )
        start = f.tell()
        for entry in central:
            f.write(entry)
        f.write(
            struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), f.tell() - start, start, 0)
        )


def _stored(name: str, data: bytes) -> tuple[str, list[bytes], int, int, int]:
    return name, [data], zlib.crc32(data), len(data), 0


def _npy_header(nbytes: int) -> bytes:
    buffer = io.BytesIO()
    header = {"descr": "<f4", "fortran_order": False, "shape": (nbytes // 4,)}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


@cache
def _npz_bomb(blocks: int) -> tuple[list[bytes], int, int]:
    """x.npy: an honest .npy of ``blocks`` * 16 MiB zeros, deflated (about 1000 times)."""
    header = _npy_header(blocks * BLOCK)
    return _deflated_repeat(header, 0, blocks)


def _write_npz_bomb(path: Path, blocks: int) -> None:
    pieces, crc, size = _npz_bomb(blocks)
    _write_zip(path, [("x.npy", pieces, crc, size, 8)])


@fixture
def bomb_npz_past_limit(d: Path) -> None:
    """--inputs: an .npz whose member declares (and holds) 2.5 GiB of zeros, in 2.5 MB."""
    _npz_graph(d)
    _write_npz_bomb(d / "bomb.npz", 160)


@fixture
def bomb_npz_ratio(d: Path) -> None:
    """--inputs: a member of 512 MiB of zeros (under the limit) compressed 1000 times."""
    _npz_graph(d)
    _write_npz_bomb(d / "bomb.npz", 32)


@fixture
def bomb_weights(d: Path) -> None:
    """A weights file that is a zip bomb, declared with its true digest."""
    _write_npz_bomb(d / "w.npz", 160)
    digest = hashlib.sha256((d / "w.npz").read_bytes()).hexdigest()
    (d / "w.graph").write_text(WEIGHTS_GRAPH.format(digest=digest, type="float32[2, 3]", entry="k"))


def _bundle_members() -> tuple[dict, dict[str, bytes]]:
    members = _members(valid_bundle())
    return json.loads(members.pop("manifest.json")), members


@fixture
def bomb_bundle_manifest(d: Path) -> None:
    """A bundle whose manifest.json is its JSON followed by 1 GiB of spaces."""
    manifest, members = _bundle_members()
    pieces, crc, size = _deflated_repeat(json.dumps(manifest).encode(), 0x20, 64)
    entries = [("manifest.json", pieces, crc, size, 8)]
    _write_zip(d / "m.byoc", entries + [_stored(n, b) for n, b in members.items()])


@fixture
def bomb_bundle_manifest_small_ratio(d: Path) -> None:
    """A manifest of 32 MiB of spaces: not a zip bomb by its ratio, but past its own limit."""
    manifest, members = _bundle_members()
    text = json.dumps(manifest).encode() + b" " * (32 * MiB)
    entries = [_stored("manifest.json", text)]
    _write_zip(d / "m.byoc", entries + [_stored(n, b) for n, b in members.items()])


@fixture
def bomb_bundle_member(d: Path) -> None:
    """A bundle whose listed members are 1 GiB of zeros each, listed with that size."""
    manifest, members = _bundle_members()
    pieces, crc, size = _deflated_repeat(b"", 0, 64)
    for name in members:
        manifest["members"][name] = {"sha256": "0" * 64, "size": size}
    entries = [_stored("manifest.json", json.dumps(manifest).encode())]
    _write_zip(d / "m.byoc", entries + [(n, pieces, crc, size, 8) for n in members])


# ------------------------------------------------------------------ duplicates (bundle surface)


@fixture
def bundle_duplicate_manifest_entry(d: Path) -> None:
    """A manifest listing one member twice (JSON keeps the last; byoc refuses)."""
    manifest, members = _bundle_members()
    name, record = next(iter(manifest["members"].items()))
    text = json.dumps(manifest)
    entry = f"{json.dumps(name)}: {json.dumps(record)}"
    text = text.replace(entry, f"{entry}, {entry}", 1)
    assert text.count(entry) == 2
    _zip(d, {"manifest.json": text.encode(), **members})
    (d / "model.byoc").rename(d / "m.byoc")


@fixture
def bundle_duplicate_member(d: Path) -> None:
    """Two zip members of one name: the second a different (untested) content."""
    manifest, members = _bundle_members()
    name = next(iter(members))
    entries = [_stored("manifest.json", json.dumps(manifest).encode())]
    entries += [_stored(n, b) for n, b in members.items()]
    entries.append(_stored(name, b"something else"))
    _write_zip(d / "m.byoc", entries)


# ------------------------------------------------------------------ text bombs


def _sparse(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


@fixture
def bomb_graph_huge(d: Path) -> None:
    _sparse(d / "huge.graph", 100 * MiB)


@fixture
def bomb_examplejson_huge(d: Path) -> None:
    _sparse(d / "huge.examplejson", 100 * MiB)


@fixture
def bomb_spec_huge(d: Path) -> None:
    _sparse(d / "huge.yaml", 40 * MiB)


@fixture
def bomb_onnx_huge(d: Path) -> None:
    _sparse(d / "huge.onnx", 3 * GiB)


@fixture
def bomb_npz_huge_file(d: Path) -> None:
    _npz_graph(d)
    _sparse(d / "huge.npz", 3 * GiB)


@fixture
def bomb_bundle_huge_file(d: Path) -> None:
    _sparse(d / "huge.byoc", 5 * GiB)


@fixture
def bomb_test_data_huge(d: Path) -> None:
    _test_data(d)
    _sparse(d / "data" / "input_0.pb", 3 * GiB)


@fixture
def bomb_spec_flow_list(d: Path) -> None:
    """A backend spec whose dtypes flow list is 50 MB long."""
    count = 50 * MiB // len("float32, ")
    (d / "flow.yaml").write_text(
        "version: 1\nname: flow\nkind: json\ndtypes: [" + "float32, " * count + "float32]\n"
    )


def _laughs(levels: int, width: int = 10) -> list[str]:
    """Anchors n0 .. n<levels>: n0 a list of ``width`` words, each next one ``width`` aliases
    of the one before."""
    items = [f"&n0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels + 1):
        items.append(f"&n{i} [{', '.join([f'*n{i - 1}'] * width)}]")
    return items


@fixture
def bomb_spec_billion_laughs(d: Path) -> None:
    """The billion laughs: 10**9 values once expanded."""
    (d / "laughs.yaml").write_text("version: 1\nlaughs: [" + ", ".join(_laughs(8)) + "]\n")


@fixture
def bomb_spec_alias_in_message(d: Path) -> None:
    """A spec in its directory whose first dtype is a list expanding to 10**7 values:
    the error names the dtype, which must be shown cut short."""
    spec = (Path(__file__).resolve().parents[3] / "spec" / "backends" / "json.yaml").read_text()
    bomb = "[[" + ", ".join(_laughs(6)) + "]]"
    lines = [f"dtypes: {bomb}" if line.startswith("dtypes:") else line for line in spec.splitlines()]
    (d / "specs").mkdir()
    (d / "specs" / "json.yaml").write_text("\n".join(lines) + "\n")


@fixture
def stdin_only(d: Path) -> None:
    """Nothing: the case reads its standard input."""
