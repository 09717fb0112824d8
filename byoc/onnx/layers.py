"""The handlers of ONNX's network layers: convolutions (``auto_pad`` computed),
Gemm and MatMul, pools, normalisations, Softmax and the activations composed at import
(Gelu, the gated and thresholded ones)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..ir import dtype_name
from .tensors import checked_axis, one_value

if TYPE_CHECKING:
    from .handlers import Handler
    from .importer import Importer
    from .ops import OnnxOp


def auto_pads(imp: Importer, kernel, strides, dilations) -> list[int]:
    """``pads`` for the node's ``auto_pad`` (or its own ``pads`` when NOTSET)."""
    auto = imp.attr("auto_pad", "NOTSET")
    rank = len(kernel)
    if auto == "NOTSET":
        return list(imp.attr("pads", [0] * (2 * rank)))
    if auto == "VALID":
        return [0] * (2 * rank)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise imp.unsupported(f"auto_pad={auto}")
    spatial = imp.shape(imp.node.input[0])[2:]
    _check_positive(imp, "strides", strides, rank)
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        out = math.ceil(size / s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else large)
        ends.append(large if auto == "SAME_UPPER" else small)
    return begins + ends


def _check_positive(imp: Importer, name: str, values, rank: int) -> None:
    """An attribute of one positive int per spatial axis (``strides``), as ``auto_pad``
    SAME_* needs to compute its pads."""
    if len(values) != rank or any(int(v) < 1 for v in values):
        raise imp.invalid(
            f"{name} {list(values)} with auto_pad={imp.attr('auto_pad')}: it needs {rank} positive value(s)",
            hint=f"ONNX's {name} are positive, one per spatial axis",
        )


def _transpose_pads(imp: Importer, kernel, strides, dilations) -> tuple[list[int], list[int]]:
    """ConvTranspose's ``pads`` and ``output_padding``. An ``output_shape`` (or
    ``auto_pad`` SAME_*, whose output is input * stride) sets the pads to what that
    size leaves over: SAME_UPPER puts the smaller half first, anything else the
    larger; a size beyond the unpadded output is more output padding at the end."""
    rank = len(kernel)
    extra = list(imp.attr("output_padding", [0] * rank))
    auto = imp.attr("auto_pad", "NOTSET")
    wanted = imp.attr("output_shape")
    spatial = imp.shape(imp.node.input[0])[2:]
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        _check_positive(imp, "strides", strides, rank)
    if wanted is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [size * s for size, s in zip(spatial, strides)]
    if wanted is None:
        return auto_pads(imp, kernel, strides, dilations), extra
    wanted = list(wanted)[-rank:]  # spatial sizes, or the whole output shape
    begins, ends = [], []
    for k in range(rank):
        full = strides[k] * (spatial[k] - 1) + extra[k] + (kernel[k] - 1) * dilations[k] + 1
        total = full - wanted[k]
        if total < 0:
            extra[k] -= total
            total = 0
        small, large = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else large)
        ends.append(large if auto == "SAME_UPPER" else small)
    return begins + ends, extra


def conv_attrs(imp: Importer, node, transpose: bool = False, weights: int = 1) -> dict:
    """The attributes of the catalog's conv (conv_transpose) for the node's ONNX ones,
    checked; ``weights`` is the index of its weights input (QLinearConv's is 3)."""
    allowed = {"auto_pad", "pads", "strides", "dilations", "group", "kernel_shape"}
    imp.check_attrs(node, allowed | ({"output_padding", "output_shape"} if transpose else set()))
    weight_shape = imp.shape(node.input[weights])
    kernel = list(imp.attr("kernel_shape", weight_shape[2:]))
    if kernel != list(weight_shape[2:]):
        raise imp.invalid(
            f"its kernel_shape {kernel} disagrees with its weights {node.input[weights]!r} of shape "
            f"{list(weight_shape)}, whose kernel is {list(weight_shape[2:])}",
            hint="kernel_shape must be the weights' spatial dimensions (or be left out)",
        )
    rank = len(kernel)
    strides = list(imp.attr("strides", [1] * rank))
    dilations = list(imp.attr("dilations", [1] * rank))
    attrs = {"strides": strides, "pads": [], "dilations": dilations, "groups": int(imp.attr("group", 1))}
    if transpose:
        attrs["pads"], attrs["output_padding"] = _transpose_pads(imp, kernel, strides, dilations)
    else:
        attrs["pads"] = auto_pads(imp, kernel, strides, dilations)
    return attrs


