"""Output shapes of convolutions and pooling (layout N, C, spatial...; conventions in
:mod:`byoc.shape_checks`)."""

from __future__ import annotations

from collections.abc import Sequence

from .shape_checks import (
    AttributeProblem,
    Flag,
    Shape,
    check_flag,
    check_int,
    check_pads,
    check_shape,
    check_spatial,
)

# ------------------------------------------------------------------------------------------ helpers


def _nchw(x_shape: Sequence[int], op: str) -> Shape:
    x = check_shape(x_shape, f"{op}: input shape")
    if len(x) < 3:
        raise ValueError(f"{op}: input shape {list(x)} must be (N, C, spatial...) with a spatial axis")
    if x[1] < 1 or min(x[2:]) < 1:
        raise ValueError(f"{op}: input shape {list(x)} has an empty channel or spatial axis")
    return x


def _groups(groups: int, op: str) -> int:
    g = check_int(groups, f"{op}: groups")
    if g < 1:
        raise AttributeProblem("groups", f"{op}: groups = {g} must be positive")
    return g


def _extent(kernel: int, dilation: int) -> int:
    return (kernel - 1) * dilation + 1


# ------------------------------------------------------------------------------- convolutions


def conv(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    *,
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    groups: int = 1,
) -> Shape:
    """x (N, C, D1..Dn), w (M, C/groups, k1..kn) -> (N, M, O1..On)."""
    op = "conv"
    x, w, n, s, d, p, g = _conv_operands(
        op, x_shape, w_shape, "(M, C/groups, k1..k{n})", strides, dilations, pads, groups
    )
    c, m = x[1], w[0]
    if c % g:
        raise AttributeProblem("groups", f"{op}: groups = {g} does not divide the {c} input channels")
    if m < 1 or m % g:
        raise AttributeProblem(
            "groups", f"{op}: groups = {g} does not divide the {m} output channels (weight shape[0])"
        )
    if w[1] != c // g:
        raise AttributeProblem(
            "groups", f"{op}: weight shape[1] = {w[1]}, expected C/groups = {c}/{g} = {c // g}"
        )
    out = []
    for i in range(n):
        k, size = w[2 + i], x[2 + i]
        if k < 1:
            raise ValueError(f"{op}: weight shape {list(w)} has an empty kernel axis")
        extent, padded = _extent(k, d[i]), size + p[i] + p[n + i]
        if extent > padded:
            raise AttributeProblem(
                "pads",
                f"{op}: on spatial axis {i} the kernel extent {extent} (kernel {k}, dilations[{i}] = {d[i]}) "
                f"exceeds the padded input {padded} (input {size}, pads {p[i]} + {p[n + i]})",
            )
        out.append((padded - extent) // s[i] + 1)
    return (x[0], m, *out)


def _conv_operands(op: str, x_shape, w_shape, layout: str, strides, dilations, pads, groups):
    """The checked operands of a convolution: x, w, the spatial rank n, strides,
    dilations, pads and groups. ``layout`` describes the weight, with ``{n}`` for n."""
    x = _nchw(x_shape, op)
    w = check_shape(w_shape, f"{op}: weight shape")
    n = len(x) - 2
    if len(w) != len(x):
        raise ValueError(
            f"{op}: weight shape {list(w)} has rank {len(w)}, expected {len(x)}: {layout.format(n=n)}"
        )
    per = f"the {n} spatial axes"
    s = check_spatial(strides, "strides", n, minimum=1, op=op, per=per)
    d = check_spatial(dilations, "dilations", n, minimum=1, op=op, per=per)
    return x, w, n, s, d, check_pads(pads, n, op, per), _groups(groups, op)


def conv_transpose(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    *,
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    output_padding: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    groups: int = 1,
) -> Shape:
    """x (N, C, D1..Dn), w (C, M/groups, k1..kn) -> (N, M, O1..On) with ONNX's
    Oi = strides*(Di-1) + output_padding + (ki-1)*dilations + 1 - pad_begin - pad_end."""
    op = "conv_transpose"
    x, w, n, s, d, p, g = _conv_operands(
        op, x_shape, w_shape, "(C, M/groups, k1..k{n})", strides, dilations, pads, groups
    )
    op_pad = check_spatial(output_padding, "output_padding", n, minimum=0, op=op, per=f"the {n} spatial axes")
    c = x[1]
    if c % g:
        raise AttributeProblem("groups", f"{op}: groups = {g} does not divide the {c} input channels")
    if w[0] != c:
        raise ValueError(f"{op}: weight shape[0] = {w[0]}, expected the {c} input channels")
    if w[1] < 1:
        raise ValueError(f"{op}: weight shape[1] = 0 gives no output channels")
    out = []
    for i in range(n):
        k = w[2 + i]
        if k < 1:
            raise ValueError(f"{op}: weight shape {list(w)} has an empty kernel axis")
        if op_pad[i] >= max(s[i], d[i]):
            raise AttributeProblem(
                "output_padding",
                f"{op}: output_padding[{i}] = {op_pad[i]} must be smaller than strides[{i}] = {s[i]} "
                f"or dilations[{i}] = {d[i]}",
            )
        size = s[i] * (x[2 + i] - 1) + op_pad[i] + _extent(k, d[i]) - p[i] - p[n + i]
        if size < 1:
            raise AttributeProblem(
                "pads", f"{op}: pads {p[i]} + {p[n + i]} leave no output on spatial axis {i} (size {size})"
            )
        out.append(size)
    return (x[0], w[1] * g, *out)


# ------------------------------------------------------------------------------------- pooling


def _pool(op, x_shape, kernel_shape, strides, pads, dilations, ceil_mode) -> Shape:
    x = _nchw(x_shape, op)
    n = len(x) - 2
    per = f"the {n} spatial axes"
    if kernel_shape is None:
        raise AttributeProblem("kernel_shape", f"{op}: kernel_shape is required")
    k = check_spatial(kernel_shape, "kernel_shape", n, minimum=1, op=op, per=per)
    s = check_spatial(strides, "strides", n, minimum=1, op=op, per=per)
    d = check_spatial(dilations, "dilations", n, minimum=1, op=op, per=per)
    p = check_pads(pads, n, op, per)
    ceil = check_flag(ceil_mode, "ceil_mode", op)
    out = []
    for i in range(n):
        size, begin = x[2 + i], p[i]
        extent, padded = _extent(k[i], d[i]), size + begin + p[n + i]
        if extent > padded:
            raise AttributeProblem(
                "kernel_shape",
                f"{op}: on spatial axis {i} the window extent {extent} (kernel_shape[{i}] = {k[i]}, "
                f"dilations[{i}] = {d[i]}) exceeds the padded input {padded} (input {size}, pads {begin} + {p[n + i]})",
            )
        count = (padded - extent + (s[i] - 1 if ceil else 0)) // s[i] + 1
        if ceil and (count - 1) * s[i] >= size + begin:
            count -= 1  # ONNX: the last window starts inside the input or the left padding
        for o in _padded_windows(count, s[i], begin, size, d[i], op, i):
            if _padding_only(o * s[i] - begin, size, k[i], d[i]):
                raise AttributeProblem(
                    "pads",
                    f"{op}: on spatial axis {i} window {o} covers padding only (pads {begin} + {p[n + i]}, "
                    f"kernel_shape[{i}] = {k[i]}, strides[{i}] = {s[i]}, dilations[{i}] = {d[i]})",
                )
        out.append(count)
    return (x[0], x[1], *out)


PADDED_WINDOWS = 1 << 20
"""The most windows starting in the padding that a pool's shape rule checks one by one."""


def _padding_only(start: int, size: int, k: int, d: int) -> bool:
    """Whether the window of ``k`` taps ``d`` apart from ``start`` misses the input
    elements ``[0, size)``: its first tap at or after 0 is past the last tap or the input."""
    if start >= 0:
        return start >= size
    first = -(start // d)  # ceil(-start / d): the taps before 0
    return first > k - 1 or start + first * d >= size


def _padded_windows(count: int, s: int, begin: int, size: int, d: int, op: str, axis: int) -> list[int]:
    """The windows of a spatial axis that may cover padding only, in order: those that
    start before the input (in the left padding), and the first that starts past it
    (every later one does too). With taps no further apart than the input is long
    (``d <= size``) a window reaching across the input has a tap in it, so of the left
    ones only the first can miss it; else each left one is checked, at most
    :data:`PADDED_WINDOWS` of them (pads in the millions are refused rather than checked
    for minutes)."""
    left = min(count, -(-begin // s))  # start = o * s - begin < 0
    right = [o for o in (max(left, -(-(size + begin) // s)),) if o < count]  # start >= size
    if d <= size:
        return [0] * (left > 0) + right
    if left > PADDED_WINDOWS:
        raise AttributeProblem(
            "pads",
            f"{op}: on spatial axis {axis} {left:,} windows start in the padding (pads {begin}, "
            f"dilations[{axis}] = {d}); byoc checks at most {PADDED_WINDOWS:,}",
        )
    return [*range(left), *right]


def max_pool(
    x_shape: Sequence[int],
    *,
    kernel_shape: Sequence[int],
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    ceil_mode: Flag = 0,
) -> Shape:
    """x (N, C, D1..Dn) -> (N, C, O1..On); ceil_mode drops a last window that would start in the end padding."""
    return _pool("max_pool", x_shape, kernel_shape, strides, pads, dilations, ceil_mode)


def avg_pool(
    x_shape: Sequence[int],
    *,
    kernel_shape: Sequence[int],
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    ceil_mode: Flag = 0,
    count_include_pad: Flag = 0,
) -> Shape:
    """As max_pool; count_include_pad (0 or 1) does not change the shape."""
    check_flag(count_include_pad, "count_include_pad", "avg_pool")
    return _pool("avg_pool", x_shape, kernel_shape, strides, pads, dilations, ceil_mode)


def global_pool(x_shape: Sequence[int]) -> Shape:
    """x (N, C, D1..Dn) -> (N, C, 1..1)."""
    x = _nchw(x_shape, "global_pool")
    return (x[0], x[1]) + (1,) * (len(x) - 2)
