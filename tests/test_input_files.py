"""byoc/input_files.py and its readers: special files are refused before they are
opened, no input is read past its limit, zip archives are checked member by member,
and spec YAML's aliases cannot blow up. (The CLI's side: tests/data/bad/cases_files.yaml.)"""

from __future__ import annotations

import io
import json
import os
import socket
import sys
import threading
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

import byoc
from byoc import input_files
from byoc.errors import Location, ParseError, RuntimeFailure, SpecError, UsageError
from byoc.input_files import (
    check_zip_members,
    read_limited,
    read_member,
    read_stdin,
    size_text,
)
from byoc.npz_files import npz_bytes, read_npz
from byoc.runtime.bundle import read_bundle
from byoc.runtime.manifest import Manifest
from byoc.spec.search import catalog_files
from byoc.spec.yaml_doc import MAX_EXPANDED_VALUES, ShownSeq, YamlDoc


def quickly(fn, *args, seconds: float = 5.0):
    """``fn(*args)``'s exception, which must come within ``seconds`` (a FIFO must not block)."""
    box: dict = {}

    def run():
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["exc"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{fn.__name__} blocked"
    return box.get("exc")


# ------------------------------------------------------------------ regular files and limits


def test_read_limited_reads_a_file_up_to_its_limit(tmp_path):
    f = tmp_path / "a.graph"
    f.write_bytes(b"x" * 100)
    assert read_limited(f, "a.graph", 100, UsageError) == b"x" * 100
    with pytest.raises(UsageError, match=r"a.graph is 100 bytes, more than the 99 bytes byoc reads"):
        read_limited(f, "a.graph", 99, UsageError)


def test_a_file_whose_size_is_unknown_is_cut_at_its_limit():
    # /proc files report a size of 0: the limit holds while reading, not only by stat
    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("no /proc")
    with pytest.raises(UsageError, match="larger than the 16 bytes byoc reads"):
        read_limited(maps, "maps", 16, UsageError)


def test_missing_file(tmp_path):
    with pytest.raises(UsageError, match="cannot read nothing: No such file or directory"):
        read_limited(tmp_path / "nothing", "nothing", 10, UsageError)


def test_fifo_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "f.graph"
    os.mkfifo(fifo)
    exc = quickly(read_limited, fifo, "f.graph", 10, UsageError)
    assert isinstance(exc, UsageError)
    assert exc.message == "f.graph is not a regular file: it is a FIFO (named pipe)"
    assert "regular files only" in exc.hint


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda p: p.symlink_to("/dev/zero"), "is not a regular file: it is a character device"),
        (lambda p: p.mkdir(), "cannot read x: Is a directory"),
    ],
)
def test_devices_and_directories_are_refused(tmp_path, make, kind):
    make(tmp_path / "x")
    exc = quickly(read_limited, tmp_path / "x", "x", 10, UsageError)
    assert isinstance(exc, UsageError) and kind in exc.message


def test_socket_is_refused(tmp_path):
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        exc = quickly(read_limited, path, "s", 10, UsageError)
    assert isinstance(exc, UsageError) and exc.message == "s is not a regular file: it is a socket"


def test_size_text():
    assert size_text(512) == "512 bytes"
    assert size_text(64 << 20) == "64 MiB"
    assert size_text(5 << 29) == "2.5 GiB"


# ------------------------------------------------------------------ standard input


def _stdin(monkeypatch, fd: int) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.FileIO(fd, "rb", closefd=True))))


def test_stdin_pipe_is_read_up_to_its_limit(monkeypatch):
    reader, writer = os.pipe()
    os.write(writer, b"0123456789")
    os.close(writer)
    _stdin(monkeypatch, reader)
    assert read_stdin("standard input", 10, UsageError) == b"0123456789"


def test_stdin_past_its_limit_is_refused(monkeypatch):
    reader, writer = os.pipe()
    os.write(writer, b"01234567890")
    os.close(writer)
    _stdin(monkeypatch, reader)
    with pytest.raises(UsageError, match="standard input is larger than the 10 bytes byoc reads"):
        read_stdin("standard input", 10, UsageError)


def test_stdin_from_dev_zero_is_refused(monkeypatch):
    _stdin(monkeypatch, os.open("/dev/zero", os.O_RDONLY))
    with pytest.raises(UsageError, match="standard input is not a regular file: it is a character device"):
        read_stdin("standard input", 1 << 30, UsageError)


# ------------------------------------------------------------------ zip archives


def _zip(members: list[tuple[str, bytes]], compression=zipfile.ZIP_DEFLATED) -> zipfile.ZipFile:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate name, and writes it
        with zipfile.ZipFile(buffer, "w", compression=compression) as z:
            for name, data in members:
                z.writestr(name, data)
    return zipfile.ZipFile(io.BytesIO(buffer.getvalue()))