def _conv(transpose: bool) -> Handler:
    def handle(imp: Importer, node, e: OnnxOp) -> None:
        attrs = conv_attrs(imp, node, transpose)
        x, w = imp.value(node.input[0]), imp.value(node.input[1])
        has_bias = len(node.input) > 2 and node.input[2]
        y = imp.emit(e.op, [x, w], attrs, None if has_bias else node.output[0])
        if has_bias:
            imp.emit(e.roles["bias"], [y, imp.value(node.input[2])], {"axis": 1}, node.output[0])

    return handle


def _gemm(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"alpha", "beta", "transA", "transB", "broadcast"})
    alpha, beta = float(imp.attr("alpha", 1.0)), float(imp.attr("beta", 1.0))
    a = imp.value(node.input[0])
    if imp.attr("transA", 0):
        a = imp.emit(e.roles["flip"], [a], {"perm": [1, 0]})
    b = imp.value(node.input[1])
    has_c = len(node.input) > 2 and node.input[2] and beta != 0.0
    last = None if (alpha != 1.0 or has_c) else node.output[0]
    y = imp.emit(e.roles["times_transposed" if imp.attr("transB", 0) else "times"], [a, b], out=last)
    if alpha != 1.0:
        y = imp.emit(
            e.roles["scale"], [y, imp.scalar(alpha, node.input[0])], out=None if has_c else node.output[0]
        )
    if has_c:
        c_name = node.input[2]
        if beta == 1.0:
            c = imp.value(c_name)
        elif c_name in imp.consts:
            c = imp.constant(
                imp.consts[c_name] * np.asarray(beta, imp.consts[c_name].dtype), c_name + "_beta"
            )
        else:
            c = imp.emit(e.roles["scale"], [imp.value(c_name), imp.scalar(beta, c_name)])
        # a bias of one value per output column (the common case) is a bias_add, the form
        # a backend's dense + bias pattern takes; any other C broadcasts as an add
        units = imp.shape(node.output[0])[-1] if imp.type_of(node.output[0])[0] else None
        if imp.type_of(c_name)[0] == (units,):
            imp.emit(e.roles["bias"], [y, c], {"axis": 1}, out=node.output[0])
        else:
            imp.emit(e.roles["plus"], [y, c], out=node.output[0])


def _matmul(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, set())
    imp.emit(e.op, [imp.value(node.input[0]), imp.value(node.input[1])], out=node.output[0])


def _clip(imp: Importer, node, e: OnnxOp) -> None:
    """Clip's bounds: ``attrs`` lists them in input order (input 1, then 2); before
    opset 11 they are attributes of those names, from it optional constant inputs."""
    imp.check_attrs(node, set(e.attrs))
    bounds = {}
    for k, (key, (name, default)) in enumerate(e.attrs.items(), start=1):
        given = imp.const_input(k, f"Clip {key}")
        bounds[name] = (
            one_value(imp, given, f"Clip {key}") if given is not None else float(imp.attr(key, default))
        )
    if not all(map(math.isfinite, bounds.values())):
        # An attribute is finite: clamp by constants instead, which hold inf and nan
        # (the roles low and high: elementwise maximum, then minimum).
        low, high = (imp.scalar(v, node.input[0]) for v in bounds.values())
        clamped = imp.emit(e.roles["low"], [imp.value(node.input[0]), low])
        imp.emit(e.roles["high"], [clamped, high], out=node.output[0])
        return
    imp.emit(e.op, [imp.value(node.input[0])], bounds, node.output[0])


