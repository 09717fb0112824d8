"""numpy reference kernels: the ground truth for an op catalog of real networks.

Each kernel takes its input arrays positionally and its attributes as keyword arguments, with
ONNX-like semantics (layout N, C, spatial...; ``pads`` = begin of every axis, then end), and returns
the output array (split: a tuple of arrays). Attributes are validated by the matching function of
byoc.shape_functions, so an invalid combination raises ValueError naming the attribute.

Dtypes: arithmetic kernels compute in float64 and return float64, whatever the input dtype; the
caller casts to the graph's dtype. Data-movement kernels (pad, gather, slice, split, concatenate,
reshape, flatten, transpose, squeeze, unsqueeze, expand, where) return the input dtype unchanged.

Speed: convolutions are im2col (a strided window view copied once) and one batched matmul over the
groups; pooling reduces a window view; erf and gelu call math.erf / math.erfc per element
(about 7M elements/s on the 2-core machine).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from . import shape_functions as sf
from .ir import is_float, is_integer

Ints = Sequence[int] | None

SELU_ALPHA = 1.67326319217681884765625  # ONNX's defaults
SELU_GAMMA = 1.05070102214813232421875


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


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
    out_shape = sf.conv(
        np.shape(x), np.shape(w), strides=strides, pads=pads, dilations=dilations, groups=groups
    )
    x, w = _f64(x), _f64(w)
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
    out_shape = sf.conv_transpose(
        np.shape(x),
        np.shape(w),
        strides=strides,
        pads=pads,
        output_padding=output_padding,
        dilations=dilations,
        groups=groups,
    )
    x, w = _f64(x), _f64(w)
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
    x = _f64(x)
    n = x.ndim - 2
    strides, dilations, pads = _spatial_attrs(n, strides, dilations, pads)
    begin, end = _pool_layout(x.shape, out_shape, kernel_shape, strides, pads, dilations)
    return x, n, strides, dilations, pads, begin, end


def max_pool(
    x, *, kernel_shape, strides: Ints = None, pads: Ints = None, dilations: Ints = None, ceil_mode: int = 0
):
    """Max over each window; padding never wins (it is -inf, and every window holds an input element)."""
    out_shape = sf.max_pool(
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
    out_shape = sf.avg_pool(
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
    sf.global_pool(np.shape(x))
    x = _f64(x)
    return x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)


def global_max_pool(x) -> np.ndarray:
    """Max over every spatial axis, kept as size 1."""
    sf.global_pool(np.shape(x))
    x = _f64(x)
    return x.max(axis=tuple(range(2, x.ndim)), keepdims=True)


# ----------------------------------------------------------------------------- normalisation


def _per_channel(p: np.ndarray, ndim: int) -> np.ndarray:
    return _f64(p).reshape((1, -1) + (1,) * (ndim - 2))


def lrn(x, *, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0) -> np.ndarray:
    """ONNX LRN: x / (bias + alpha/size * sum of x^2 over channels c-floor((size-1)/2)..c+ceil((size-1)/2))^beta."""
    sf.lrn(np.shape(x), size=size, alpha=alpha, beta=beta, bias=bias)
    x = _f64(x)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    widths = [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2)
    squares = np.pad(x * x, widths)
    total = sliding_window_view(squares, size, axis=1).sum(axis=-1)
    return x / (bias + alpha / size * total) ** beta


def batch_norm(x, scale, bias, mean, var, *, epsilon: float = 1e-5) -> np.ndarray:
    """Inference batch normalisation over channel axis 1: scale * (x - mean) / sqrt(var + epsilon) + bias."""
    sf.batch_norm(*map(np.shape, (x, scale, bias, mean, var)), epsilon=epsilon)
    x = _f64(x)
    scale, bias, mean, var = (_per_channel(p, x.ndim) for p in (scale, bias, mean, var))
    return (x - mean) * (scale / np.sqrt(var + epsilon)) + bias


def bias_add(x, bias, *, axis: int = 1) -> np.ndarray:
    """x + bias along ``axis`` (Relay's bias_add), in float64."""
    sf.bias_add(np.shape(x), np.shape(bias), axis=axis)
    x = _f64(x)
    a = sf.normalize_axis(axis, x.ndim, "bias_add")
    return x + _f64(bias).reshape((-1,) + (1,) * (x.ndim - 1 - a))


def softmax(x, *, axis: int = -1) -> np.ndarray:
    """exp(x - max) / sum(exp(x - max)) along ``axis``."""
    sf.softmax(np.shape(x), axis=axis)
    e = np.exp(_shifted(x, axis))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, *, axis: int = -1) -> np.ndarray:
    """(x - max) - log(sum(exp(x - max))) along ``axis``."""
    sf.softmax(np.shape(x), axis=axis)
    z = _shifted(x, axis)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _shifted(x, axis: int) -> np.ndarray:
    x = _f64(x)
    return x - x.max(axis=axis, keepdims=True)


