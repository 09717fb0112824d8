"""Fixtures of make_fixtures.py: the ``--inputs`` npz files of ``byoc run`` (wrong names,
shapes and dtypes, pickles, truncated or corrupt zips, the new dtypes in the wrong form),
each beside g.graph, the graph they feed."""

from __future__ import annotations

import io
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from make_weights import BFLOAT16_MARKER, _bfloat16

FIXTURES: dict[str, Callable[[Path], None]] = {}


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


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
