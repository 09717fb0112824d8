"""Where each element of an *anchor* comes from: the index algebra of the ``c_fused``
codegen for the non-elementwise shape rules.

An anchor is a node whose output element at index ``o`` reads its inputs at other
indices. For each rule this module says, in C, for one output element:

- reduction rules (conv, pool, dense, reduce, softmax, ...): the reduction loops
  (:class:`Level`: a counter ``r<k>``, its extent, and the index locals and ``continue``
  guards of that loop, such as a convolution tap that falls on the padding), where each
  input is read at a point of the reduction space, and ``${window}``. What is
  accumulated, and how the result follows, is the op's data (``reduce`` and ``result``
  in the backend spec);
- movement rules (reshape, transpose, slice, pad, gather, concatenate, split, ...):
  index locals, and the C value of the element (an input element, or a pad value).
  A rule of several outputs (split) is asked for one output at a time.

Output index ``o`` is given per axis as the C name of its loop counter (``"0"`` for an
axis of extent 1, which has no loop); inputs by the C names of their arrays, which are
contiguous and row-major. Shapes and attributes are static, so every extent, stride
and bound is a number, and bounds checks that can never fail are left out.

This module knows rule names (the vocabulary of :mod:`byoc.shape_rules`), never op names.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from byoc import shape_functions as sf
from byoc.ir import AttrValue, TensorType, is_half

from . import c_dtypes
from .fused_loops import axis_strides


@dataclass(frozen=True, slots=True)
class Level:
    """One reduction loop: ``for (r = 0; r < extent; ++r)``, with ``steps`` (index
    locals and ``if (...) continue;`` guards) at its top. A level of extent 1 has no loop:
    its counter is ``0`` and its steps stand alone."""

    var: str
    extent: int
    steps: tuple[str, ...] = ()
    bounds: tuple[Bound, ...] = ()
    """The affine guards among ``steps``, as data (blocked nests turn them into loop bounds)."""


@dataclass(frozen=True, slots=True)
class Bound:
    """A guard step ``guard`` that skips the point unless ``0 <= local < size``, where
    ``local`` is ``affine(terms, const)``; ``low`` and ``high`` say which of the two
    tests it makes (a test that can never fail is left out)."""

    local: str
    terms: tuple[tuple[str, int], ...]
    const: int
    size: int
    low: bool
    high: bool
    guard: str


@dataclass(frozen=True, slots=True)
class Anchor:
    """One anchor node's element, for the loops of its output (see the module doc)."""

    levels: tuple[Level, ...] = ()
    reads: tuple[str, ...] = ()
    """Reduction rules: each input's element at the current point of the reduction."""
    window: int | str = 1
    """Reduction rules: the ``${window}`` of ``result``."""
    steps: tuple[str, ...] = ()
    """Movement rules: index locals and checks before the value."""
    value: str = ""
    """Movement rules: the output element."""
    can_fail: bool = False
    """True when a step jumps to ``fail`` (an index out of range)."""


@dataclass(frozen=True, slots=True)
class Site:
    """What the index algebra of one anchor works from."""

    out: TensorType
    ins: tuple[TensorType, ...]
    attrs: Mapping[str, AttrValue]
    """The resolved attributes (:func:`byoc.attr_values.resolve`)."""
    var: tuple[str, ...]
    """The C counter of each output axis; ``"0"`` for an axis without a loop."""
    arrays: tuple[str, ...]
    """The C name of each input's array."""
    ctype: str
    prefix: str
    """Prefix of the index locals at the nest's level (the node's C name)."""
    fail: str
    """The C statement that reports an index out of range."""
    part: int = 0
    """Which output of the node ``out`` is (a rule of several outputs: split)."""
    parts: tuple[TensorType, ...] = ()
    """The types of all the node's outputs, ``out`` among them at ``part``."""


# ------------------------------------------------------------------- C index text

_WORD = re.compile(r"\w+")


def _wrap(expr: str) -> str:
    return expr if _WORD.fullmatch(expr) else f"({expr})"


