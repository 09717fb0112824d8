"""Convolutions and pooling over layout (N, C, spatial...).

Speed: convolutions are im2col (a strided window view copied once) and one batched matmul over the
groups; pooling reduces a window view.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import shape_conv_pool
from .arrays import Ints, f64


def _spatial_attrs(n: int, strides, dilations, pads) -> tuple[tuple[int, ...], ...]:
    """strides, dilations and pads with ONNX's defaults (ones, ones, zeros) for ``n`` spatial axes."""
    return (
        (1,) * n if strides is None else tuple(strides),
        (1,) * n if dilations is None else tuple(dilations),
        (0,) * (2 * n) if pads is None else tuple(pads),
    )


def _pad_spatial(x: np.ndarray, begin: Sequence[int], end: Sequence[int], value: float) -> np.ndarray:
    widths = [(0, 0), (0, 0), *zip(begin, end)]
    if not any(b or e for b, e in widths):
        return x
    return np.pad(x, widths, mode="constant", constant_values=value)


def _windows(xp: np.ndarray, kernel: Sequence[int], strides, dilations, out: Sequence[int]) -> np.ndarray:
    """View of padded ``xp`` (N, C, P...) as (N, C, O..., k...): window o, tap j is xp[o*s + j*d]."""
    n = len(kernel)
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    view = sliding_window_view(xp, extents, axis=tuple(range(2, 2 + n)))
    span = builtins.slice
    index = (
        span(None),
        span(None),
        *(span(0, (o - 1) * s + 1, s) for o, s in zip(out, strides)),
        *(span(None, None, d) for d in dilations),
    )
    return view[index]


# ------------------------------------------------------------------------------- convolutions


def conv(
    x, w, *, strides: Ints = None, pads: Ints = None, dilations: Ints = None, groups: int = 1
) -> np.ndarray:
    """N-D grouped convolution (cross-correlation): x (N, C, D...), w (M, C/groups, k...)."""
    out_shape = shape_conv_pool.conv(
        np.shape(x), np.shape(w), strides=strides, pads=pads, dilations=dilations, groups=groups
    )
    x, w = f64(x), f64(w)
    n = x.ndim - 2
    strides, dilations, pads = _spatial_attrs(n, strides, dilations, pads)
    kernel, out = w.shape[2:], out_shape[2:]
    cols = _windows(_pad_spatial(x, pads[:n], pads[n:], 0.0), kernel, strides, dilations, out)
    batch, cg, mg = x.shape[0], x.shape[1] // groups, w.shape[0] // groups
    # (N, G, Cg, O..., k...) -> (G, N, O..., Cg, k...) -> (G, N*O, Cg*K): the one copy (im2col)
    cols = cols.reshape(batch, groups, cg, *out, *kernel)
    cols = cols.transpose(1, 0, *range(3, 3 + n), 2, *range(3 + n, 3 + 2 * n))
    cols = cols.reshape(groups, batch * math.prod(out), cg * math.prod(kernel))
    taps = np.ascontiguousarray(w.reshape(groups, mg, cg * math.prod(kernel)).transpose(0, 2, 1))
    y = np.matmul(cols, taps)  # (G, N*O, Mg)
    y = y.reshape(groups, batch, *out, mg).transpose(1, 0, n + 2, *range(2, n + 2))
    return y.reshape(out_shape)


def conv_transpose(
    x,
    w,
    *,
    strides: Ints = None,
    pads: Ints = None,
    output_padding: Ints = None,
    dilations: Ints = None,
    groups: int = 1,
) -> np.ndarray:
    """N-D grouped transposed convolution: x (N, C, D...), w (C, M/groups, k...); input element i,
    tap j lands on output i*strides + j*dilations - pad_begin; output_padding extends the end."""
    out_shape = shape_conv_pool.conv_transpose(
        np.shape(x),
        np.shape(w),
        strides=strides,
        pads=pads,
        output_padding=output_padding,
        dilations=dilations,
        groups=groups,
    )
    x, w = f64(x), f64(w)
    n = x.ndim - 2
    strides, dilations, pads = _spatial_attrs(n, strides, dilations, pads)
    batch, inner, kernel = x.shape[0], x.shape[2:], w.shape[2:]
    cg, mg = x.shape[1] // groups, w.shape[1]
    # contributions (G, N*D, Cg) @ (G, Cg, Mg*K) -> (N, M, D..., k...)
    xs = x.reshape(batch, groups, cg, math.prod(inner)).transpose(1, 0, 3, 2).reshape(groups, -1, cg)
    taps = w.reshape(groups, cg, mg * math.prod(kernel))
    part = np.matmul(xs, taps).reshape(groups, batch, *inner, mg, *kernel)
    part = part.transpose(1, 0, n + 2, *range(2, n + 2), *range(n + 3, 2 * n + 3))
    part = part.reshape(batch, groups * mg, *inner, *kernel)
    extra = (0,) * n if output_padding is None else tuple(output_padding)
    # every tap's landing place, before the pads are cropped; output_padding extends the end
    full = [
        s * (i - 1) + (k - 1) * d + 1 + e for s, i, k, d, e in zip(strides, inner, kernel, dilations, extra)
    ]
    y = np.zeros((batch, groups * mg, *full))
    span = builtins.slice
    for tap in np.ndindex(*kernel):
        target = tuple(
            span(j * d, j * d + s * (i - 1) + 1, s) for j, d, s, i in zip(tap, dilations, strides, inner)
        )
        y[(Ellipsis, *target)] += part[(Ellipsis, *tap)]
    crop = tuple(span(pads[a], pads[a] + o) for a, o in enumerate(out_shape[2:]))
    return np.ascontiguousarray(y[(Ellipsis, *crop)])