def _batch_norm(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"epsilon", "momentum", "spatial", "is_test", "training_mode"})
    if imp.attr("training_mode", 0) or any(o in imp.used for o in node.output[1:]):
        raise imp.unsupported("BatchNormalization in training mode")
    if imp.attr("spatial", 1) != 1:
        raise imp.unsupported("BatchNormalization with spatial=0")
    inputs = [imp.value(i) for i in node.input[:5]]
    imp.emit(e.op, inputs, {"epsilon": float(imp.attr("epsilon", 1e-5))}, node.output[0])


def _lrn(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"size", "alpha", "beta", "bias"})
    attrs = {
        "size": int(imp.attr("size")),
        "alpha": float(imp.attr("alpha", 1e-4)),
        "beta": float(imp.attr("beta", 0.75)),
        "bias": float(imp.attr("bias", 1.0)),
    }
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _pool(average: bool) -> Handler:
    def handle(imp: Importer, node, e: OnnxOp) -> None:
        allowed = {"auto_pad", "kernel_shape", "strides", "pads", "ceil_mode", "storage_order", "dilations"}
        imp.check_attrs(node, allowed | ({"count_include_pad"} if average else set()))
        if any(o in imp.used for o in node.output[1:]):  # the MaxPool handler composes them
            raise imp.unsupported("MaxPool's indices here")
        kernel = list(imp.attr("kernel_shape"))
        rank = len(kernel)
        strides = list(imp.attr("strides", [1] * rank))
        dilations = list(imp.attr("dilations", [1] * rank))
        attrs = {
            "kernel_shape": kernel,
            "strides": strides,
            "pads": auto_pads(imp, kernel, strides, dilations),
            "dilations": dilations,
            "ceil_mode": bool(imp.attr("ceil_mode", 0)),
        }
        if average:
            attrs["count_include_pad"] = bool(imp.attr("count_include_pad", 0))
        imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])

    return handle


def _softmax(imp: Importer, node, e: OnnxOp) -> None:
    """Softmax and LogSoftmax: one axis from opset 13; before it, over the input
    flattened to 2-D at ``axis`` (default 1), which is a reshape around the op."""
    imp.check_attrs(node, {"axis"})
    x = imp.value(node.input[0])
    shape = imp.shape(node.input[0])
    if imp.opset >= 13:
        imp.emit(e.op, [x], {"axis": int(imp.attr("axis", -1))}, node.output[0])
        return
    axis = checked_axis(imp, int(imp.attr("axis", 1)), len(shape), "axis")
    if axis == len(shape) - 1:
        imp.emit(e.op, [x], {"axis": -1}, node.output[0])
        return
    flat = [math.prod(shape[:axis]), math.prod(shape[axis:])]
    y = imp.emit(e.op, [imp.emit(e.roles["flat"], [x], {"newshape": flat})], {"axis": 1})
    imp.emit(e.roles["flat"], [y], {"newshape": list(shape)}, node.output[0])


def _prelu(imp: Importer, node, e: OnnxOp) -> None:
    """PRelu; before opset 7 a slope of one dimension is per channel (axis 1), from
    it the slope broadcasts as numpy does."""
    imp.check_attrs(node, set())
    x_shape, slope_shape = imp.shape(node.input[0]), imp.shape(node.input[1])
    slope = imp.value(node.input[1])
    if imp.opset < 7 and len(slope_shape) == 1 and slope_shape[0] > 1 and len(x_shape) > 2:
        slope = imp.reshaped(node.input[1], [slope_shape[0]] + [1] * (len(x_shape) - 2), e.roles["reshape"])
    imp.emit(e.op, [imp.value(node.input[0]), slope], out=node.output[0])