def affine(terms: Sequence[tuple[str, int]], const: int = 0) -> str:
    """``sum(coef * expr) + const`` as C, leaving out zero terms and folding number
    terms into the constant: ``i2 * 2 + r1 - 1``."""
    parts: list[str] = []
    for expr, coef in terms:
        if expr.isdigit():
            const += int(expr) * coef
            continue
        if coef == 0:
            continue
        text = expr if abs(coef) == 1 else f"{_wrap(expr)} * {abs(coef)}"
        if coef < 0:
            parts.append(f"- {text}" if parts else f"-{text}")
        else:
            parts.append(f"+ {text}" if parts else text)
    if const:
        parts.append((f"{'-' if const < 0 else '+'} {abs(const)}") if parts else str(const))
    return " ".join(parts) or "0"


def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [0] * len(shape), 1
    for a in reversed(range(len(shape))):
        strides[a] = step
        step *= shape[a]
    return tuple(strides)


def element(array: str, indices: Sequence[str], shape: Sequence[int]) -> str:
    """``array[flat index]`` of the element at ``indices`` (one C index per axis)."""
    terms = [(i, s) for i, s, extent in zip(indices, row_major(shape), shape) if extent != 1]
    return f"{array}[{affine(terms)}]"


def _outside(index: str, low: int, high: int, size: int) -> str | None:
    """The C test that ``index``, which ranges over ``low..high``, falls outside ``0..size-1``;
    None when it never does."""
    tests = ([f"{index} < 0"] if low < 0 else []) + ([f"{index} >= {size}"] if high >= size else [])
    return " || ".join(tests) or None


def _index_local(
    var: str,
    extent: int,
    local: str,
    terms: Sequence[tuple[str, int]],
    const: int,
    low: int,
    high: int,
    size: int,
) -> Level:
    """The reduction level ``var`` whose steps set ``local`` to ``affine(terms, const)``
    (which ranges over ``low..high``) and skip the point when it falls outside the
    input's ``size``; no steps when the input has extent 1 and nothing can fall outside
    (an element's index along it is then 0)."""
    test = _outside(local, low, high, size)
    if size == 1 and test is None:
        return Level(var, extent)
    define = f"const int64_t {local} = {affine(terms, const)};"
    if test is None:
        return Level(var, extent, (define,))
    guard = f"if ({test}) continue;"
    bound = Bound(local, tuple(terms), const, size, low < 0, high >= size, guard)
    return Level(var, extent, (define, guard), (bound,))


