"""Output shapes of the shape ops: reshape, flatten, transpose, squeeze, unsqueeze, expand,
pad, slice, split and concatenate; conventions in :mod:`byoc.shape_checks`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .shape_checks import (
    AttributeProblem,
    Flag,
    Shape,
    broadcast,
    check_flag,
    check_int,
    check_pads,
    check_shape,
    normalize_axes,
    normalize_axis,
)

PAD_MODES = ("constant", "reflect", "edge")


def reshape(x_shape: Sequence[int], newshape: Sequence[int], *, allowzero: Flag = 0) -> Shape:
    """ONNX Reshape: -1 (at most one) is inferred; 0 copies the input's dimension unless allowzero."""
    x = check_shape(x_shape, "reshape: input shape")
    keep_zero = check_flag(allowzero, "allowzero", "reshape")
    target = [check_int(v, "reshape: newshape") for v in newshape]
    if target.count(-1) > 1:
        raise AttributeProblem("newshape", f"reshape: newshape {target} has more than one -1")
    for i, v in enumerate(target):
        if v < -1:
            raise AttributeProblem(
                "newshape", f"reshape: newshape[{i}] = {v} is negative (only -1 is allowed)"
            )
        if v == 0 and not keep_zero:
            if i >= len(x):
                raise AttributeProblem(
                    "newshape",
                    f"reshape: newshape[{i}] = 0 copies input axis {i}, but the input has rank {len(x)}",
                )
            target[i] = x[i]
    total = math.prod(x)
    if -1 in target:
        known = math.prod(v for v in target if v != -1)
        if known == 0 or total % known:
            raise AttributeProblem(
                "newshape",
                f"reshape: cannot infer the -1 in newshape {list(newshape)} for {total} elements (input {list(x)})",
            )
        target[target.index(-1)] = total // known
    if math.prod(target) != total:
        raise AttributeProblem(
            "newshape",
            f"reshape: newshape {list(newshape)} holds {math.prod(target)} elements, the input {list(x)} {total}",
        )
    return tuple(target)


def flatten(x_shape: Sequence[int], *, axis: int = 1) -> Shape:
    """ONNX Flatten: (prod(x[:axis]), prod(x[axis:])), axis in [-rank, rank]."""
    x = check_shape(x_shape, "flatten: input shape")
    a = check_int(axis, "flatten: axis")
    if not -len(x) <= a <= len(x):
        raise AttributeProblem(
            "axis", f"flatten: axis = {a} is out of range for rank {len(x)} (valid: {-len(x)}..{len(x)})"
        )
    a = a + len(x) if a < 0 else a
    return (math.prod(x[:a]), math.prod(x[a:]))


def transpose(x_shape: Sequence[int], *, perm: Sequence[int] | None = None) -> Shape:
    """perm None reverses the axes."""
    x = check_shape(x_shape, "transpose: input shape")
    if perm is None:
        return x[::-1]
    order = [check_int(v, "transpose: perm") for v in perm]
    if sorted(order) != list(range(len(x))):
        raise AttributeProblem("perm", f"transpose: perm {order} is not a permutation of 0..{len(x) - 1}")
    return tuple(x[i] for i in order)


def squeeze(x_shape: Sequence[int], *, axes: Sequence[int] | None = None) -> Shape:
    """axes None: drop every axis of size 1; named axes must have size 1."""
    x = check_shape(x_shape, "squeeze: input shape")
    if axes is None:
        return tuple(d for d in x if d != 1)
    gone = normalize_axes(axes, len(x), "squeeze")
    for a in gone:
        if x[a] != 1:
            raise AttributeProblem("axes", f"squeeze: axis {a} has size {x[a]}, not 1 (input {list(x)})")
    return tuple(d for i, d in enumerate(x) if i not in gone)


