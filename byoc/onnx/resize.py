"""ONNX Resize and Upsample as gathers and weighted sums along each resized axis.

Resizing is separable: along each axis, every output position is a weighted sum of a
few input positions (one for nearest, two for linear, four for cubic, more with
antialias), whatever the coordinate transformation. Those taps and weights depend
only on the sizes, scales, region of interest and attributes, which byoc knows at
import, so they are computed then, by ONNX's own reference implementation: a probe
Resize of an identity matrix along one axis gives, for each output position, the
weight of every input position (its column), and a probe of zeros the value that
``tf_crop_and_resize`` writes outside the region (``extrapolation_value``). Each
resized axis then becomes, in the imported graph::

    gather(x, taps_0, axis=a) * weights_0 + gather(x, taps_1, axis=a) * weights_1 + ...

with constant ``taps_k`` (int64) and ``weights_k`` (shaped to broadcast along ``a``);
nearest needs no weights. An output position reads only its own taps, so an infinity
or NaN in the input reaches only the outputs it would reach in ONNX's reference.
"""

from __future__ import annotations

import numpy as np

ATTRS = {
    "antialias",
    "axes",
    "coordinate_transformation_mode",
    "cubic_coeff_a",
    "exclude_outside",
    "extrapolation_value",
    "keep_aspect_ratio_policy",
    "mode",
    "nearest_mode",
}
"""The attributes of Resize (opset 19): all passed on to the probes."""

PROBE_OPSET = 19
"""The probes' opset: the first where Resize has every attribute and mode above."""


def resize(imp, node, e) -> None:
    """Resize (opset 11 on: X, roi, scales, sizes) and Upsample (X, scales; nearest
    and linear, as Resize-10 too, with the Resize attributes of its row's ``fixed``:
    asymmetric coordinates, nearest rounding down); ``e.op`` is the gather,
    ``e.roles`` times and plus."""
    upsample = node.op_type == "Upsample" or imp.opset < 11
    imp.check_attrs(node, {"mode", "scales"} if upsample else ATTRS)
    shape = imp.shape(node.input[0])
    rank = len(shape)
    if upsample:
        scales = imp.attr("scales") if imp.opset < 9 else imp.const_input(1, "Upsample scales")
        roi, sizes = None, None
        # Upsample's (and Resize-10's) coordinates, as Resize attributes: the row's `fixed`
        attrs = {"mode": imp.attr("mode", "nearest"), **e.fixed}
    else:
        roi, scales, sizes = (_given(imp, k, what) for k, what in ((1, "roi"), (2, "scales"), (3, "sizes")))
        attrs = {a.name: imp.attr(a.name) for a in node.attribute}
    if attrs.get("mode", "nearest") not in ("nearest", "linear", "cubic"):
        raise imp.invalid(f"its mode {attrs['mode']!r} is not nearest, linear or cubic")
    axes = [int(a) for a in attrs.pop("axes", None) or range(rank)]
    if any(not -rank <= a < rank for a in axes) or len(set(a % rank for a in axes)) != len(axes):
        raise imp.invalid(f"its axes {axes} are out of range or repeat, for a rank-{rank} input")
    axes = [a % rank for a in axes]
    if (scales is None) == (sizes is None):
        raise imp.invalid("it gives both scales and sizes, or neither", hint="Resize takes exactly one")
    values = np.ravel(scales if sizes is None else sizes)
    if len(values) != len(axes):
        raise imp.invalid(
            f"its {'scales' if sizes is None else 'sizes'} hold {len(values)} values for {len(axes)} axes"
        )
    policy = attrs.pop("keep_aspect_ratio_policy", "stretch")
    if sizes is not None and policy != "stretch":  # one scale for all axes: the probes see them all
        attrs["keep_aspect_ratio_policy"] = policy
    dtype = imp.dtype(node.input[0])
    if attrs.get("mode", "nearest") != "nearest" and np.dtype(dtype).kind != "f":
        raise imp.unsupported(f"{attrs['mode']} resizing of {np.dtype(dtype)} (it rounds to the integers)")
    r = e.roles
    value = imp.value(node.input[0])
    for k, axis in enumerate(axes):
        if "keep_aspect_ratio_policy" in attrs:
            lengths, at, region, probe = (
                [shape[a] for a in axes],
                k,
                None,
                {"sizes": [int(v) for v in values]},
            )
        else:
            lengths, at = [shape[axis]], 0
            probe = {"scales": [float(values[k])]} if sizes is None else {"sizes": [int(values[k])]}
            region = None if roi is None else [float(np.ravel(roi)[k]), float(np.ravel(roi)[k + len(axes)])]
        weights, offset = _axis_weights(imp, lengths, at, probe, region, attrs)
        if np.array_equal(weights, np.eye(shape[axis])) and not offset.any():
            continue  # identity along this axis
        value = _along(imp, value, axis, rank, weights, offset, dtype, e.op, r)
    imp.alias(node.output[0], value)


