"""The index algebra of the ``c_fused`` reduction rules (conv, pool, dense, reduce,
softmax, ...): the reduction loops of one output element, and where each input is read
in them (see :mod:`byoc.generator.c_fused.anchors`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

from byoc import shape_checks
from byoc.ir import TensorType

from .index import Anchor, Counters, Level, Site, affine, element, index_local


def _conv(site: Site) -> Anchor:
    x, w = site.ins[:2]
    n = x.rank - 2
    s, d, p = site.attrs.ints("strides"), site.attrs.ints("dilations"), site.attrs.ints("pads")
    groups = site.attrs.integer("groups")
    cg, mg = w.shape[1], w.shape[0] // groups
    counter = Counters()
    c = counter(cg)
    group = "0" if groups == 1 else site.var[1] if mg == 1 else f"{site.var[1]} / {mg}"
    channel = affine([(group, cg), (c, 1)])
    levels = [Level(c, cg)]
    for j in range(n):
        r = counter(w.shape[2 + j])
        terms = [(site.var[2 + j], s[j]), (r, d[j])]
        high = (site.out.shape[2 + j] - 1) * s[j] + (w.shape[2 + j] - 1) * d[j] - p[j]
        levels.append(index_local(r, w.shape[2 + j], f"ix{2 + j}", terms, -p[j], -p[j], high, x.shape[2 + j]))
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
    s, d, p = site.attrs.ints("strides"), site.attrs.ints("dilations"), site.attrs.ints("pads")
    groups = site.attrs.integer("groups")
    cg, mg = x.shape[1] // groups, w.shape[1]
    counter = Counters()
    c = counter(cg)
    group = "0" if groups == 1 else site.var[1] if mg == 1 else f"{site.var[1]} / {mg}"
    channel = affine([(group, cg), (c, 1)])
    within = site.var[1] if groups == 1 else "0" if mg == 1 else f"{site.var[1]} % {mg}"
    levels = [Level(c, cg)]
    for j in range(n):
        k, size, stride = w.shape[2 + j], x.shape[2 + j], s[j]
        r = counter(k)
        # output o takes tap r from input i where i * stride + r * dilation - pad = o
        terms = [(site.var[2 + j], 1), (r, -d[j])]
        low = p[j] - (k - 1) * d[j]
        high = site.out.shape[2 + j] - 1 + p[j]
        local = f"ix{2 + j}"
        if stride == 1:
            levels.append(index_local(r, k, local, terms, p[j], low, high, size))
        else:
            t = f"q{2 + j}"
            skip = f"{t} < 0 || {t} % {stride} != 0" if low < 0 else f"{t} % {stride} != 0"
            inner = index_local(r, k, local, [(f"{t} / {stride}", 1)], 0, 0, high // stride, size)
            steps = (f"const int64_t {t} = {affine(terms, p[j])};", f"if ({skip}) continue;")
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
    k, s, d, p = (site.attrs.ints(a) for a in ("kernel_shape", "strides", "dilations", "pads"))
    counter = Counters()
    levels, counts = [], []
    for j in range(n):
        r = counter(k[j])
        out, size = site.out.shape[2 + j], x.shape[2 + j]
        terms = [(site.var[2 + j], s[j]), (r, d[j])]
        high = (out - 1) * s[j] + (k[j] - 1) * d[j] - p[j]
        levels.append(index_local(r, k[j], f"ix{2 + j}", terms, -p[j], -p[j], high, size))
        counts.append(_padded_taps(site.var[2 + j], out, k[j], s[j], d[j], size + p[j] + p[n + j]))
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
    counter = Counters()
    levels = [Level(counter(e), e) for e in x.shape[2:]]
    reads = (element(site.arrays[0], [site.var[0], site.var[1], *(lv.var for lv in levels)], x.shape),)
    return Anchor(tuple(levels), reads, math.prod(x.shape[2:]))


def _reduce(site: Site) -> Anchor:
    (x,) = site.ins
    axes = site.attrs.ints("axes")
    reduced = set(range(x.rank)) if not axes else set(shape_checks.normalize_axes(axes, x.rank, "reduce"))
    counter = Counters()
    levels, index = [], []
    kept = iter(site.var if not site.attrs.flag("keepdims") else ())
    for a in range(x.rank):
        if a in reduced:
            lv = Level(counter(x.shape[a]), x.shape[a])
            levels.append(lv)
            index.append(lv.var)
        else:
            index.append(site.var[a] if site.attrs.flag("keepdims") else next(kept))
    reads = (element(site.arrays[0], index, x.shape),)
    return Anchor(tuple(levels), reads, math.prod(x.shape[a] for a in reduced))


def _softmax(site: Site) -> Anchor:
    (x,) = site.ins
    axis = site.attrs.integer("axis")
    level = Level(Counters()(x.shape[axis]), x.shape[axis])
    index = [level.var if a == axis else site.var[a] for a in range(x.rank)]
    return Anchor((level,), (element(site.arrays[0], index, x.shape),), x.shape[axis])


def _lrn(site: Site) -> Anchor:
    (x,) = site.ins
    size = site.attrs.integer("size")
    before = (size - 1) // 2
    r = Counters()(size)
    high = x.shape[1] - 1 + size - 1 - before
    level = index_local(r, size, "ic", [(site.var[1], 1), (r, 1)], -before, -before, high, x.shape[1])
    reads = (element(site.arrays[0], [site.var[0], "ic", *site.var[2:]], x.shape),)
    return Anchor((level,), reads, size)


def _dense(site: Site) -> Anchor:
    x, w = site.ins
    level = Level(Counters()(x.shape[-1]), x.shape[-1])
    reads = (
        element(site.arrays[0], [*site.var[:-1], level.var], x.shape),
        element(site.arrays[1], [site.var[-1], level.var], w.shape),
    )
    return Anchor((level,), reads, x.shape[-1])


def _matmul(site: Site) -> Anchor:
    a, b = site.ins[:2]
    inner = a.shape[-1]
    level = Level(Counters()(inner), inner)
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


def _zero_points(site: Site, anchor: Anchor, channel: str | None) -> Anchor:
    """``anchor`` of an integer product (conv_integer, matmul_integer), with the reads of
    its zero points (inputs 2 and 3) added: the first one value, the second one value or
    one per output channel (a conv's, by the counter ``channel``; a matmul's columns)."""
    first = f"{site.arrays[2]}[0]"
    per_channel = channel is not None and math.prod(site.ins[3].shape) > 1
    second = f"{site.arrays[3]}[{channel if per_channel else 0}]"
    return replace(anchor, reads=(*anchor.reads, first, second))


def _conv_integer(site: Site) -> Anchor:
    return _zero_points(site, _conv(site), site.var[1])


def _matmul_integer(site: Site) -> Anchor:
    columns = site.ins[1].rank > 1
    return _zero_points(site, _matmul(site), site.var[-1] if columns else None)


REDUCTION_ANCHORS: Mapping[str, Callable[[Site], Anchor]] = {
    "conv": _conv,
    "conv_transpose": _conv_transpose,
    "pool": _pool,
    "global_pool": _global_pool,
    "reduce": _reduce,
    "softmax": _softmax,
    "lrn": _lrn,
    "dense": _dense,
    "matmul": _matmul,
    "conv_integer": _conv_integer,
    "matmul_integer": _matmul_integer,
}
"""The index algebra of each reduction rule."""