def unsqueeze(x_shape: Sequence[int], *, axes: Sequence[int]) -> Shape:
    """axes index the output (rank + len(axes))."""
    x = check_shape(x_shape, "unsqueeze: input shape")
    rank = len(x) + len(axes)
    new = set(normalize_axes(axes, rank, "unsqueeze"))
    rest = iter(x)
    return tuple(1 if i in new else next(rest) for i in range(rank))


def expand(x_shape: Sequence[int], newshape: Sequence[int]) -> Shape:
    """ONNX Expand: x and ``newshape`` broadcast both ways."""
    target = check_shape(newshape, "expand: newshape")
    try:
        return broadcast(x_shape, target)
    except ValueError:
        raise AttributeProblem(
            "newshape", f"expand: input shape {list(x_shape)} and newshape {list(target)} do not broadcast"
        ) from None


def pad(x_shape: Sequence[int], *, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> Shape:
    """pads: begin of every axis, then end. reflect needs pads < the axis size; edge a non-empty axis."""
    x = check_shape(x_shape, "pad: input shape")
    p = check_pads(pads, len(x), "pad", f"the {len(x)} axes")
    if mode not in PAD_MODES:
        raise AttributeProblem("mode", f"pad: mode {mode!r} is not one of {', '.join(PAD_MODES)}")
    n = len(x)
    for i, size in enumerate(x):
        widest = max(p[i], p[n + i])
        if mode == "reflect" and widest >= size and widest > 0:
            raise AttributeProblem(
                "pads",
                f"pad: reflect pads {p[i]} + {p[n + i]} on axis {i} must be smaller than its size {size}",
            )
        if mode == "edge" and widest > 0 and size == 0:
            raise AttributeProblem("pads", f"pad: edge pads on axis {i} need a non-empty axis")
    return tuple(size + p[i] + p[n + i] for i, size in enumerate(x))


def slice_range(size: int, start: int, end: int, step: int) -> range:
    """The indices ONNX Slice takes along an axis of ``size``: negatives count from the end, then start
    is clamped to [0, size] ([0, size-1] when step < 0) and end to [0, size] ([-1, size-1])."""
    if start < 0:
        start += size
    if end < 0:
        end += size
    if step > 0:
        return range(min(max(start, 0), size), min(max(end, 0), size), step)
    return range(min(max(start, 0), size - 1), min(max(end, -1), size - 1), step)


def _slice_specs(x, starts, ends, axes, steps) -> list[tuple[int, range]]:
    op = "slice"
    if len(starts) != len(ends):
        raise AttributeProblem("starts", f"{op}: starts has {len(starts)} values, ends {len(ends)}")
    count = len(starts)
    if axes is None:
        axes = list(range(count))
    if len(axes) != count:
        raise AttributeProblem("axes", f"{op}: axes has {len(axes)} values, starts and ends {count}")
    if steps is not None and len(steps) != count:
        raise AttributeProblem("steps", f"{op}: steps has {len(steps)} values, starts and ends {count}")
    norm = normalize_axes(axes, len(x), op)
    specs = []
    for i, a in enumerate(norm):
        step = 1 if steps is None else check_int(steps[i], f"{op}: steps")
        if step == 0:
            raise AttributeProblem("steps", f"{op}: steps[{i}] is 0")
        start, end = check_int(starts[i], f"{op}: starts"), check_int(ends[i], f"{op}: ends")
        specs.append((a, slice_range(x[a], start, end, step)))
    return specs


def slice(  # ONNX's name; shadows the builtin in this module only
    x_shape: Sequence[int],
    *,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
) -> Shape:
    """ONNX Slice (see slice_range)."""
    out = list(check_shape(x_shape, "slice: input shape"))
    for a, r in _slice_specs(out, starts, ends, axes, steps):
        out[a] = len(r)
    return tuple(out)


def slice_ranges(x_shape, *, starts, ends, axes=None, steps=None) -> list[tuple[int, range]]:
    """(axis, indices) for every sliced axis, validated as by ``slice``."""
    return _slice_specs(check_shape(x_shape, "slice: input shape"), starts, ends, axes, steps)


def split_sizes(
    x_shape, *, axis: int = 0, sizes: Sequence[int] | None = None, num_outputs: int | None = None
) -> Shape:
    """The part sizes along ``axis``: ``sizes`` as given (they must add up to the axis), or ``num_outputs``
    parts of ceil(size / num_outputs), the last one smaller (ONNX 18); every part of those non-empty. Given
    both, ``sizes`` must have ``num_outputs`` values (a graph node passes its output count)."""
    op = "split"
    x = check_shape(x_shape, f"{op}: input shape")
    a = normalize_axis(axis, len(x), op)
    if sizes is None and num_outputs is None:
        raise AttributeProblem("sizes", f"{op}: give sizes, num_outputs or both")
    if sizes is not None:
        parts = tuple(check_int(v, f"{op}: sizes") for v in sizes)
        if not parts or min(parts) < 0:
            raise AttributeProblem("sizes", f"{op}: sizes {list(parts)} must be non-empty and non-negative")
        if num_outputs is not None and len(parts) != num_outputs:
            raise AttributeProblem(
                "sizes",
                f"{op}: sizes {list(parts)} give {len(parts)} parts, but there are {num_outputs} outputs",
                hint=f"give one size per output, or bind {len(parts)} names",
            )
        if sum(parts) != x[a]:
            raise AttributeProblem(
                "sizes", f"{op}: sizes {list(parts)} add up to {sum(parts)}, axis {a} has size {x[a]}"
            )
        return parts
    n = check_int(num_outputs, f"{op}: num_outputs")
    if n < 1:
        raise AttributeProblem("num_outputs", f"{op}: num_outputs = {n} must be positive")
    chunk = -(-x[a] // n)
    # more outputs than elements leave one empty: refused before n parts are listed (a
    # mutated model's num_outputs may be in the billions)
    parts = tuple(min(chunk, x[a] - i * chunk) for i in range(n)) if n <= x[a] else (0,)
    if min(parts) < 1:
        raise AttributeProblem(
            "num_outputs",
            f"{op}: {n} outputs cannot split size {x[a]} into non-empty parts of {chunk}",
            hint="bind fewer names, or give the part sizes with sizes=[...]",
        )
    return parts


def split(x_shape, *, axis: int = 0, sizes: Sequence[int] | None = None, num_outputs: int | None = None):
    """The shape of every part (see split_sizes)."""
    x = check_shape(x_shape, "split: input shape")
    a = normalize_axis(axis, len(x), "split")
    return tuple(
        (*x[:a], s, *x[a + 1 :]) for s in split_sizes(x, axis=axis, sizes=sizes, num_outputs=num_outputs)
    )


def concatenate(*shapes: Sequence[int], axis: int = 0) -> Shape:
    """Same rank >= 1, same sizes except along ``axis``."""
    if not shapes:
        raise ValueError("concatenate: needs at least one input")
    dims = [check_shape(s, "concatenate: input shape") for s in shapes]
    first = dims[0]
    if not first:
        raise ValueError("concatenate: inputs must have rank >= 1, input 0 is a scalar")
    a = normalize_axis(axis, len(first), "concatenate")
    for i, s in enumerate(dims[1:], 1):
        if len(s) != len(first):
            raise ValueError(
                f"concatenate: input {i} has shape {list(s)} of rank {len(s)}, input 0 {list(first)}"
            )
        differ = [j for j in range(len(s)) if j != a and s[j] != first[j]]
        if differ:
            raise ValueError(
                f"concatenate: input {i} has shape {list(s)}, input 0 {list(first)}: they differ on axis "
                f"{differ[0]}, and only axis = {a} may differ"
            )
    return (*first[:a], sum(s[a] for s in dims), *first[a + 1 :])