class _Counters:
    """Reduction counters ``r0``, ``r1``, ...; ``0`` for an extent of 1 (no loop)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, extent: int) -> str:
        if extent == 1:
            return "0"
        name = f"r{self.count}"
        self.count += 1
        return name


# ------------------------------------------------------------------- reduction rules


def _conv(site: Site) -> Anchor:
    x, w = site.ins
    n = x.rank - 2
    s, d, p = site.attrs["strides"], site.attrs["dilations"], site.attrs["pads"]
    groups = int(site.attrs["groups"])  # type: ignore[arg-type]
    cg, mg = w.shape[1], w.shape[0] // groups
    counter = _Counters()
    c = counter(cg)
    group = "0" if groups == 1 else site.var[1] if mg == 1 else f"{site.var[1]} / {mg}"
    channel = affine([(group, cg), (c, 1)])
    levels = [Level(c, cg)]
    for j in range(n):
        r = counter(w.shape[2 + j])
        terms = [(site.var[2 + j], s[j]), (r, d[j])]  # type: ignore[index]
        high = (site.out.shape[2 + j] - 1) * s[j] + (w.shape[2 + j] - 1) * d[j] - p[j]  # type: ignore[index]
        levels.append(
            _index_local(r, w.shape[2 + j], f"ix{2 + j}", terms, -p[j], -p[j], high, x.shape[2 + j])
        )  # type: ignore[index]
    spatial = [f"ix{2 + j}" for j in range(n)]
    taps = [lv.var for lv in levels[1:]]
    reads = (
        element(site.arrays[0], [site.var[0], channel, *spatial], x.shape),
        element(site.arrays[1], [site.var[1], c, *taps], w.shape),
    )
    return Anchor(tuple(levels), reads, cg * math.prod(w.shape[2:]))


def _conv_transpose(site: Site) -> Anchor:
    x, w = site.ins
    n = x.rank - 2
    s, d, p = site.attrs["strides"], site.attrs["dilations"], site.attrs["pads"]
    groups = int(site.attrs["groups"])  # type: ignore[arg-type]
    cg, mg = x.shape[1] // groups, w.shape[1]
    counter = _Counters()
    c = counter(cg)
    group = "0" if groups == 1 else site.var[1] if mg == 1 else f"{site.var[1]} / {mg}"
    channel = affine([(group, cg), (c, 1)])
    within = site.var[1] if groups == 1 else "0" if mg == 1 else f"{site.var[1]} % {mg}"
    levels = [Level(c, cg)]
    for j in range(n):
        k, size, stride = w.shape[2 + j], x.shape[2 + j], s[j]  # type: ignore[index]
        r = counter(k)
        # output o takes tap r from input i where i * stride + r * dilation - pad = o
        terms = [(site.var[2 + j], 1), (r, -d[j])]  # type: ignore[index]
        low = p[j] - (k - 1) * d[j]  # type: ignore[index]
        high = site.out.shape[2 + j] - 1 + p[j]  # type: ignore[index]
        local = f"ix{2 + j}"
        if stride == 1:
            levels.append(_index_local(r, k, local, terms, p[j], low, high, size))  # type: ignore[index]
        else:
            t = f"q{2 + j}"
            skip = f"{t} < 0 || {t} % {stride} != 0" if low < 0 else f"{t} % {stride} != 0"
            inner = _index_local(r, k, local, [(f"{t} / {stride}", 1)], 0, 0, high // stride, size)
            steps = (f"const int64_t {t} = {affine(terms, p[j])};", f"if ({skip}) continue;")  # type: ignore[index]
            levels.append(Level(r, k, steps + inner.steps, inner.bounds))
    spatial = [f"ix{2 + j}" for j in range(n)]
    taps = [lv.var for lv in levels[1:]]
    reads = (
        element(site.arrays[0], [site.var[0], channel, *spatial], x.shape),
        element(site.arrays[1], [channel, within, *taps], w.shape),
    )
    return Anchor(tuple(levels), reads, cg * math.prod(w.shape[2:]))


def _pool(site: Site) -> Anchor:
    (x,) = site.ins
    n = x.rank - 2
    k, s, d, p = (site.attrs[a] for a in ("kernel_shape", "strides", "dilations", "pads"))
    counter = _Counters()
    levels, counts = [], []
    for j in range(n):
        r = counter(k[j])  # type: ignore[index]
        out, size = site.out.shape[2 + j], x.shape[2 + j]
        terms = [(site.var[2 + j], s[j]), (r, d[j])]  # type: ignore[index]
        high = (out - 1) * s[j] + (k[j] - 1) * d[j] - p[j]  # type: ignore[index]
        levels.append(_index_local(r, k[j], f"ix{2 + j}", terms, -p[j], -p[j], high, size))  # type: ignore[index]
        counts.append(_padded_taps(site.var[2 + j], out, k[j], s[j], d[j], size + p[j] + p[n + j]))  # type: ignore[index]
    reads = (element(site.arrays[0], [site.var[0], site.var[1], *(f"ix{2 + j}" for j in range(n))], x.shape),)
    window = " * ".join(str(c) for c in counts if c != "1") or "1"
    return Anchor(tuple(levels), reads, int(window) if window.isdigit() else window)


def _padded_taps(var: str, out: int, taps: int, stride: int, dilation: int, padded: int) -> str:
    """The number of taps of window ``var`` inside the explicitly padded input (of extent
    ``padded``): all of them, but at a ceil_mode window that overhangs the end pad."""

    # tap r lies inside when var * stride + r * dilation < padded
    def inside(o: int) -> int:
        return min(taps, -(-(padded - o * stride) // dilation))

    if all(inside(o) == taps for o in range(out)):
        return str(taps)
    fit = f"({affine([(var, -stride)], padded + dilation - 1)}) / {dilation}"
    return f"({fit} < {taps} ? {fit} : {taps})"


def _global_pool(site: Site) -> Anchor:
    (x,) = site.ins
    counter = _Counters()
    levels = [Level(counter(e), e) for e in x.shape[2:]]
    reads = (element(site.arrays[0], [site.var[0], site.var[1], *(lv.var for lv in levels)], x.shape),)
    return Anchor(tuple(levels), reads, math.prod(x.shape[2:]))


def _reduce(site: Site) -> Anchor:
    (x,) = site.ins
    axes = site.attrs["axes"]
    reduced = set(range(x.rank)) if not axes else set(sf.normalize_axes(axes, x.rank, "reduce"))  # type: ignore[arg-type]
    counter = _Counters()
    levels, index = [], []
    kept = iter(site.var if not site.attrs["keepdims"] else ())
    for a in range(x.rank):
        if a in reduced:
            lv = Level(counter(x.shape[a]), x.shape[a])
            levels.append(lv)
            index.append(lv.var)
        else:
            index.append(site.var[a] if site.attrs["keepdims"] else next(kept))
    reads = (element(site.arrays[0], index, x.shape),)
    return Anchor(tuple(levels), reads, math.prod(x.shape[a] for a in reduced))


def _softmax(site: Site) -> Anchor:
    (x,) = site.ins
    axis = int(site.attrs["axis"])  # type: ignore[arg-type]
    level = Level(_Counters()(x.shape[axis]), x.shape[axis])
    index = [level.var if a == axis else site.var[a] for a in range(x.rank)]
    return Anchor((level,), (element(site.arrays[0], index, x.shape),), x.shape[axis])


def _lrn(site: Site) -> Anchor:
    (x,) = site.ins
    size = int(site.attrs["size"])  # type: ignore[arg-type]
    before = (size - 1) // 2
    r = _Counters()(size)
    high = x.shape[1] - 1 + size - 1 - before
    level = _index_local(r, size, "ic", [(site.var[1], 1), (r, 1)], -before, -before, high, x.shape[1])
    reads = (element(site.arrays[0], [site.var[0], "ic", *site.var[2:]], x.shape),)
    return Anchor((level,), reads, size)


def _dense(site: Site) -> Anchor:
    x, w = site.ins
    level = Level(_Counters()(x.shape[-1]), x.shape[-1])
    reads = (
        element(site.arrays[0], [*site.var[:-1], level.var], x.shape),
        element(site.arrays[1], [site.var[-1], level.var], w.shape),
    )
    return Anchor((level,), reads, x.shape[-1])


def _matmul(site: Site) -> Anchor:
    a, b = site.ins
    inner = a.shape[-1]
    level = Level(_Counters()(inner), inner)
    rows, cols = a.rank > 1, b.rank > 1
    batch = site.out.rank - rows - cols
    row = site.var[batch] if rows else None
    col = site.var[batch + rows] if cols else None

    def batch_index(t: TensorType, own: int) -> list[str]:
        """The batch axes of ``t`` (``own`` of them), aligned right with the output's."""
        return [site.var[batch - own + i] if t.shape[i] != 1 else "0" for i in range(own)]

    a_index = [*batch_index(a, a.rank - 2), row, level.var] if rows else [level.var]
    b_index = [*batch_index(b, b.rank - 2), level.var, col] if cols else [level.var]
    reads = (element(site.arrays[0], a_index, a.shape), element(site.arrays[1], b_index, b.shape))  # type: ignore[arg-type]
    return Anchor((level,), reads, inner)