# -------------------------------------------------------------------------------- linear algebra


def dense(x, w) -> np.ndarray:
    """x @ w.T, w (units, in) as Relay's dense."""
    sf.dense(np.shape(x), np.shape(w))
    return np.matmul(_f64(x), _f64(w).T)


def matmul(a, b) -> np.ndarray:
    """numpy.matmul in float64."""
    sf.matmul(np.shape(a), np.shape(b))
    return np.matmul(_f64(a), _f64(b))


# ------------------------------------------------------------------------------------ reductions


def _reduce(fn, x, axes, keepdims, **empty) -> np.ndarray:
    """``fn`` over ``axes`` in float64; ``empty`` (``initial=``) gives the value of an
    empty reduction where it has no identity (max and min)."""
    sf.reduce(np.shape(x), axes=axes, keepdims=keepdims)
    x = _f64(x)
    every = axes is None or len(axes) == 0
    norm = tuple(range(x.ndim)) if every else sf.normalize_axes(axes, x.ndim, "reduce")
    return fn(x, axis=norm, keepdims=bool(keepdims), **(empty if x.size == 0 else {}))


def reduce_sum(x, *, axes: Ints = None, keepdims: int = 1) -> np.ndarray:
    return _reduce(np.sum, x, axes, keepdims)


def reduce_mean(x, *, axes: Ints = None, keepdims: int = 1) -> np.ndarray:
    return _reduce(np.mean, x, axes, keepdims)


def reduce_max(x, *, axes: Ints = None, keepdims: int = 1) -> np.ndarray:
    """The maximum; of no elements -inf (ONNX's ReduceMax of an empty set)."""
    return _reduce(np.max, x, axes, keepdims, initial=-np.inf)


def reduce_min(x, *, axes: Ints = None, keepdims: int = 1) -> np.ndarray:
    """The minimum; of no elements +inf (ONNX's ReduceMin of an empty set)."""
    return _reduce(np.min, x, axes, keepdims, initial=np.inf)


def reduce_prod(x, *, axes: Ints = None, keepdims: int = 1) -> np.ndarray:
    return _reduce(np.prod, x, axes, keepdims)


# -------------------------------------------------------------------------------- shape ops


def reshape(x, newshape, *, allowzero: int = 0) -> np.ndarray:
    """ONNX Reshape (see shape_functions.reshape)."""
    return np.reshape(x, sf.reshape(np.shape(x), newshape, allowzero=allowzero))


def flatten(x, *, axis: int = 1) -> np.ndarray:
    return np.reshape(x, sf.flatten(np.shape(x), axis=axis))


def transpose(x, *, perm: Ints = None) -> np.ndarray:
    sf.transpose(np.shape(x), perm=perm)
    return np.transpose(x, perm)


def squeeze(x, *, axes: Ints = None) -> np.ndarray:
    return np.reshape(x, sf.squeeze(np.shape(x), axes=axes))


def unsqueeze(x, *, axes: Sequence[int]) -> np.ndarray:
    return np.reshape(x, sf.unsqueeze(np.shape(x), axes=axes))


def expand(x, newshape) -> np.ndarray:
    """ONNX Expand: broadcast x and ``newshape`` both ways (a copy, not a view)."""
    return np.array(np.broadcast_to(x, sf.expand(np.shape(x), newshape)))


