"""Fixtures of make_fixtures.py: graph DSL external weights (``weights "w.npz" sha256 ...``):
a missing file, a wrong checksum, entry, dtype or shape, a pickle, a device, and
bfloat16 entries not in byoc's form."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from pathlib import Path

import numpy as np

FIXTURES: dict[str, Callable[[Path], None]] = {}


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


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