# ------------------------------------------------------------------- movement rules


def _same_order(site: Site) -> Anchor:
    """reshape, flatten, squeeze, unsqueeze: the same elements in the same order."""
    return Anchor(value=element(site.arrays[0], site.var, site.out.shape))


def _transpose(site: Site) -> Anchor:
    (x,) = site.ins
    perm = site.attrs["perm"] or tuple(reversed(range(x.rank)))
    perm = sf.normalize_axes(perm, x.rank, "transpose", "perm")  # type: ignore[arg-type]
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
    ranges = sf.slice_ranges(
        x.shape,
        starts=site.attrs["starts"],
        ends=site.attrs["ends"],
        axes=site.attrs["axes"] or None,
        steps=site.attrs["steps"] or None,
    )
    for a, r in ranges:
        index[a] = affine([(site.var[a], r.step)], r.start)
    return Anchor(value=element(site.arrays[0], index, x.shape))


def _pad(site: Site) -> Anchor:
    (x,) = site.ins
    pads, mode = site.attrs["pads"], site.attrs["mode"]
    steps, index, outside = [], [], []
    for a in range(x.rank):
        begin, size, var = pads[a], x.shape[a], site.var[a]  # type: ignore[index]
        if begin == 0 and pads[x.rank + a] == 0 or site.out.shape[a] == 0:  # type: ignore[index]
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
            test = _outside(local, low, high, size)
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
        pad = _float(site.attrs["value"])
        pad = c_dtypes.store(pad, site.out.dtype) if is_half(site.out.dtype) else f"({site.ctype}){pad}"
        value = f"({' || '.join(outside)}) ? {pad} : {value}"
    return Anchor(steps=tuple(steps), value=value)