def pad(x, *, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> np.ndarray:
    """ONNX Pad over all axes; modes constant (``value``), reflect (mirror without the edge), edge."""
    sf.pad(np.shape(x), pads=pads, mode=mode, value=value)
    x = np.asarray(x)
    widths = list(zip(pads[: x.ndim], pads[x.ndim :]))
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=value)
    return np.pad(x, widths, mode=mode)


def gather(x, indices, *, axis: int = 0) -> np.ndarray:
    """ONNX Gather: indices in [-size, size) along ``axis``; negatives count from the end."""
    sf.gather(np.shape(x), np.shape(indices), axis=axis)
    x, idx = np.asarray(x), np.asarray(indices)
    if not np.issubdtype(idx.dtype, np.integer) and idx.size:
        raise ValueError(f"gather: indices have dtype {idx.dtype}, expected an integer type")
    size = x.shape[sf.normalize_axis(axis, x.ndim, "gather")]
    bad = (idx < -size) | (idx >= size)
    if np.any(bad):
        raise ValueError(f"gather: index {idx[bad].flat[0]} is out of range for axis size {size}")
    return np.take(x, np.where(idx < 0, idx + size, idx).astype(np.intp), axis=axis)


def slice(x, *, starts, ends, axes: Ints = None, steps: Ints = None) -> np.ndarray:  # ONNX's name
    """ONNX Slice, with its clamping (see shape_functions.slice_range)."""
    out = np.asarray(x)
    for a, r in sf.slice_ranges(out.shape, starts=starts, ends=ends, axes=axes, steps=steps):
        out = np.take(out, np.arange(r.start, r.stop, r.step, dtype=np.intp), axis=a)
    return out


def split(x, *, axis: int = 0, sizes: Ints = None, num_outputs: int | None = None) -> tuple[np.ndarray, ...]:
    """Parts along ``axis`` (see shape_functions.split_sizes); each part is a copy."""
    parts = sf.split_sizes(np.shape(x), axis=axis, sizes=sizes, num_outputs=num_outputs)
    cuts = np.cumsum(parts)[:-1]
    return tuple(np.array(p) for p in np.split(np.asarray(x), cuts, axis=axis))


def where(condition, x, y) -> np.ndarray:
    """x where the bool ``condition`` is true, else y; numpy broadcasting of all three."""
    return np.where(np.asarray(condition, dtype=bool), x, y)


def copy(x) -> np.ndarray:
    """A copy of ``x``, of its dtype (bool included, which numpy's ``positive`` refuses)."""
    return np.array(x, copy=True)


def concatenate(*xs, axis: int = 0) -> np.ndarray:
    sf.concatenate(*map(np.shape, xs), axis=axis)
    return np.concatenate(xs, axis=axis)


# -------------------------------------------------------------------------------------- math

_ERF = np.frompyfunc(math.erf, 1, 1)
_ERFC = np.frompyfunc(math.erfc, 1, 1)


def erf(x) -> np.ndarray:
    """math.erf per element (within an ulp or so; numpy has no erf and scipy is not a dependency)."""
    return np.asarray(_ERF(_f64(x)), dtype=np.float64)  # a 0-d input gives a Python float


def gelu(x) -> np.ndarray:
    """x * Phi(x) = x/2 * erfc(-x/sqrt(2)); erfc keeps the tail for x << 0 where 1 + erf(x) cancels."""
    x = _f64(x)
    return 0.5 * x * np.asarray(_ERFC(-x / math.sqrt(2.0)), dtype=np.float64)


def relu(x) -> np.ndarray:
    return np.maximum(_f64(x), 0.0)