# ------------------------------------------------------------------------------------- pooling


def _pool_layout(x_shape, out_shape, kernel, strides, pads, dilations):
    """Begin pads and end pads that also cover ceil_mode's overhang past the explicit end pad."""
    n = len(kernel)
    begin = list(pads[:n])
    end = [
        max(pads[n + i], (o - 1) * s + (k - 1) * d + 1 - size - b)
        for i, (o, s, k, d, size, b) in enumerate(
            zip(out_shape[2:], strides, kernel, dilations, x_shape[2:], begin)
        )
    ]
    return begin, end


def _pool_operands(x, out_shape, kernel_shape, strides, pads, dilations):
    """x in float64, its spatial rank n, the filled-in strides, dilations and pads, and
    the padding (begin, end) each spatial axis needs for the windows of ``out_shape``."""
    x = f64(x)
    n = x.ndim - 2
    strides, dilations, pads = _spatial_attrs(n, strides, dilations, pads)
    begin, end = _pool_layout(x.shape, out_shape, kernel_shape, strides, pads, dilations)
    return x, n, strides, dilations, pads, begin, end


def max_pool(
    x, *, kernel_shape, strides: Ints = None, pads: Ints = None, dilations: Ints = None, ceil_mode: int = 0
):
    """Max over each window; padding never wins (it is -inf, and every window holds an input element)."""
    out_shape = shape_conv_pool.max_pool(
        np.shape(x),
        kernel_shape=kernel_shape,
        strides=strides,
        pads=pads,
        dilations=dilations,
        ceil_mode=ceil_mode,
    )
    x, n, strides, dilations, pads, begin, end = _pool_operands(
        x, out_shape, kernel_shape, strides, pads, dilations
    )
    view = _windows(_pad_spatial(x, begin, end, -np.inf), kernel_shape, strides, dilations, out_shape[2:])
    return view.max(axis=tuple(range(2 + n, 2 + 2 * n)))


def avg_pool(
    x,
    *,
    kernel_shape,
    strides: Ints = None,
    pads: Ints = None,
    dilations: Ints = None,
    ceil_mode: int = 0,
    count_include_pad: int = 0,
):
    """Mean over each window. The divisor counts the window's input elements, or with count_include_pad
    its elements inside the explicitly padded input (never ceil_mode's overhang past the end pad)."""
    out_shape = shape_conv_pool.avg_pool(
        np.shape(x),
        kernel_shape=kernel_shape,
        strides=strides,
        pads=pads,
        dilations=dilations,
        ceil_mode=ceil_mode,
        count_include_pad=count_include_pad,
    )
    x, n, strides, dilations, pads, begin, end = _pool_operands(
        x, out_shape, kernel_shape, strides, pads, dilations
    )
    axes = tuple(range(2 + n, 2 + 2 * n))
    out = out_shape[2:]
    total = _windows(_pad_spatial(x, begin, end, 0.0), kernel_shape, strides, dilations, out).sum(axis=axes)
    if count_include_pad:  # ones over input and explicit pads, zeros over the overhang
        mask = _pad_spatial(np.ones((1, 1, *x.shape[2:])), pads[:n], pads[n:], 1.0)
        mask = _pad_spatial(mask, [0] * n, [e - p for e, p in zip(end, pads[n:])], 0.0)
    else:
        mask = _pad_spatial(np.ones((1, 1, *x.shape[2:])), begin, end, 0.0)
    count = _windows(mask, kernel_shape, strides, dilations, out).sum(axis=axes)
    return total / count


def global_avg_pool(x) -> np.ndarray:
    """Mean over every spatial axis, kept as size 1."""
    shape_conv_pool.global_pool(np.shape(x))
    x = f64(x)
    return x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)


def global_max_pool(x) -> np.ndarray:
    """Max over every spatial axis, kept as size 1."""
    shape_conv_pool.global_pool(np.shape(x))
    x = f64(x)
    return x.max(axis=tuple(range(2, x.ndim)), keepdims=True)