def _float(value: AttrValue) -> str:
    text = repr(float(value))  # type: ignore[arg-type]
    return text if "." in text or "e" in text else text + ".0"


def _gather(site: Site) -> Anchor:
    x, idx = site.ins
    axis = int(site.attrs["axis"])  # type: ignore[arg-type]
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
    axis = int(site.attrs["axis"])  # type: ignore[arg-type]
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
    axis = int(site.attrs["axis"])  # type: ignore[arg-type]
    offset = sum(t.shape[axis] for t in site.parts[: site.part])
    index = list(site.var)
    index[axis] = affine([(site.var[axis], 1)], offset)
    return Anchor(value=element(site.arrays[0], index, site.ins[0].shape))


RULES: Mapping[str, Callable[[Site], Anchor]] = {
    "conv": _conv,
    "conv_transpose": _conv_transpose,
    "pool": _pool,
    "global_pool": _global_pool,
    "reduce": _reduce,
    "softmax": _softmax,
    "lrn": _lrn,
    "dense": _dense,
    "matmul": _matmul,
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
"""The index algebra of every anchor rule of the c_fused kind."""


def loop_order(rule: str, out: TensorType, attrs: Mapping[str, AttrValue]) -> tuple[int, ...]:
    """The output axes of an anchor's loops, outermost first: row-major, but softmax's
    axis innermost, so its reductions are computed once per row, outside that loop."""
    axes = tuple(range(out.rank))
    if rule == "softmax":
        axis = int(attrs["axis"])  # type: ignore[arg-type]
        return (*(a for a in axes if a != axis), axis)
    return axes


def operand_shapes(
    rule: str, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]
) -> tuple[tuple[int, ...], ...]:
    """The shape each input of an expression op broadcasts from, numpy's way: its own,
    but a channel-wise parameter (bias_add's bias, batch_norm's four) placed on its axis,
    ``(C,) + (1,) * (rank - 1 - axis)``, so that it is indexed by that axis's counter."""
    rank = ins[0].rank
    axis = 1 if rule == "batch_norm" else int(attrs["axis"]) if rule == "bias_add" else None  # type: ignore[arg-type]
    if axis is None:
        return tuple(t.shape for t in ins)
    placed = (ins[0].shape[axis],) + (1,) * (rank - 1 - axis)
    return (ins[0].shape, *(placed for _ in ins[1:]))


def c_attributes(attrs: Mapping[str, AttrValue]) -> dict[str, str]:
    """The scalar attributes as C literals, for templates: a bool as 1 or 0, a float as
    a double literal that reads back exactly."""
    out = {}
    for name, value in attrs.items():
        if isinstance(value, bool):
            out[name] = "1" if value else "0"
        elif isinstance(value, int):
            out[name] = str(value)
        elif isinstance(value, float):
            out[name] = _float(value)
        elif isinstance(value, str) and re.fullmatch(r"[A-Za-z_]\w*", value):
            out[name] = value  # a choice that is a C identifier (bit_shift's LEFT, RIGHT)
    return out