def _instance_norm(imp: Importer, node, e: OnnxOp) -> None:
    """InstanceNormalization: each (batch, channel) plane normalised by its own mean
    and variance over the spatial axes, then scaled and shifted per channel."""
    imp.check_attrs(node, {"epsilon"})
    shape = imp.shape(node.input[0])
    over = {"axes": list(range(2, len(shape))), "keepdims": True}
    r = e.roles
    x = imp.value(node.input[0])
    centred = imp.emit(r["minus"], [x, imp.emit(e.op, [x], over)])
    variance = imp.emit(e.op, [imp.emit(r["times"], [centred, centred])], over)
    eps = imp.scalar(float(imp.attr("epsilon", 1e-5)), node.input[0])
    normed = imp.emit(
        r["times"], [centred, imp.emit(r["inverse_sqrt"], [imp.emit(r["plus"], [variance, eps])])]
    )
    per_channel = [shape[1]] + [1] * (len(shape) - 2)
    scale, bias = (imp.reshaped(node.input[k], per_channel, r["reshape"]) for k in (1, 2))
    imp.emit(r["plus"], [imp.emit(r["times"], [normed, scale]), bias], out=node.output[0])


def _shrink(imp: Importer, node, e: OnnxOp) -> None:
    """Shrink: 0 within [-lambd, lambd], else x moved towards 0 by bias. The part of x
    beyond the band, relu(x - lambd) - relu(-x - lambd), has the sign s (-1, 0 or 1)
    of the side x is on, and the result is (x - s * bias) * |s|."""
    imp.check_attrs(node, {"bias", "lambd"})
    r = e.roles
    x = imp.value(node.input[0])
    lambd = imp.scalar(float(imp.attr("lambd", 0.5)), node.input[0])
    above = imp.emit(e.op, [imp.emit(r["minus"], [x, lambd])])
    below = imp.emit(e.op, [imp.emit(r["minus"], [imp.emit(r["negate"], [x]), lambd])])
    side = imp.emit(r["signum"], [imp.emit(r["minus"], [above, below])])
    bias = imp.scalar(float(imp.attr("bias", 0.0)), node.input[0])
    moved = imp.emit(r["minus"], [x, imp.emit(r["times"], [side, bias])])
    imp.emit(r["times"], [moved, imp.emit(r["magnitude"], [side])], out=node.output[0])


def _normalized(imp: Importer, node, e: OnnxOp, centred: bool) -> None:
    """LayerNormalization (``centred``) and RMSNormalization over the axes from ``axis``
    on: (x - mean) / sqrt(variance + epsilon), or x / sqrt(mean(x^2) + epsilon), times
    Scale, plus B (LayerNormalization's optional third input); both broadcast to x's
    trailing axes. A float16 or bfloat16 x is computed in float32 when ``stash_type``
    is 1 (the default), as ONNX says, and the result cast back. LayerNormalization's
    optional Mean and InvStdDev outputs are the statistics, kept dims."""
    imp.check_attrs(node, {"axis", "epsilon", "stash_type"})
    r = e.roles
    shape = imp.shape(node.input[0])
    axis = int(imp.attr("axis", -1))
    if not -len(shape) <= axis < len(shape):
        raise imp.invalid(f"its axis {axis} is out of range for a rank-{len(shape)} input")
    over = {"axes": list(range(axis % len(shape), len(shape))), "keepdims": True}
    dtype = imp.dtype(node.input[0])
    stash = int(imp.attr("stash_type", 1)) == 1 and dtype_name(np.dtype(dtype)) in ("float16", "bfloat16")
    x = imp.value(node.input[0])
    if stash:
        x = imp.emit(r["cast"], [x], {"to": "float32"})
    eps = imp.constant(
        np.asarray(float(imp.attr("epsilon", 1e-5)), np.float32 if stash else dtype), imp.names.fresh("k")
    )
    if centred:
        mean = imp.emit(e.op, [x], over)
        x = imp.emit(r["minus"], [x, mean])
    inverse = imp.emit(
        r["inverse_sqrt"], [imp.emit(r["plus"], [imp.emit(e.op, [imp.emit(r["times"], [x, x])], over), eps])]
    )
    y = imp.emit(r["times"], [x, inverse])
    if stash:
        y = imp.emit(r["cast"], [y], {"to": dtype_name(np.dtype(dtype))})
    has_bias = centred and len(node.input) > 2 and node.input[2]
    y = imp.emit(r["times"], [y, imp.value(node.input[1])], out=None if has_bias else node.output[0])
    if has_bias:
        imp.emit(r["plus"], [y, imp.value(node.input[2])], out=node.output[0])
    for k, value in ((1, mean if centred else None), (2, inverse)):  # Mean, InvStdDev
        if k < len(node.output) and node.output[k] and node.output[k] in imp.used:
            if not centred or value is None:
                raise imp.unsupported(f"its output {k}")
            imp.alias(node.output[k], value)