def test_duplicate_member_names_are_refused():
    archive = _zip([("a", b"1"), ("a", b"2")])
    with pytest.raises(UsageError, match="x.zip holds two members named 'a'"):
        check_zip_members(archive, "x.zip", 1 << 20, 1 << 20, UsageError)


def test_member_and_total_limits():
    archive = _zip([("a", b"1" * 100), ("b", b"2" * 100)])
    with pytest.raises(UsageError, match="member 'a' expands to 100 bytes, more than the 99 bytes"):
        check_zip_members(archive, "x.zip", 1000, 99, UsageError)
    with pytest.raises(UsageError, match="its members expand to more than the 150 bytes"):
        check_zip_members(archive, "x.zip", 150, 100, UsageError)
    assert [i.filename for i in check_zip_members(archive, "x.zip", 200, 100, UsageError)] == ["a", "b"]


def test_compression_ratio_bound():
    size = input_files.RATIO_FLOOR + 1
    archive = _zip([("zeros", bytes(size))])
    info = archive.getinfo("zeros")
    assert info.file_size > input_files.MAX_RATIO * info.compress_size  # deflate packs zeros ~1000 times
    with pytest.raises(UsageError, match="a zip bomb"):
        check_zip_members(archive, "x.zip", 1 << 40, 1 << 40, UsageError)
    small = _zip([("zeros", bytes(input_files.RATIO_FLOOR))])  # at the floor: allowed
    check_zip_members(small, "x.zip", 1 << 40, 1 << 40, UsageError)


def test_read_member_gives_the_bytes():
    data = os.urandom(3 * input_files.CHUNK + 5)
    archive = _zip([("r", data)])
    assert read_member(archive, archive.getinfo("r"), "x.zip", UsageError) == data


# ------------------------------------------------------------------ npz


def test_npz_round_trip_from_path_and_bytes(tmp_path):
    arrays = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    (tmp_path / "a.npz").write_bytes(npz_bytes(arrays))
    for source in (
        tmp_path / "a.npz",
        str(tmp_path / "a.npz"),
        npz_bytes(arrays),
        io.BytesIO(npz_bytes(arrays)),
    ):
        got = read_npz(source, "a.npz", UsageError)
        np.testing.assert_array_equal(got["x"], arrays["x"])
    buffer = io.BytesIO()
    np.savez_compressed(buffer, x=arrays["x"])  # small compressed archives are fine
    np.testing.assert_array_equal(read_npz(buffer.getvalue(), "c.npz", UsageError)["x"], arrays["x"])


def test_npz_zip_bomb_is_refused_before_decompressing():
    buffer = io.BytesIO()
    np.savez_compressed(buffer, x=np.zeros(6 << 20, dtype=np.float32))  # 24 MiB of zeros
    with pytest.raises(UsageError, match="a zip bomb"):
        read_npz(buffer.getvalue(), "bomb.npz", UsageError)


def test_npy_header_declaring_more_than_its_member_is_refused():
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (1 << 28,)}
    )
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("x.npy", header.getvalue() + bytes(16))
    with pytest.raises(UsageError, match=r"entry 'x.npy' declares float32\[268435456\], 1 GiB of data"):
        read_npz(archive.getvalue(), "h.npz", UsageError)


def test_npz_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "f.npz")
    exc = quickly(read_npz, tmp_path / "f.npz", "--inputs f.npz", UsageError)
    assert isinstance(exc, UsageError) and "FIFO" in exc.message


# ------------------------------------------------------------------ bundles


def test_manifest_refuses_a_key_given_twice():
    text = '{"format": "byoc-bundle", "version": 1, "members": {"a": {}, "a": {}}}'
    with pytest.raises(RuntimeFailure, match="manifest.json names 'a' twice in one object"):
        Manifest.from_json(text, "m.byoc")


def test_bundle_with_duplicate_members_is_refused(tmp_path):
    manifest = json.dumps({"format": "byoc-bundle", "version": 1}).encode()
    archive = _zip([("manifest.json", manifest), ("a.json", b"1"), ("a.json", b"2")])
    archive.fp.seek(0)
    (tmp_path / "m.byoc").write_bytes(archive.fp.read())
    with pytest.raises(RuntimeFailure, match="holds two members named 'a.json'"):
        read_bundle(tmp_path / "m.byoc")


def test_bundle_manifest_past_its_limit(tmp_path, monkeypatch):
    monkeypatch.setattr("byoc.runtime.bundle.MANIFEST_LIMIT", 64)
    archive = _zip([("manifest.json", b"{}" + b" " * 100)])
    archive.fp.seek(0)
    (tmp_path / "m.byoc").write_bytes(archive.fp.read())
    with pytest.raises(
        RuntimeFailure, match="member 'manifest.json' expands to 102 bytes, more than the 64 bytes"
    ):
        read_bundle(tmp_path / "m.byoc")


