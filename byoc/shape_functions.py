"""Output shapes of the reference kernels (byoc.reference_kernels), from input shapes and attributes.

Every function takes input shapes positionally and attributes as keyword arguments, with the same
names and defaults as its kernel, and returns the output shape as a tuple of ints (split: a tuple of
shapes). An invalid combination raises ValueError with a message naming the op and the attribute at
fault; when one attribute is at fault it is an :class:`AttributeProblem`, whose ``attr`` names it (so
the op catalog can point at that attribute in the text). Kernels call these functions first, so a
kernel rejects exactly what its shape function rejects.

Conventions (ONNX's unless said): layout N, C, spatial...; ``pads`` lists the begin value of every
axis it covers, then the end values; a negative axis counts from the end; ``None`` for strides,
dilations or pads means all ones / all zeros. Stricter than ONNX, to keep ground truth meaningful:
negative pads (cropping) are rejected, and so is a pooling window that would cover padding only.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

Shape = tuple[int, ...]

PAD_MODES = ("constant", "reflect", "edge")


class AttributeProblem(ValueError):
    """An invalid value of one attribute, ``attr`` (``strides``, not ``strides[1]``)."""

    def __init__(self, attr: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.attr = attr.split("[", 1)[0]
        self.hint = hint


# ------------------------------------------------------------------------------------------ helpers


def _int(value: object, what: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None


def _shape(shape: Sequence[int], what: str) -> Shape:
    dims = tuple(_int(d, what) for d in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"{what} {list(dims)} has a negative dimension")
    return dims


def _ints(
    values: Sequence[int] | None, name: str, count: int, *, default: int, minimum: int, op: str, per: str
) -> Shape:
    """``count`` integers >= ``minimum`` (``default`` each when None); ``per`` says what they index."""
    if values is None:
        return (default,) * count
    ints = tuple(_int(v, f"{op}: {name}") for v in values)
    if len(ints) != count:
        raise AttributeProblem(
            name, f"{op}: {name} has {len(ints)} values {list(ints)}, expected {count} ({per})"
        )
    for i, v in enumerate(ints):
        if v < minimum:
            rule = "positive" if minimum == 1 else "non-negative"
            raise AttributeProblem(name, f"{op}: {name}[{i}] = {v} must be {rule}")
    return ints


def _flag(value: object, name: str, op: str) -> int:
    flag = _int(value, f"{op}: {name}")
    if flag not in (0, 1):
        raise AttributeProblem(name, f"{op}: {name} = {flag} must be 0 or 1")
    return flag


def normalize_axis(axis: int, rank: int, op: str, name: str = "axis") -> int:
    """``axis`` in [-rank, rank) as a non-negative axis; ValueError otherwise."""
    a = _int(axis, f"{op}: {name}")
    if not -rank <= a < rank:
        raise AttributeProblem(
            name, f"{op}: {name} = {a} is out of range for rank {rank} (valid: {-rank}..{rank - 1})"
        )
    return a % rank


def normalize_axes(axes: Sequence[int], rank: int, op: str, name: str = "axes") -> Shape:
    """Every axis normalised; duplicates (after normalisation) are rejected."""
    out = tuple(normalize_axis(a, rank, op, f"{name}[{i}]") for i, a in enumerate(axes))
    if len(set(out)) != len(out):
        raise AttributeProblem(name, f"{op}: {name} {list(axes)} names an axis twice")
    return out


def _pads(pads: Sequence[int] | None, count: int, op: str, per: str) -> Shape:
    return _ints(pads, "pads", 2 * count, default=0, minimum=0, op=op, per=f"begin then end for {per}")


def _nchw(x_shape: Sequence[int], op: str) -> Shape:
    x = _shape(x_shape, f"{op}: input shape")
    if len(x) < 3:
        raise ValueError(f"{op}: input shape {list(x)} must be (N, C, spatial...) with a spatial axis")
    if x[1] < 1 or min(x[2:]) < 1:
        raise ValueError(f"{op}: input shape {list(x)} has an empty channel or spatial axis")
    return x


def _groups(groups: int, op: str) -> int:
    g = _int(groups, f"{op}: groups")
    if g < 1:
        raise AttributeProblem("groups", f"{op}: groups = {g} must be positive")
    return g


def _extent(kernel: int, dilation: int) -> int:
    return (kernel - 1) * dilation + 1


def broadcast(*shapes: Sequence[int]) -> Shape:
    """numpy broadcasting of ``shapes``."""
    dims = [_shape(s, "broadcast: shape") for s in shapes]
    rank = max((len(s) for s in dims), default=0)
    out = []
    for i in range(-rank, 0):
        sizes = {s[i] for s in dims if len(s) >= -i} - {1}
        if len(sizes) > 1:
            raise ValueError(
                f"broadcast: shapes {[list(s) for s in dims]} do not broadcast at axis {i} (sizes {sorted(sizes)})"
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


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
    w = _shape(w_shape, f"{op}: weight shape")
    n = len(x) - 2
    if len(w) != len(x):
        raise ValueError(
            f"{op}: weight shape {list(w)} has rank {len(w)}, expected {len(x)}: {layout.format(n=n)}"
        )
    per = f"the {n} spatial axes"
    s = _ints(strides, "strides", n, default=1, minimum=1, op=op, per=per)
    d = _ints(dilations, "dilations", n, default=1, minimum=1, op=op, per=per)
    return x, w, n, s, d, _pads(pads, n, op, per), _groups(groups, op)


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
    op_pad = _ints(
        output_padding, "output_padding", n, default=0, minimum=0, op=op, per=f"the {n} spatial axes"
    )
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
    k = _ints(kernel_shape, "kernel_shape", n, default=1, minimum=1, op=op, per=per)
    s = _ints(strides, "strides", n, default=1, minimum=1, op=op, per=per)
    d = _ints(dilations, "dilations", n, default=1, minimum=1, op=op, per=per)
    p = _pads(pads, n, op, per)
    ceil = _flag(ceil_mode, "ceil_mode", op)
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
        for o in range(count):
            start = o * s[i] - begin
            if start >= 0 and start < size:
                continue  # its first tap is an input element
            if not any(0 <= start + j * d[i] < size for j in range(k[i])):
                raise AttributeProblem(
                    "pads",
                    f"{op}: on spatial axis {i} window {o} covers padding only (pads {begin} + {p[n + i]}, "
                    f"kernel_shape[{i}] = {k[i]}, strides[{i}] = {s[i]}, dilations[{i}] = {d[i]})",
                )
        out.append(count)
    return (x[0], x[1], *out)


def max_pool(
    x_shape: Sequence[int],
    *,
    kernel_shape: Sequence[int],
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    ceil_mode: int = 0,
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
    ceil_mode: int = 0,
    count_include_pad: int = 0,
) -> Shape:
    """As max_pool; count_include_pad (0 or 1) does not change the shape."""
    _flag(count_include_pad, "count_include_pad", "avg_pool")
    return _pool("avg_pool", x_shape, kernel_shape, strides, pads, dilations, ceil_mode)


def global_pool(x_shape: Sequence[int]) -> Shape:
    """x (N, C, D1..Dn) -> (N, C, 1..1)."""
    x = _nchw(x_shape, "global_pool")
    return (x[0], x[1]) + (1,) * (len(x) - 2)


# ----------------------------------------------------------------------------- normalisation


def _channel_params(x_shape: Sequence[int], *param_shapes: Sequence[int], op: str) -> Shape:
    """x (N, C, ...) with every parameter of shape (C,) -> x's shape."""
    x = _shape(x_shape, f"{op}: input shape")
    if len(x) < 2:
        raise ValueError(f"{op}: input shape {list(x)} must be (N, C, ...)")
    for i, p in enumerate(param_shapes):
        if tuple(p) != (x[1],):
            raise ValueError(
                f"{op}: parameter {i + 1} has shape {list(p)}, expected [{x[1]}] (one value per channel)"
            )
    return x