def _gelu(imp: Importer, node, e: OnnxOp) -> None:
    """Gelu (opset 20): the exact form, the catalog's op; or the approximation ONNX names
    after the function it uses (approximate = tanh), the op of the role of that name."""
    imp.check_attrs(node, {"approximate"})
    approximate = imp.attr("approximate", "none")
    if approximate != "none" and approximate not in e.roles:
        forms = ", ".join(repr(f) for f in ("none", *e.roles))
        raise imp.invalid(f"its approximate {approximate!r} is not one of {forms}")
    op = e.op if approximate == "none" else e.roles[approximate]
    imp.emit(op, [imp.value(node.input[0])], out=node.output[0])


def _gated(imp: Importer, node, e: OnnxOp) -> None:
    """x times a gate of x: Swish x sigmoid(alpha x), HardSwish x hard_sigmoid(x) (its
    slope ``fixed`` at 1/6), Mish x tanh(softplus(x)). ``op`` is the gate's last op, with
    the ``fixed`` attributes and those of ``attrs`` (as for unary), but for one named
    ``scale``, which multiplies x first (Swish's alpha); ``roles.inner`` is an op
    before it (Mish's softplus)."""
    imp.check_attrs(node, set(e.attrs))
    r = e.roles
    x = imp.value(node.input[0])
    values = {**e.fixed, **{name: float(imp.attr(key, default)) for key, (name, default) in e.attrs.items()}}
    gate = x
    if "scale" in values:
        gate = imp.emit(r["times"], [imp.scalar(values.pop("scale"), node.input[0]), x])
    if "inner" in r:
        gate = imp.emit(r["inner"], [gate])
    imp.emit(r["times"], [x, imp.emit(e.op, [gate], values)], out=node.output[0])


def _celu(imp: Importer, node, e: OnnxOp) -> None:
    """Celu: max(0, x) + min(0, alpha (exp(x / alpha) - 1)), which is alpha elu(x / alpha)."""
    imp.check_attrs(node, {"alpha"})
    r = e.roles
    alpha = imp.scalar(float(imp.attr("alpha", 1.0)), node.input[0])
    scaled = imp.emit(r["over"], [imp.value(node.input[0]), alpha])
    imp.emit(r["times"], [alpha, imp.emit(e.op, [scaled], {"alpha": 1.0})], out=node.output[0])


def _thresholded(imp: Importer, node, e: OnnxOp) -> None:
    """ThresholdedRelu: x where x > alpha, else 0."""
    imp.check_attrs(node, {"alpha"})
    r = e.roles
    x = imp.value(node.input[0])
    above = imp.emit(r["above"], [x, imp.scalar(float(imp.attr("alpha", 1.0)), node.input[0])])
    imp.emit(e.op, [above, x, imp.scalar(0.0, node.input[0])], out=node.output[0])


LAYER_KINDS: dict[str, Handler] = {
    "normalized": lambda imp, node, e: _normalized(imp, node, e, centred=True),
    "rms_normalized": lambda imp, node, e: _normalized(imp, node, e, centred=False),
    "gaussian_error": _gelu,
    "gated": _gated,
    "celu": _celu,
    "thresholded": _thresholded,
    "conv": _conv(transpose=False),
    "conv_transpose": _conv(transpose=True),
    "gemm": _gemm,
    "matmul": _matmul,
    "bounded": _clip,
    "batch_norm": _batch_norm,
    "lrn": _lrn,
    "window_max": _pool(average=False),
    "window_mean": _pool(average=True),
    "softmax": _softmax,
    "channel_slope": _prelu,
    "instance_norm": _instance_norm,
    "shrink": _shrink,
}
"""The handlers of this module, by the ``kind`` that ops.yaml names."""