def _given(imp, k: int, what: str):
    """Input ``k`` as a constant, None when absent or empty (an unused roi or scales)."""
    array = imp.const_input(k, f"Resize {what}")
    return None if array is None or np.size(array) == 0 else array


def _axis_weights(imp, lengths: list[int], k: int, probe: dict, region, attrs: dict):
    """``(weights, offset)`` of the axis ``k`` of a probe whose resized axes have
    ``lengths`` (only that axis, but under keep_aspect_ratio_policy, which scales all
    the axes by one factor): weights[j, i] is the weight of input position i in output
    position j, offset[j] what output j holds for an input of zeros
    (tf_crop_and_resize's extrapolation value outside the region). The probe's first
    axis holds the identity's rows; along the other resized axes it is constant."""
    from onnx.reference import ReferenceEvaluator

    helper, TensorProto = imp.onnx.helper, imp.onnx.TensorProto
    n, count = lengths[k], len(lengths)
    inputs = ["x", "roi" if region is not None else "", "scales" if "scales" in probe else ""]
    inits = []
    if region is not None:
        inits.append(helper.make_tensor("roi", TensorProto.FLOAT, [2], region))
    if "scales" in probe:
        inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [count], probe["scales"]))
    else:
        inputs.append("sizes")
        inits.append(helper.make_tensor("sizes", TensorProto.INT64, [count], probe["sizes"]))
    node = helper.make_node("Resize", inputs, ["y"], axes=list(range(1, count + 1)), **attrs)
    graph = helper.make_graph(
        [node],
        "probe",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["rows", *lengths])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", max(imp.opset, PROBE_OPSET))])
    spread = [1] * count
    spread[k] = n
    identity = np.broadcast_to(np.eye(n).reshape([n, *spread]), [n, *lengths])
    first = tuple(slice(None) if a == k else 0 for a in range(count))  # the line along axis k
    try:
        evaluator = ReferenceEvaluator(model)
        (columns,) = evaluator.run(None, {"x": np.ascontiguousarray(identity)})
        (zeros,) = evaluator.run(None, {"x": np.zeros([1, *lengths])})
    except Exception as exc:  # the reference's refusal of the attributes given
        raise imp.unsupported(f"these Resize settings ({type(exc).__name__}: {exc})") from None
    offset = np.asarray(zeros, np.float64)[(0, *first)]
    return (np.asarray(columns, np.float64)[(slice(None), *first)] - offset).T, offset


def _along(imp, value: str, axis: int, rank: int, weights: np.ndarray, offset, dtype, gather: str, r) -> str:
    """``value`` resized along ``axis`` by ``weights`` (out x in) plus ``offset``."""
    out = weights.shape[0]
    taps = int(np.count_nonzero(weights, axis=1).max(initial=1))
    index = np.zeros((taps, out), np.int64)
    share = np.zeros((taps, out), np.float64)
    for j, row in enumerate(weights):
        used = np.flatnonzero(row)
        index[: len(used), j], share[: len(used), j] = used, row[used]
    along = [1] * rank
    along[axis] = out
    nearest = taps == 1 and np.all((share == 1) | (share == 0))
    total = None
    for t in range(taps):
        picked = imp.emit(gather, [value, imp.constant(index[t], imp.names.fresh("taps"))], {"axis": axis})
        if not nearest:
            w = imp.constant(share[t].astype(dtype).reshape(along), imp.names.fresh("weights"))
            picked = imp.emit(r["times"], [picked, w])
        total = picked if total is None else imp.emit(r["plus"], [total, picked])
    if offset.any():
        total = imp.emit(
            r["plus"], [total, imp.constant(offset.astype(dtype).reshape(along), imp.names.fresh("outside"))]
        )
    return total