def lrn(
    x_shape: Sequence[int], *, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0
) -> Shape:
    x = _channel_params(x_shape, op="lrn")
    if _int(size, "lrn: size") < 1:
        raise AttributeProblem("size", f"lrn: size = {size} must be positive")
    return x


def batch_norm(x_shape, scale_shape, bias_shape, mean_shape, var_shape, *, epsilon: float = 1e-5) -> Shape:
    if not epsilon >= 0:
        raise AttributeProblem("epsilon", f"batch_norm: epsilon = {epsilon} must be non-negative")
    return _channel_params(x_shape, scale_shape, bias_shape, mean_shape, var_shape, op="batch_norm")


def softmax(x_shape: Sequence[int], *, axis: int = -1) -> Shape:
    x = _shape(x_shape, "softmax: input shape")
    normalize_axis(axis, len(x), "softmax")
    return x


def prelu(x_shape: Sequence[int], slope_shape: Sequence[int]) -> Shape:
    """slope broadcasts to x (ONNX's unidirectional broadcasting)."""
    x = _shape(x_shape, "prelu: input shape")
    try:
        fits = broadcast(x, slope_shape) == x
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"prelu: slope shape {list(slope_shape)} does not broadcast to the input shape {list(x)}"
        )
    return x


def bias_add(x_shape: Sequence[int], bias_shape: Sequence[int], *, axis: int = 1) -> Shape:
    """Relay's bias_add: a bias of shape (x[axis],) added along ``axis`` of x -> x's shape."""
    x = _shape(x_shape, "bias_add: input shape")
    a = normalize_axis(axis, len(x), "bias_add")
    if tuple(bias_shape) != (x[a],):
        raise ValueError(
            f"bias_add: bias shape {list(bias_shape)}, expected [{x[a]}] (axis {a} of the input {list(x)})"
        )
    return x


