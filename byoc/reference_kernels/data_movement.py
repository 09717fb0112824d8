"""Data movement: reshapes, transpose, pad, gather, slice, split, where, copy and concatenate, which
return the input dtype unchanged."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import shape_checks, shape_indexing, shape_layout
from .arrays import Ints


def reshape(x, newshape, *, allowzero: int = 0) -> np.ndarray:
    """ONNX Reshape (see shape_layout.reshape)."""
    return np.reshape(x, shape_layout.reshape(np.shape(x), newshape, allowzero=allowzero))


def flatten(x, *, axis: int = 1) -> np.ndarray:
    return np.reshape(x, shape_layout.flatten(np.shape(x), axis=axis))


def transpose(x, *, perm: Ints = None) -> np.ndarray:
    shape_layout.transpose(np.shape(x), perm=perm)
    return np.transpose(x, perm)


def squeeze(x, *, axes: Ints = None) -> np.ndarray:
    return np.reshape(x, shape_layout.squeeze(np.shape(x), axes=axes))


def unsqueeze(x, *, axes: Sequence[int]) -> np.ndarray:
    return np.reshape(x, shape_layout.unsqueeze(np.shape(x), axes=axes))


def expand(x, newshape) -> np.ndarray:
    """ONNX Expand: broadcast x and ``newshape`` both ways (a copy, not a view)."""
    return np.array(np.broadcast_to(x, shape_layout.expand(np.shape(x), newshape)))


def pad(x, *, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> np.ndarray:
    """ONNX Pad over all axes; modes constant (``value``), reflect (mirror without the edge), edge."""
    shape_layout.pad(np.shape(x), pads=pads, mode=mode, value=value)
    x = np.asarray(x)
    widths = list(zip(pads[: x.ndim], pads[x.ndim :]))
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=value)
    return np.pad(x, widths, mode=mode)


def gather(x, indices, *, axis: int = 0) -> np.ndarray:
    """ONNX Gather: indices in [-size, size) along ``axis``; negatives count from the end."""
    shape_indexing.gather(np.shape(x), np.shape(indices), axis=axis)
    x, idx = np.asarray(x), np.asarray(indices)
    if not np.issubdtype(idx.dtype, np.integer) and idx.size:
        raise ValueError(f"gather: indices have dtype {idx.dtype}, expected an integer type")
    size = x.shape[shape_checks.normalize_axis(axis, x.ndim, "gather")]
    bad = (idx < -size) | (idx >= size)
    if np.any(bad):
        raise ValueError(f"gather: index {idx[bad].flat[0]} is out of range for axis size {size}")
    return np.take(x, np.where(idx < 0, idx + size, idx).astype(np.intp), axis=axis)


def slice(x, *, starts, ends, axes: Ints = None, steps: Ints = None) -> np.ndarray:  # ONNX's name
    """ONNX Slice, with its clamping (see shape_layout.slice_range)."""
    out = np.asarray(x)
    for a, r in shape_layout.slice_ranges(out.shape, starts=starts, ends=ends, axes=axes, steps=steps):
        out = np.take(out, np.arange(r.start, r.stop, r.step, dtype=np.intp), axis=a)
    return out


def split(x, *, axis: int = 0, sizes: Ints = None, num_outputs: int | None = None) -> tuple[np.ndarray, ...]:
    """Parts along ``axis`` (see shape_layout.split_sizes); each part is a copy."""
    parts = shape_layout.split_sizes(np.shape(x), axis=axis, sizes=sizes, num_outputs=num_outputs)
    cuts = np.cumsum(parts)[:-1]
    return tuple(np.array(p) for p in np.split(np.asarray(x), cuts, axis=axis))


def where(condition, x, y) -> np.ndarray:
    """x where the bool ``condition`` is true, else y; numpy broadcasting of all three."""
    return np.where(np.asarray(condition, dtype=bool), x, y)


def copy(x) -> np.ndarray:
    """A copy of ``x``, of its dtype (bool included, which numpy's ``positive`` refuses)."""
    return np.array(x, copy=True)


def concatenate(*xs, axis: int = 0) -> np.ndarray:
    shape_layout.concatenate(*map(np.shape, xs), axis=axis)
    return np.concatenate(xs, axis=axis)