def test_bundle_that_is_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "m.byoc")
    exc = quickly(read_bundle, tmp_path / "m.byoc")
    assert isinstance(exc, RuntimeFailure) and "is not a regular file: it is a FIFO" in exc.message


# ------------------------------------------------------------------ spec YAML


def _laughs(levels: int) -> str:
    items = ["&n0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    items += [f"&n{i} [{', '.join([f'*n{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "[" + ", ".join(items) + "]"


def test_billion_laughs_is_refused_fast(tmp_path):
    started = time.monotonic()
    with pytest.raises(SpecError, match=f"expand to more than {MAX_EXPANDED_VALUES:,} values") as info:
        YamlDoc(tmp_path / "l.yaml", f"version: 1\nlaughs: {_laughs(9)}\n")
    assert time.monotonic() - started < 5
    assert info.value.location.line == 2


def test_alias_huge_value_is_shown_cut_short(tmp_path):
    doc = YamlDoc(tmp_path / "a.yaml", f"x: {_laughs(5)}\ny: [1, 2]\n")
    huge = doc.root["x"]
    assert isinstance(huge, ShownSeq) and len(repr(huge)) < 1000 and f"{huge}" == repr(huge)
    assert repr(doc.root["y"]) == "[1, 2]" and type(doc.root["y"]).__name__ == "CommentedSeq"
    assert huge[0] == huge[1][0] == ["lol"] * 10  # the values themselves are untouched


def test_spec_file_limit_and_fifo(tmp_path, monkeypatch):
    monkeypatch.setattr("byoc.spec.support.SPEC_LIMIT", 10)  # read_spec_text reads it there
    (tmp_path / "big.yaml").write_text("version: 1\n")
    with pytest.raises(SpecError, match="spec file is 11 bytes, more than the 10 bytes byoc reads"):
        YamlDoc(tmp_path / "big.yaml")
    os.mkfifo(tmp_path / "f.yaml")
    exc = quickly(YamlDoc, tmp_path / "f.yaml")
    assert isinstance(exc, SpecError) and exc.location == Location(str(tmp_path / "f.yaml"), 1, 1)


@pytest.mark.parametrize("kind", ["dir", "fifo", "zero"])
def test_spec_directory_ops_yaml_that_is_not_a_file(tmp_path, kind):
    ops = tmp_path / "ops.yaml"
    {"dir": ops.mkdir, "fifo": lambda: os.mkfifo(ops), "zero": lambda: ops.symlink_to("/dev/zero")}[kind]()
    exc = quickly(catalog_files, [str(tmp_path)])
    assert isinstance(exc, SpecError), exc
    assert exc.location.file == str(ops.resolve()) or exc.location.file.endswith("ops.yaml")


def test_spec_directory_without_ops_yaml_is_fine(tmp_path):
    assert catalog_files([str(tmp_path)]) == []


# ------------------------------------------------------------------ readers and rendering


def test_parse_file_of_a_fifo_and_of_dev_zero(tmp_path):
    os.mkfifo(tmp_path / "f.graph")
    exc = quickly(byoc.parse_file, tmp_path / "f.graph")
    assert isinstance(exc, ParseError) and "FIFO" in exc.message
    assert quickly(exc.render) is None  # rendering does not read the FIFO for an excerpt
    (tmp_path / "z.graph").symlink_to("/dev/zero")
    exc = quickly(byoc.parse_file, tmp_path / "z.graph")
    assert isinstance(exc, ParseError) and "character device" in exc.message


def test_weights_file_that_is_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "w.npz")
    (tmp_path / "w.graph").write_text(
        f'weights "w.npz" sha256 "{"0" * 64}"\n'
        'graph main(x: float32[2]) {\n  k = const float32[2] weights["k"]\n  return add(x, k)\n}\n'
    )
    exc = quickly(byoc.parse_file, tmp_path / "w.graph")
    assert exc is not None and "weights file" in exc.message and "FIFO" in exc.message, exc
    assert exc.location.line == 1


def test_error_excerpt_skips_special_and_huge_files(tmp_path):
    os.mkfifo(tmp_path / "f")
    rendered = ParseError("bad", Location(str(tmp_path / "f"), 1, 1)).render()
    assert rendered == f"parse error: bad\n  --> {tmp_path / 'f'}:1:1"
    rendered = ParseError("bad", Location("/dev/zero", 1, 1)).render()
    assert rendered == "parse error: bad\n  --> /dev/zero:1:1"