# -------------------------------------------------------------------------------- linear algebra


def dense(x_shape: Sequence[int], w_shape: Sequence[int]) -> Shape:
    """x (..., in), w (units, in) -> (..., units)."""
    x = _shape(x_shape, "dense: input shape")
    w = _shape(w_shape, "dense: weight shape")
    if len(x) < 1 or len(w) != 2:
        raise ValueError(f"dense: shapes {list(x)} and {list(w)} must be (..., in) and (units, in)")
    if x[-1] != w[1]:
        raise ValueError(
            f"dense: input's last dimension {x[-1]} does not match weight shape[1] = {w[1]} (units, in)"
        )
    return (*x[:-1], w[0])


def matmul(a_shape: Sequence[int], b_shape: Sequence[int]) -> Shape:
    """numpy.matmul: 1-D operands are promoted and the added axis removed; batch axes broadcast."""
    a = _shape(a_shape, "matmul: first shape")
    b = _shape(b_shape, "matmul: second shape")
    if not a or not b:
        raise ValueError(f"matmul: shapes {list(a)} and {list(b)} must both have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(f"matmul: inner dimensions differ: {list(a)} @ {list(b)} ({a2[-1]} != {b2[-2]})")
    try:
        batch = broadcast(a2[:-2], b2[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dimensions of {list(a)} and {list(b)} do not broadcast") from None
    rows = (a[-2],) if len(a) > 1 else ()
    cols = (b[-1],) if len(b) > 1 else ()
    return (*batch, *rows, *cols)


# ------------------------------------------------------------------------------------ reductions


def reduce(x_shape: Sequence[int], *, axes: Sequence[int] | None = None, keepdims: int = 1) -> Shape:
    """axes None or empty: every axis. keepdims keeps reduced axes as 1."""
    x = _shape(x_shape, "reduce: input shape")
    keep = _flag(keepdims, "keepdims", "reduce")
    every = axes is None or len(axes) == 0
    gone = set(range(len(x))) if every else set(normalize_axes(axes, len(x), "reduce"))
    if keep:
        return tuple(1 if i in gone else d for i, d in enumerate(x))
    return tuple(d for i, d in enumerate(x) if i not in gone)


# -------------------------------------------------------------------------------- shape ops


def reshape(x_shape: Sequence[int], newshape: Sequence[int], *, allowzero: int = 0) -> Shape:
    """ONNX Reshape: -1 (at most one) is inferred; 0 copies the input's dimension unless allowzero."""
    x = _shape(x_shape, "reshape: input shape")
    keep_zero = _flag(allowzero, "allowzero", "reshape")
    target = [_int(v, "reshape: newshape") for v in newshape]
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
    x = _shape(x_shape, "flatten: input shape")
    a = _int(axis, "flatten: axis")
    if not -len(x) <= a <= len(x):
        raise AttributeProblem(
            "axis", f"flatten: axis = {a} is out of range for rank {len(x)} (valid: {-len(x)}..{len(x)})"
        )
    a = a + len(x) if a < 0 else a
    return (math.prod(x[:a]), math.prod(x[a:]))


def transpose(x_shape: Sequence[int], *, perm: Sequence[int] | None = None) -> Shape:
    """perm None reverses the axes."""
    x = _shape(x_shape, "transpose: input shape")
    if perm is None:
        return x[::-1]
    order = [_int(v, "transpose: perm") for v in perm]
    if sorted(order) != list(range(len(x))):
        raise AttributeProblem("perm", f"transpose: perm {order} is not a permutation of 0..{len(x) - 1}")
    return tuple(x[i] for i in order)


def squeeze(x_shape: Sequence[int], *, axes: Sequence[int] | None = None) -> Shape:
    """axes None: drop every axis of size 1; named axes must have size 1."""
    x = _shape(x_shape, "squeeze: input shape")
    if axes is None:
        return tuple(d for d in x if d != 1)
    gone = normalize_axes(axes, len(x), "squeeze")
    for a in gone:
        if x[a] != 1:
            raise AttributeProblem("axes", f"squeeze: axis {a} has size {x[a]}, not 1 (input {list(x)})")
    return tuple(d for i, d in enumerate(x) if i not in gone)


def unsqueeze(x_shape: Sequence[int], *, axes: Sequence[int]) -> Shape:
    """axes index the output (rank + len(axes))."""
    x = _shape(x_shape, "unsqueeze: input shape")
    rank = len(x) + len(axes)
    new = set(normalize_axes(axes, rank, "unsqueeze"))
    rest = iter(x)
    return tuple(1 if i in new else next(rest) for i in range(rank))


def expand(x_shape: Sequence[int], newshape: Sequence[int]) -> Shape:
    """ONNX Expand: x and ``newshape`` broadcast both ways."""
    target = _shape(newshape, "expand: newshape")
    try:
        return broadcast(x_shape, target)
    except ValueError:
        raise AttributeProblem(
            "newshape", f"expand: input shape {list(x_shape)} and newshape {list(target)} do not broadcast"
        ) from None


def pad(x_shape: Sequence[int], *, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> Shape:
    """pads: begin of every axis, then end. reflect needs pads < the axis size; edge a non-empty axis."""
    x = _shape(x_shape, "pad: input shape")
    p = _pads(pads, len(x), "pad", f"the {len(x)} axes")
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
        step = 1 if steps is None else _int(steps[i], f"{op}: steps")
        if step == 0:
            raise AttributeProblem("steps", f"{op}: steps[{i}] is 0")
        start, end = _int(starts[i], f"{op}: starts"), _int(ends[i], f"{op}: ends")
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
    out = list(_shape(x_shape, "slice: input shape"))
    for a, r in _slice_specs(out, starts, ends, axes, steps):
        out[a] = len(r)
    return tuple(out)


def slice_ranges(x_shape, *, starts, ends, axes=None, steps=None) -> list[tuple[int, range]]:
    """(axis, indices) for every sliced axis, validated as by ``slice``."""
    return _slice_specs(_shape(x_shape, "slice: input shape"), starts, ends, axes, steps)


def split_sizes(
    x_shape, *, axis: int = 0, sizes: Sequence[int] | None = None, num_outputs: int | None = None
) -> Shape:
    """The part sizes along ``axis``: ``sizes`` as given (they must add up to the axis), or ``num_outputs``
    parts of ceil(size / num_outputs), the last one smaller (ONNX 18); every part of those non-empty. Given
    both, ``sizes`` must have ``num_outputs`` values (a graph node passes its output count)."""
    op = "split"
    x = _shape(x_shape, f"{op}: input shape")
    a = normalize_axis(axis, len(x), op)
    if sizes is None and num_outputs is None:
        raise AttributeProblem("sizes", f"{op}: give sizes, num_outputs or both")
    if sizes is not None:
        parts = tuple(_int(v, f"{op}: sizes") for v in sizes)
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
    n = _int(num_outputs, f"{op}: num_outputs")
    if n < 1:
        raise AttributeProblem("num_outputs", f"{op}: num_outputs = {n} must be positive")
    chunk = -(-x[a] // n)
    parts = tuple(min(chunk, x[a] - i * chunk) for i in range(n))
    if min(parts) < 1:
        raise AttributeProblem(
            "num_outputs",
            f"{op}: {n} outputs cannot split size {x[a]} into non-empty parts of {chunk}",
            hint="bind fewer names, or give the part sizes with sizes=[...]",
        )
    return parts


def split(x_shape, *, axis: int = 0, sizes: Sequence[int] | None = None, num_outputs: int | None = None):
    """The shape of every part (see split_sizes)."""
    x = _shape(x_shape, "split: input shape")
    a = normalize_axis(axis, len(x), "split")
    return tuple(
        (*x[:a], s, *x[a + 1 :]) for s in split_sizes(x, axis=axis, sizes=sizes, num_outputs=num_outputs)
    )


def gather(x_shape: Sequence[int], indices_shape: Sequence[int], *, axis: int = 0) -> Shape:
    """x[:axis] + indices + x[axis+1:]."""
    x = _shape(x_shape, "gather: input shape")
    idx = _shape(indices_shape, "gather: indices shape")
    a = normalize_axis(axis, len(x), "gather")
    return (*x[:a], *idx, *x[a + 1 :])


def concatenate(*shapes: Sequence[int], axis: int = 0) -> Shape:
    """Same rank >= 1, same sizes except along ``axis``."""
    if not shapes:
        raise ValueError("concatenate: needs at least one input")
    dims = [_shape(s, "concatenate: input shape") for s in shapes]
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


# ------------------------------------------------------------------------- indexing and ordering


def arg_reduce(
    x_shape: Sequence[int], *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0
) -> Shape:
    """ONNX ArgMax/ArgMin: x without ``axis`` (or with it as 1 when keepdims); the axis
    must not be empty (an empty axis has no first maximum)."""
    op = "arg_reduce"
    x = _shape(x_shape, f"{op}: input shape")
    a = normalize_axis(axis, len(x), op)
    keep = _flag(keepdims, "keepdims", op)
    _flag(select_last_index, "select_last_index", op)
    if x[a] == 0:
        raise AttributeProblem("axis", f"{op}: axis {a} of the input {list(x)} is empty: no element to pick")
    return tuple(1 if i == a else d for i, d in enumerate(x)) if keep else x[:a] + x[a + 1 :]


def gather_elements(x_shape: Sequence[int], indices_shape: Sequence[int], *, axis: int = 0) -> Shape:
    """ONNX GatherElements: indices of x's rank; the output has the indices' shape."""
    op = "gather_elements"
    x = _shape(x_shape, f"{op}: input shape")
    idx = _shape(indices_shape, f"{op}: indices shape")
    if len(idx) != len(x) or not x:
        raise ValueError(f"{op}: indices {list(idx)} must have the input's rank {len(x)} (>= 1)")
    a = normalize_axis(axis, len(x), op)
    wider = [k for k in range(len(x)) if k != a and idx[k] > x[k]]
    if wider:  # an output element there would read past the input (ONNX Runtime refuses it too)
        k = wider[0]
        raise ValueError(
            f"{op}: indices {list(idx)} exceed the input {list(x)} along axis {k}, which is not the gathered axis"
        )
    return idx


def scatter_elements(
    x_shape: Sequence[int],
    indices_shape: Sequence[int],
    updates_shape: Sequence[int],
    *,
    axis: int = 0,
    reduction: str = "none",
) -> Shape:
    """ONNX ScatterElements: indices and updates of one shape, of x's rank -> x's shape."""
    op = "scatter_elements"
    x = _shape(x_shape, f"{op}: input shape")
    idx = _shape(indices_shape, f"{op}: indices shape")
    if tuple(updates_shape) != idx:
        raise ValueError(f"{op}: updates {list(updates_shape)} must have the indices' shape {list(idx)}")
    if len(idx) != len(x) or not x:
        raise ValueError(f"{op}: indices {list(idx)} must have the input's rank {len(x)} (>= 1)")
    normalize_axis(axis, len(x), op)
    return x


def gather_nd(x_shape: Sequence[int], indices_shape: Sequence[int], *, batch_dims: int = 0) -> Shape:
    """ONNX GatherND: indices (..., k) address x after its batch_dims leading axes ->
    indices[:-1] + x[batch_dims + k:]."""
    op = "gather_nd"
    x = _shape(x_shape, f"{op}: input shape")
    idx = _shape(indices_shape, f"{op}: indices shape")
    b = _int(batch_dims, f"{op}: batch_dims")
    if not 0 <= b < min(len(x), len(idx) or 1):
        raise AttributeProblem(
            "batch_dims", f"{op}: batch_dims = {b} must be below both ranks ({len(x)} and {len(idx)})"
        )
    if not idx or not 1 <= idx[-1] <= len(x) - b:
        raise ValueError(f"{op}: the indices' last axis ({list(idx)}) must be 1..{len(x) - b}")
    if idx[:b] != x[:b]:
        raise AttributeProblem(
            "batch_dims", f"{op}: the first {b} axes of x {list(x)} and of the indices {list(idx)} differ"
        )
    return (*idx[:-1], *x[b + idx[-1] :])


def scatter_nd(
    x_shape: Sequence[int],
    indices_shape: Sequence[int],
    updates_shape: Sequence[int],
    *,
    reduction: str = "none",
) -> Shape:
    """ONNX ScatterND: updates of shape indices[:-1] + x[k:] -> x's shape."""
    op = "scatter_nd"
    x = _shape(x_shape, f"{op}: input shape")
    idx = _shape(indices_shape, f"{op}: indices shape")
    if not idx or not 1 <= idx[-1] <= len(x):
        raise ValueError(f"{op}: the indices' last axis ({list(idx)}) must be 1..{len(x)}")
    want = (*idx[:-1], *x[idx[-1] :])
    if tuple(updates_shape) != want:
        raise ValueError(f"{op}: updates {list(updates_shape)} must have the shape {list(want)}")
    return x


def cumulative(x_shape: Sequence[int], *, axis: int = 0, exclusive: int = 0, reverse: int = 0) -> Shape:
    """ONNX CumSum and CumProd: x's shape; axis in range."""
    x = _shape(x_shape, "cumulative: input shape")
    if not x:
        raise ValueError("cumulative: the input is a scalar; it needs an axis")
    normalize_axis(axis, len(x), "cumulative")
    _flag(exclusive, "exclusive", "cumulative")
    _flag(reverse, "reverse", "cumulative")
    return x


def top_k(
    x_shape: Sequence[int],
    *,
    k: int,
    axis: int = -1,
    largest: int = 1,
    sorted: int = 1,  # ONNX's name
    num_outputs: int = 2,
) -> tuple[Shape, Shape]:
    """ONNX TopK: the values and their indices, both x with ``axis`` cut to k."""
    op = "top_k"
    x = _shape(x_shape, f"{op}: input shape")
    if not x:
        raise ValueError(f"{op}: the input is a scalar; it needs an axis")
    a = normalize_axis(axis, len(x), op)
    count = _int(k, f"{op}: k")
    if not 0 <= count <= x[a]:
        raise AttributeProblem("k", f"{op}: k = {count} must be in 0..{x[a]} (the size of axis {a})")
    _flag(largest, "largest", op)
    _flag(sorted, "sorted", op)
    if num_outputs != 2:
        raise ValueError(f"{op}: gives 2 outputs (values, indices), not {num_outputs}")
    out = (*x[:a], count, *x[a + 1 :])
    return out, out


def one_hot(
    indices_shape: Sequence[int], values_shape: Sequence[int], *, depth: int, axis: int = -1
) -> Shape:
    """ONNX OneHot: the indices' shape with an axis of ``depth`` inserted at ``axis``
    (of the output's rank); values holds [off, on]."""
    op = "one_hot"
    idx = _shape(indices_shape, f"{op}: indices shape")
    if math.prod(_shape(values_shape, f"{op}: values shape")) != 2 or len(values_shape) != 1:
        raise ValueError(f"{op}: values {list(values_shape)} must have shape [2] (off, on)")
    d = _int(depth, f"{op}: depth")
    if d < 1:
        raise AttributeProblem("depth", f"{op}: depth = {d} must be positive")
    a = normalize_axis(axis, len(idx) + 1, op)
    return (*idx[:a], d, *idx[a:])
