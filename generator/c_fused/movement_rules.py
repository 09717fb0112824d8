"""The index algebra of the ``c_fused`` movement rules (reshape, transpose, slice, pad,
gather, concatenate, split, ...): the index locals and the C value of one output element
(see :mod:`byoc.generator.c_fused.anchors`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from byoc import shape_checks, shape_layout
from byoc.ir import is_half

from ..c import dtypes as c_dtypes
from .index import Anchor, Site, affine, element, float_literal, outside_test
from .loops import axis_strides


def _same_order(site: Site) -> Anchor:
    """reshape, flatten, squeeze, unsqueeze: the same elements in the same order."""
    return Anchor(value=element(site.arrays[0], site.var, site.out.shape))


def _transpose(site: Site) -> Anchor:
    (x,) = site.ins
    perm = site.attrs.ints("perm") or tuple(reversed(range(x.rank)))
    perm = shape_checks.normalize_axes(perm, x.rank, "transpose", "perm")
    index = ["0"] * x.rank
    for k, a in enumerate(perm):
        index[a] = site.var[k]
    return Anchor(value=element(site.arrays[0], index, x.shape))


def _expand(site: Site) -> Anchor:
    (x,) = site.ins
    strides = axis_strides(x.shape, site.out.shape)
    return Anchor(value=f"{site.arrays[0]}[{affine(list(zip(site.var, strides)))}]")


def _slice(site: Site) -> Anchor:
    (x,) = site.ins
    index = list(site.var[: x.rank])
    ranges = shape_layout.slice_ranges(
        x.shape,
        starts=site.attrs.ints("starts"),
        ends=site.attrs.ints("ends"),
        axes=site.attrs.ints("axes") or None,
        steps=site.attrs.ints("steps") or None,
    )
    for a, r in ranges:
        index[a] = affine([(site.var[a], r.step)], r.start)
    return Anchor(value=element(site.arrays[0], index, x.shape))


def _pad(site: Site) -> Anchor:
    (x,) = site.ins
    pads, mode = site.attrs.ints("pads"), site.attrs.text("mode")
    steps, index, outside = [], [], []
    for a in range(x.rank):
        begin, size, var = pads[a], x.shape[a], site.var[a]
        if begin == 0 and pads[x.rank + a] == 0 or site.out.shape[a] == 0:
            index.append(var)
            continue
        if size == 1 and mode != "constant":  # every element repeats the one input element
            index.append("0")
            continue
        local = f"{site.prefix}_ix{a}"
        shifted = affine([(var, 1)], -begin)
        low, high = -begin, site.out.shape[a] - 1 - begin
        if mode == "constant":
            steps.append(f"const int64_t {local} = {shifted};")
            test = outside_test(local, low, high, size)
            if test:
                outside.append(test)
        elif mode == "reflect":
            steps.append(
                f"const int64_t {local} = {shifted} < 0 ? {affine([(var, -1)], begin)} : "
                f"({shifted} >= {size} ? {affine([(var, -1)], 2 * size - 2 + begin)} : {shifted});"
            )
        else:  # edge
            steps.append(
                f"const int64_t {local} = {shifted} < 0 ? 0 : ({shifted} >= {size} ? {size - 1} : {shifted});"
            )
        index.append(local)
    value = element(site.arrays[0], index, x.shape)
    if outside:
        pad = float_literal(site.attrs["value"])
        pad = c_dtypes.store(pad, site.out.dtype) if is_half(site.out.dtype) else f"({site.ctype}){pad}"
        value = f"({' || '.join(outside)}) ? {pad} : {value}"
    return Anchor(steps=tuple(steps), value=value)


def _gather(site: Site) -> Anchor:
    x, idx = site.ins
    axis = site.attrs.integer("axis")
    q = idx.rank
    size = x.shape[axis]
    at = f"{site.prefix}_at"
    got = element(site.arrays[1], site.var[axis : axis + q], idx.shape)
    steps = (
        f"const int64_t {at} = (int64_t){got};",
        f"if ({at} < -{size} || {at} >= {size}) {site.fail}",
    )
    index = [*site.var[:axis], f"({at} < 0 ? {at} + {size} : {at})", *site.var[axis + q :]]
    return Anchor(steps=steps, value=element(site.arrays[0], index, x.shape), can_fail=True)


def _concatenate(site: Site) -> Anchor:
    axis = site.attrs.integer("axis")
    var = site.var[axis]
    parts, offset = [], 0
    for array, t in zip(site.arrays, site.ins):
        if t.shape[axis]:
            index = list(site.var)
            index[axis] = affine([(var, 1)], -offset)
            parts.append((offset + t.shape[axis], element(array, index, t.shape)))
        offset += t.shape[axis]
    value = parts[-1][1]
    for end, text in reversed(parts[:-1]):
        value = f"{var} < {end} ? {text} : ({value})"
    return Anchor(value=value)


def _split(site: Site) -> Anchor:
    """Output ``part`` is the input from the sum of the earlier parts' sizes along ``axis``."""
    axis = site.attrs.integer("axis")
    offset = sum(t.shape[axis] for t in site.parts[: site.part])
    index = list(site.var)
    index[axis] = affine([(site.var[axis], 1)], offset)
    return Anchor(value=element(site.arrays[0], index, site.ins[0].shape))


MOVEMENT_ANCHORS: Mapping[str, Callable[[Site], Anchor]] = {
    "reshape": _same_order,
    "flatten": _same_order,
    "squeeze": _same_order,
    "unsqueeze": _same_order,
    "transpose": _transpose,
    "expand": _expand,
    "slice": _slice,
    "pad": _pad,
    "gather": _gather,
    "concatenate": _concatenate,
    "split": _split,
}
"""The index algebra of each movement rule."""