def sigmoid(x) -> np.ndarray:
    """1 / (1 + exp(-x)), evaluated without overflow for either sign."""
    x = _f64(x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def tanh(x) -> np.ndarray:
    return np.tanh(_f64(x))


def softplus(x) -> np.ndarray:
    """log(1 + exp(x)) without overflow."""
    return np.logaddexp(0.0, _f64(x))


def softsign(x) -> np.ndarray:
    x = _f64(x)
    return x / (1.0 + np.abs(x))


def elu(x, *, alpha: float = 1.0) -> np.ndarray:
    x = _f64(x)
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def selu(x, *, alpha: float = SELU_ALPHA, gamma: float = SELU_GAMMA) -> np.ndarray:
    x = _f64(x)
    return gamma * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def hard_sigmoid(x, *, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    return np.clip(alpha * _f64(x) + beta, 0.0, 1.0)


def leaky_relu(x, *, alpha: float = 0.01) -> np.ndarray:
    x = _f64(x)
    return np.where(x >= 0, x, alpha * x)


def prelu(x, slope) -> np.ndarray:
    """x where x >= 0, else slope * x; slope broadcasts to x (ONNX). For Relay's per-channel alpha of
    shape (C,) on NCHW, pass slope reshaped to (C, 1, 1)."""
    sf.prelu(np.shape(x), np.shape(slope))
    x = _f64(x)
    return np.where(x >= 0, x, _f64(slope) * x)


def clip(x, *, min: float | None = None, max: float | None = None) -> np.ndarray:  # ONNX's names
    """ONNX Clip: min(max(x, min), max), so min > max gives max everywhere; NaN stays NaN."""
    x = _f64(x)
    if min is not None:
        x = np.where(x < min, min, x)
    if max is not None:
        x = np.where(x > max, max, x)
    return x


# ------------------------------------------------------------------- comparisons and types


def _wide(x) -> np.ndarray:
    """``x`` as an array, a float one in float64 (exact for every float dtype)."""
    x = np.asarray(x)
    return x.astype(np.float64) if is_float(str(x.dtype)) else x


def equal(a, b) -> np.ndarray:
    return np.equal(_wide(a), _wide(b))


def not_equal(a, b) -> np.ndarray:
    return np.not_equal(_wide(a), _wide(b))


def less(a, b) -> np.ndarray:
    return np.less(_wide(a), _wide(b))


def less_equal(a, b) -> np.ndarray:
    return np.less_equal(_wide(a), _wide(b))


def greater(a, b) -> np.ndarray:
    return np.greater(_wide(a), _wide(b))


def greater_equal(a, b) -> np.ndarray:
    return np.greater_equal(_wide(a), _wide(b))


def isnan(x) -> np.ndarray:
    return np.isnan(_wide(x))


def isinf(x, *, detect_positive: int = 1, detect_negative: int = 1) -> np.ndarray:
    w = _wide(x)
    return (np.isposinf(w) & bool(detect_positive)) | (np.isneginf(w) & bool(detect_negative))


def round_half_even(x) -> np.ndarray:
    """Round to the nearest integer, halves to even (numpy's rint, C's nearbyint)."""
    return np.rint(_wide(x))


def sign(x) -> np.ndarray:
    """-1, 0 or 1 (NaN stays NaN); an unsigned input gives 0 or 1."""
    x = np.asarray(x)
    if x.dtype == bool or (is_integer(str(x.dtype)) and np.iinfo(x.dtype).min == 0):
        return (x != 0).astype(x.dtype)
    return np.sign(_wide(x))


def mod(a, b, *, fmod: int = 0) -> np.ndarray:
    """ONNX Mod: with ``fmod``, C's fmod (the sign of the dividend, truncated division);
    without, the sign of the divisor (numpy's and Python's %, for floats too, as ONNX's
    reference and node tests). An integer divisor of 0 gives 0, as numpy does."""
    a, b = np.asarray(a), np.asarray(b)
    if is_float(str(a.dtype)):
        return np.fmod(_wide(a), _wide(b)) if fmod else np.mod(_wide(a), _wide(b))
    zero = b == 0
    safe = np.where(zero, np.ones((), b.dtype), b)
    r = np.fmod(a, safe) if fmod else np.mod(a, safe)
    return np.where(zero, np.zeros((), r.dtype), r)


def bit_shift(a, b, *, direction: str = "LEFT") -> np.ndarray:
    """ONNX BitShift. A shift count below 0 or of the type's width or more gives 0 (a
    right shift of a negative signed value: -1, its sign filling every bit); a right
    shift of a signed value is arithmetic; a left shift of one wraps (it shifts the
    bits of the unsigned type of its width)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    bits = a.dtype.itemsize * 8
    signed = np.iinfo(a.dtype).min < 0
    out_of_range = (b < 0) | (b >= bits) if signed else b >= bits
    count = np.where(out_of_range, np.zeros((), b.dtype), b)
    if direction == "RIGHT":
        shifted = np.right_shift(a, count.astype(a.dtype))
        fill = np.where(a < 0, np.array(-1).astype(a.dtype), np.zeros((), a.dtype)) if signed else 0
    else:
        unsigned = np.dtype(f"u{a.dtype.itemsize}")
        shifted = np.left_shift(a.view(unsigned), count.astype(unsigned)).view(a.dtype)
        fill = 0
    return np.where(out_of_range, fill, shifted).astype(a.dtype)


def cast(x, *, to: str) -> np.ndarray:
    """byoc's cast rule: to bool ``x != 0`` (NaN is true); bool to a number 0 or 1; float
    to integer: NaN is 0, else truncated toward zero and saturated to the target's range;
    integer to integer: wrapped modulo 2**bits; to a float type: rounded to nearest even
    (float64 to bfloat16 through float32, as ml_dtypes and ONNX Runtime do)."""
    x = np.asarray(x)
    src = str(x.dtype)
    if to == "bool":
        return _wide(x) != 0
    if src == "bool":
        return x.astype(np.uint8).astype(to)
    if is_float(to):
        if to == "bfloat16" and src == "float64":
            x = x.astype(np.float32)
        with np.errstate(over="ignore"):
            return x.astype(to)
    if is_float(src):
        info = np.iinfo(to)
        w = np.trunc(np.nan_to_num(_wide(x), nan=0.0, posinf=np.inf, neginf=-np.inf))
        above = w >= 2.0 ** (info.bits - (1 if info.min < 0 else 0))
        below = w < float(info.min)
        inside = np.where(above | below, 0.0, w).astype(to)
        return np.where(above, np.array(info.max, to), np.where(below, np.array(info.min, to), inside))
    return x.astype(to)


def bitcast(x, *, to: str) -> np.ndarray:
    """ONNX BitCast: each element's bits as the dtype ``to`` of the same width (the shape
    rule checks it), converting no value: numpy's ``view``, as C's memcpy."""
    return np.asarray(x).view(to)


def dequantize_linear(x, scale, zero_point) -> np.ndarray:
    """ONNX DequantizeLinear: ``(x - zero_point) * scale``, x and the zero point
    converted to float32 first and the product taken in float32, as ONNX's reference
    computes it (the caller rounds it to the scale's dtype); numpy broadcasting."""
    f32 = np.float32
    return (np.asarray(x).astype(f32) - np.asarray(zero_point).astype(f32)) * np.asarray(scale).astype(f32)


def quantize_linear(x, scale, zero_point) -> np.ndarray:
    """ONNX QuantizeLinear: ``x / scale`` in float32, rounded half to even, plus the
    zero point, saturated to the zero point's dtype (NaN gives the range's low end, as
    onnxruntime's does; ONNX leaves it undefined); numpy broadcasting."""
    zero_point = np.asarray(zero_point)
    info = np.iinfo(zero_point.dtype)
    with np.errstate(all="ignore"):
        q = np.rint(np.asarray(x, np.float32) / np.asarray(scale, np.float32)).astype(np.float64)
        q = q + zero_point.astype(np.float64)
    q = np.where(np.isnan(q), info.min, np.clip(q, info.min, info.max))
    return q.astype(zero_point.dtype)


# ------------------------------------------------------------------- indexing and ordering


def _along(axis: int, rank: int, index: np.ndarray) -> tuple:
    """Index arrays addressing, for each element of ``index`` (of rank ``rank``), the
    element at its own position but at ``index`` along ``axis`` (take_along_axis's)."""
    grid = list(np.indices(index.shape, sparse=True))
    grid[axis] = index
    return tuple(grid)


def _in_range(indices, size: int, op: str) -> np.ndarray:
    """``indices`` with negatives counted from the end of an axis of ``size``, as intp;
    ValueError when one is outside [-size, size)."""
    idx = np.asarray(indices)
    if idx.size and not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"{op}: indices have dtype {idx.dtype}, expected an integer type")
    idx = idx.astype(np.int64)
    bad = (idx < -size) | (idx >= size)
    if np.any(bad):
        raise ValueError(f"{op}: index {idx[bad].flat[0]} is out of range for axis size {size}")
    return np.where(idx < 0, idx + size, idx).astype(np.intp)


def _arg_reduce(pick, x, axis: int, keepdims: int, select_last_index: int) -> np.ndarray:
    sf.arg_reduce(np.shape(x), axis=axis, keepdims=keepdims, select_last_index=select_last_index)
    w = _wide(x)
    a = sf.normalize_axis(axis, w.ndim, "arg_reduce")
    if select_last_index:
        found = w.shape[a] - 1 - pick(np.flip(w, axis=a), axis=a)
    else:
        found = pick(w, axis=a)
    found = found.astype(np.int64)
    return np.expand_dims(found, a) if keepdims else found


def argmax(x, *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> np.ndarray:
    """ONNX ArgMax: the index (int64) of the first maximum along ``axis`` (the last with
    select_last_index); a NaN is the maximum, as numpy's argmax and ONNX's reference."""
    return _arg_reduce(np.argmax, x, axis, keepdims, select_last_index)


def argmin(x, *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> np.ndarray:
    """ONNX ArgMin: as argmax, of the minimum."""
    return _arg_reduce(np.argmin, x, axis, keepdims, select_last_index)


def gather_elements(x, indices, *, axis: int = 0) -> np.ndarray:
    """ONNX GatherElements: out[i] = x[i with indices[i] along axis]; negative indices
    count from the end."""
    sf.gather_elements(np.shape(x), np.shape(indices), axis=axis)
    x = np.asarray(x)
    a = sf.normalize_axis(axis, x.ndim, "gather_elements")
    return x[_along(a, x.ndim, _in_range(indices, x.shape[a], "gather_elements"))]


_SCATTER_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(out: np.ndarray, where: tuple, updates: np.ndarray, reduction: str, op: str) -> np.ndarray:
    """``updates`` written into ``out`` at the index arrays ``where``: in order (the last
    of repeated indices wins), or combined with ``reduction`` (every one counts)."""
    if reduction == "none":
        out[where] = updates
    elif reduction in _SCATTER_REDUCTIONS:
        _SCATTER_REDUCTIONS[reduction].at(out, where, updates)
    else:
        raise ValueError(f"{op}: reduction {reduction!r} is not none, add, mul, max or min")
    return out


def scatter_elements(x, indices, updates, *, axis: int = 0, reduction: str = "none") -> np.ndarray:
    """ONNX ScatterElements: x with updates[i] written at i with indices[i] along axis
    (or combined by ``reduction``); floats in float64, integers in their dtype."""
    sf.scatter_elements(np.shape(x), np.shape(indices), np.shape(updates), axis=axis, reduction=reduction)
    out = np.array(_wide(x), copy=True)
    a = sf.normalize_axis(axis, out.ndim, "scatter_elements")
    where = _along(a, out.ndim, _in_range(indices, out.shape[a], "scatter_elements"))
    return _scatter(out, where, _wide(updates).astype(out.dtype), reduction, "scatter_elements")


def _nd_index(indices, shape: Sequence[int], op: str) -> tuple:
    """The last axis of ``indices`` as one index array per addressed axis of ``shape``,
    negatives counted from the end."""
    idx = np.asarray(indices)
    return tuple(_in_range(idx[..., j], shape[j], op) for j in range(idx.shape[-1]))


def gather_nd(x, indices, *, batch_dims: int = 0) -> np.ndarray:
    """ONNX GatherND: each index tuple (the indices' last axis) picks an element or a
    slice of x, per batch of the batch_dims leading axes."""
    out_shape = sf.gather_nd(np.shape(x), np.shape(indices), batch_dims=batch_dims)
    x, idx = np.asarray(x), np.asarray(indices)
    b, k = batch_dims, idx.shape[-1]
    batch = math.prod(x.shape[:b])
    data = x.reshape(batch, *x.shape[b:])
    flat = idx.reshape(batch, -1, k)
    parts = [data[(j, *_nd_index(flat[j], data.shape[1:], "gather_nd"))] for j in range(batch)]
    return np.stack(parts).reshape(out_shape) if parts else np.zeros(out_shape, x.dtype)


def scatter_nd(x, indices, updates, *, reduction: str = "none") -> np.ndarray:
    """ONNX ScatterND: x with each update (an element or a slice) written at its index
    tuple, in order, or combined by ``reduction``."""
    sf.scatter_nd(np.shape(x), np.shape(indices), np.shape(updates), reduction=reduction)
    out = np.array(_wide(x), copy=True)
    idx = np.asarray(indices)
    where = _nd_index(idx.reshape(-1, idx.shape[-1]), out.shape, "scatter_nd")
    upd = _wide(updates).astype(out.dtype).reshape(-1, *out.shape[idx.shape[-1] :])
    if reduction == "none":  # one at a time: a repeated index takes the last update
        for j in range(upd.shape[0]):
            out[tuple(w[j] for w in where)] = upd[j]
        return out
    return _scatter(out, where, upd, reduction, "scatter_nd")


def _cumulative(fn, identity: int, x, axis: int, exclusive: int, reverse: int) -> np.ndarray:
    sf.cumulative(np.shape(x), axis=axis, exclusive=exclusive, reverse=reverse)
    w = _wide(x)
    a = sf.normalize_axis(axis, w.ndim, "cumulative")
    if reverse:
        w = np.flip(w, axis=a)
    out = fn(w, axis=a, dtype=w.dtype)
    if exclusive:  # each element leaves itself out: the running value shifted by one
        first = np.full_like(np.take(out, [0], axis=a), identity)
        out = np.concatenate([first, np.take(out, np.arange(out.shape[a] - 1), axis=a)], axis=a)
    return np.flip(out, axis=a) if reverse else out


def cumsum(x, *, axis: int = 0, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    """ONNX CumSum: running sums along axis (reverse: from the end; exclusive: each
    sum without its own element). Floats in float64, integers wrap in their dtype."""
    return _cumulative(np.cumsum, 0, x, axis, exclusive, reverse)


def cumprod(x, *, axis: int = 0, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    """ONNX CumProd: running products, as cumsum."""
    return _cumulative(np.cumprod, 1, x, axis, exclusive, reverse)


def top_k(
    x, *, k: int, axis: int = -1, largest: int = 1, sorted: int = 1, num_outputs: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """ONNX TopK: the k largest (or smallest) elements along axis, sorted, and their
    int64 indices; of equal elements the lower index comes first (ONNX's order). The
    output is sorted whatever ``sorted`` says (ONNX leaves the order open then)."""
    sf.top_k(np.shape(x), k=k, axis=axis, largest=largest, sorted=sorted, num_outputs=num_outputs)
    x = np.asarray(x)
    w = _wide(x)
    a = sf.normalize_axis(axis, w.ndim, "top_k")
    if largest:  # descending, ties by index: an ascending stable sort of the reversed axis, reversed
        order = w.shape[a] - 1 - np.flip(np.argsort(np.flip(w, axis=a), axis=a, kind="stable"), axis=a)
    else:
        order = np.argsort(w, axis=a, kind="stable")
    order = np.take(order, np.arange(k), axis=a)
    return np.take_along_axis(x, order, axis=a), order.astype(np.int64)


def one_hot(indices, values, *, depth: int, axis: int = -1) -> np.ndarray:
    """ONNX OneHot: values[1] where the axis ``axis`` (of depth entries, inserted into
    the indices' shape) is at the index, values[0] elsewhere. A float index is
    truncated; a negative one counts from the end; one outside [-depth, depth) gives
    an all-off row."""
    shape = sf.one_hot(np.shape(indices), np.shape(values), depth=depth, axis=axis)
    idx = np.asarray(indices)
    if not np.issubdtype(idx.dtype, np.integer):
        idx = np.trunc(_wide(idx))
    idx = np.where(idx < 0, idx + depth, idx)
    hot = idx[..., None] == np.arange(depth)
    hot = np.moveaxis(hot, -1, sf.normalize_axis(axis, idx.ndim + 1, "one_hot"))
    values = np.asarray(values)
    return np.where(hot, values[1], values[0]).reshape(shape)
