"""ONNX's integer ops MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv onto
the catalog's integer products, with ONNX's arithmetic (its reference implementation's,
step by step).

The integer product is the catalog's ``matmul_integer`` or ``conv_integer``: the 8-bit
codes less their zero points, multiplied and summed exactly, wrapped to int32 as
ONNX's int32 sums wrap. Those take x's (a's) zero point as one value and w's (b's) as
one value or one per output channel (column); a backend computes them in integers
(``fused``: uint32 accumulators in vector lanes). Where a zero point has another shape
(one per row of a, which ONNX's QLinearMatMul allows), the product is composed
instead: each operand cast to float64 less its zero point (values in [-255, 255]),
then the catalog's float64 ``matmul``, every partial sum an exact integer below 2**53;
such a sum saturates where ONNX's int32 wraps, from about 33026 terms on (2**31 /
65025, in the worst case).

- ``MatMulInteger``, ``ConvInteger``: that product, in int32.
- ``QLinearMatMul``, ``QLinearConv``: the multiplier ``a_scale * b_scale / y_scale``
  (``x_scale * w_scale / y_scale``) in the scales' type (float32; from opset 21
  QLinearMatMul's may be float16 or bfloat16), cast to float64; the product in float64 (plus
  QLinearConv's int32 bias, exact in float64, which the reference adds inside its
  convolution) times it in float64, as numpy multiplies int32 by float32; plus y's
  zero point, rounded half to even, saturated to the range of the zero point's type
  and cast to it.

A zero point has its operand's type, and with its scale it is one value (per tensor),
or one per row of a and per column of b (a vector for a of shape [.., M, K] and b of
[.., K, N], or a tensor [.., M, 1] and [.., 1, N]), or one per output channel of w (a
vector of M); x's and y's are one value. ONNX's reference subtracts a vector zero
point of a along a's last axis, not its rows (it fails unless M equals K): byoc takes
it per row, as ONNX's documentation says. The float8 types of QLinearMatMul (opset
21), which byoc lacks, are refused by name.

ONNX Runtime's CPU kernels requantise in float32: the product times the multiplier is
rounded to float32 before it is rounded to an integer, so where the exact value lies
within half a float32 ulp of a half-integer they may round the other way (a 204 times
0.74754906 is 152.5000076 in float64 and 152.5 in float32: the reference gives 153,
ONNX Runtime 152). They also refuse vector zero points of MatMulInteger's a and
ConvInteger's w, which byoc computes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..ir import dtype_name
from .indexing import dtype_text
from .layers import conv_attrs
from .quantize import RANGES, saturated, spread

if TYPE_CHECKING:
    from .importer import Importer
    from .ops import OnnxOp


def _schema(imp: Importer, node):
    """ONNX's schema of the node's op at the model's opset."""
    return imp.onnx.defs.get_schema(node.op_type, imp.opset, "")


def _name(imp: Importer, node, k: int) -> str:
    """ONNX's name of the node's input ``k`` (``a_zero_point``), for messages."""
    return f"{_schema(imp, node).inputs[k].name} (input {k})"


def _check_types(imp: Importer, node) -> None:
    """The node's inputs against ONNX's schema of its op: each required one given, of
    a type the schema allows, one type per type parameter (a and a_zero_point, the
    scales); an 8-bit type byoc lacks (float8) is refused by name."""
    schema = _schema(imp, node)
    allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    first: dict[str, tuple[str, str]] = {}  # type parameter -> (input, its type)
    for k, formal in enumerate(schema.inputs):
        given = k < len(node.input) and node.input[k]
        if not given:
            if formal.option == imp.onnx.defs.OpSchema.FormalParameterOption.Single:
                raise imp.invalid(
                    f"it has no {formal.name} (input {k})", hint=f"ONNX's {node.op_type} requires it"
                )
            continue
        dtype = imp.dtype(node.input[k])
        if dtype is None:
            continue
        onnx_type = imp.onnx.TensorProto.DataType.Name(
            imp.onnx.helper.np_dtype_to_tensor_dtype(dtype)
        ).lower()
        shown = dtype_name(np.dtype(dtype)) or onnx_type  # ONNX's name for a type byoc lacks
        types = allowed.get(formal.type_str, [formal.type_str])
        if f"tensor({onnx_type})" not in types:
            raise imp.invalid(
                f"its {_name(imp, node, k)} is {shown}, which ONNX's {node.op_type} does not take",
                hint=f"at opset {imp.opset} its {formal.name} is {' or '.join(t[7:-1] for t in types)}",
            )
        if "tensor(int8)" in types and shown not in RANGES:
            raise imp.unsupported(
                f"its {_name(imp, node, k)} of type {shown}",
                hint=f"byoc computes {node.op_type} on int8 and uint8",
            )
        other, other_type = first.setdefault(formal.type_str, (formal.name, shown))
        if other_type != shown:
            raise imp.invalid(
                f"its {_name(imp, node, k)} is {shown}, not {other_type} as its {other}",
                hint=f"ONNX's {node.op_type} gives its {other} and {formal.name} one type",
            )


def _parameter(
    imp: Importer, node, e: OnnxOp, k: int, to: str, like, axis=None, summed=None, per=""
) -> str | None:
    """Input ``k`` (a scale or zero point; None when absent) cast to ``to`` and shaped to
    broadcast to a tensor of shape ``like``: one value, or one per entry of its ``axis``
    (``per`` says of what) as a vector, or as a tensor of like's rank that is 1 along
    ``summed`` (MatMul's K) and broadcasts to it elsewhere."""
    if k >= len(node.input) or not node.input[k]:
        return None
    shape = tuple(imp.shape(node.input[k]))
    if int(np.prod(shape)) == 1:
        return spread(imp, node, k, e, to)
    if axis is not None and shape == (like[axis],):
        return spread(imp, node, k, e, to, like, axis)
    if (
        summed is not None
        and len(shape) == len(like)
        and shape[summed] == 1
        and all(s in (1, n) for s, n in zip(shape, like))
    ):
        value = imp.value(node.input[k])
        return (
            value if dtype_text(imp, node.input[k]) == to else imp.emit(e.roles["cast"], [value], {"to": to})
        )
    if axis is None:
        raise imp.invalid(
            f"its {_name(imp, node, k)} has shape {list(shape)}, not one value",
            hint="it is per tensor: a scalar, or a tensor of one element",
        )
    wanted = f"[{like[axis]}]"
    if summed is not None:
        wanted += f" or {[*like[:summed], 1, *like[summed + 1 :]]}"
    raise imp.invalid(
        f"its {_name(imp, node, k)} has shape {list(shape)}, not one value or {wanted} (one per {per})",
        hint="a scale or zero point is per tensor, or per row of a, column of b, output channel of w",
    )


def _centred(imp: Importer, node, e: OnnxOp, k: int, zero: int, like, **where) -> str:
    """Input ``k`` in float64 less its zero point (input ``zero``, when given)."""
    x = imp.emit(e.roles["cast"], [imp.value(node.input[k])], {"to": "float64"})
    z = _parameter(imp, node, e, zero, "float64", like, **where)
    return x if z is None else imp.emit(e.roles["minus"], [x, z])


def _rows(shape) -> dict:
    """Where a's per-row parameters lie: its rows' axis, and K's."""
    rank = len(shape)
    return {"axis": rank - 2, "summed": rank - 1, "per": "row of a"} if rank >= 2 else {}


def _columns(shape) -> dict:
    """Where b's per-column parameters lie: its columns' axis, and K's."""
    rank = len(shape)
    return {"axis": rank - 1, "summed": rank - 2, "per": "column of b"} if rank >= 2 else {}


def _integer_zero(imp: Importer, node, e: OnnxOp, codes: int, zero: int, per: int | None) -> str | None:
    """Input ``zero`` (the zero point of input ``codes``) as the catalog's integer
    products take it: a 0 of the codes' type where it is absent, one value, or (with
    ``per``) a vector of ``per`` entries, one per output channel or column (a tensor
    [1, .., 1, per] is that vector too); None where it is another shape (a's zero
    point per row), which the integer products do not take."""
    if zero >= len(node.input) or not node.input[zero]:
        return imp.constant(np.zeros((), imp.dtype(node.input[codes])), imp.names.fresh("zero"))
    shape = tuple(imp.shape(node.input[zero]))
    if int(np.prod(shape)) == 1:
        return (
            imp.value(node.input[zero])
            if not shape
            else imp.reshaped(node.input[zero], [], e.roles["reshape"])
        )
    if per is None or shape[-1] != per or int(np.prod(shape)) != per:
        return None
    return (
        imp.value(node.input[zero])
        if len(shape) == 1
        else imp.reshaped(node.input[zero], [per], e.roles["reshape"])
    )


def _integer_product(
    imp: Importer, node, e: OnnxOp, inputs: tuple[int, int, int, int], per: int | None, attrs=None
):
    """The catalog's integer product (``e.roles["integer"]``: conv_integer,
    matmul_integer) of the node's ``inputs`` (codes, their zero point, weights, theirs),
    in int32; None where a zero point has a shape it does not take."""
    x, x_zero, w, w_zero = inputs
    if not all(dtype_text(imp, node.input[k]) in ("int8", "uint8") for k in (x, w)):
        return None
    zeros = (_integer_zero(imp, node, e, x, x_zero, None), _integer_zero(imp, node, e, w, w_zero, per))
    if None in zeros:
        return None
    return imp.emit(e.roles["integer"], [imp.value(node.input[x]), imp.value(node.input[w]), *zeros], attrs)


def _matmul_product(
    imp: Importer, node, e: OnnxOp, a: int, a_zero: int, b: int, b_zero: int
) -> tuple[str, bool]:
    """(a - a_zero_point) @ (b - b_zero_point), exactly: the catalog's matmul_integer
    (int32, True), or where it does not take the zero points, in float64 (False)."""
    sa, sb = imp.shape(node.input[a]), imp.shape(node.input[b])
    product = _integer_product(imp, node, e, (a, a_zero, b, b_zero), sb[-1] if len(sb) >= 2 else None)
    if product is not None:
        return product, True
    x = _centred(imp, node, e, a, a_zero, sa, **_rows(sa))
    y = _centred(imp, node, e, b, b_zero, sb, **_columns(sb))
    return imp.emit(e.op, [x, y]), False


def _conv_product(
    imp: Importer, node, e: OnnxOp, x: int, x_zero: int, w: int, w_zero: int
) -> tuple[str, bool]:
    """conv(x - x_zero_point, w - w_zero_point), exactly, with the node's Conv
    attributes read as Conv's own: the catalog's conv_integer (int32, True), or where
    it does not take the zero points, in float64 (False)."""
    attrs = conv_attrs(imp, node, weights=w)
    shape = imp.shape(node.input[w])
    product = _integer_product(imp, node, e, (x, x_zero, w, w_zero), shape[0], attrs)
    if product is not None:
        return product, True
    xs = _centred(imp, node, e, x, x_zero, imp.shape(node.input[x]))
    ws = _centred(imp, node, e, w, w_zero, shape, axis=0, per="output channel of w")
    return imp.emit(e.op, [xs, ws], attrs), False


def _with_bias(imp: Importer, node, e: OnnxOp, product: str, bias: int) -> str:
    """The product in float64 plus QLinearConv's int32 bias (input ``bias``), exact."""
    shape = imp.shape(node.input[3])
    if bias >= len(node.input) or not node.input[bias]:
        return product
    if tuple(imp.shape(node.input[bias])) != (shape[0],):
        raise imp.invalid(
            f"its {_name(imp, node, bias)} has shape {list(imp.shape(node.input[bias]))}, not [{shape[0]}]",
            hint="a bias holds one value per output channel",
        )
    b = imp.emit(e.roles["cast"], [imp.value(node.input[bias])], {"to": "float64"})
    return imp.emit(e.roles["bias"], [product, b], {"axis": 1})


def _as(imp: Importer, e: OnnxOp, product: tuple[str, bool], to: str, out: str | None = None) -> str:
    """The product cast to ``to`` (int32, from float64) or exactly as it is."""
    value, is_int32 = product
    if is_int32 and to == "int32":
        if out is not None:
            imp.alias(out, value)
        return value
    return imp.emit(e.roles["cast"], [value], {"to": to}, out)


def _requantised(imp: Importer, node, e: OnnxOp, product: str, first: str, second: str) -> None:
    """ONNX's requantisation of the exact ``product``: times ``first * second /
    y_scale`` (inputs 6 and 7 are y's scale and zero point) computed in the scales'
    type and cast to float64, plus y's zero point, rounded half to even, saturated to
    and cast to the zero point's type."""
    y_scale = _parameter(imp, node, e, 6, dtype_text(imp, node.input[6]), ())
    multiplier = imp.emit(e.roles["over"], [imp.emit(e.roles["times"], [first, second]), y_scale])
    y = imp.emit(e.roles["times"], [product, imp.emit(e.roles["cast"], [multiplier], {"to": "float64"})])
    y = imp.emit(
        e.roles["nearest"], [imp.emit(e.roles["plus"], [y, _parameter(imp, node, e, 7, "float64", ())])]
    )
    saturated(imp, e, y, "float64", dtype_text(imp, node.input[7]), node.output[0])


def matmul_integer(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, set())
    _check_types(imp, node)
    _as(imp, e, _matmul_product(imp, node, e, 0, 2, 1, 3), "int32", node.output[0])


def conv_integer(imp: Importer, node, e: OnnxOp) -> None:
    _check_types(imp, node)
    _as(imp, e, _conv_product(imp, node, e, 0, 2, 1, 3), "int32", node.output[0])


def qlinear_matmul(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, set())
    _check_types(imp, node)
    sa, sb = imp.shape(node.input[0]), imp.shape(node.input[3])
    if min(len(sa), len(sb)) < 2 and any(int(np.prod(imp.shape(node.input[k]))) != 1 for k in (1, 2, 4, 5)):
        raise imp.unsupported(
            "scales or zero points per row or column with a 1-D a or b",
            hint="byoc takes them per row of a and per column of b where both have 2 dimensions or more",
        )
    product = _as(imp, e, _matmul_product(imp, node, e, 0, 2, 3, 5), "float64")
    scales = dtype_text(imp, node.input[1])
    first = _parameter(imp, node, e, 1, scales, sa, **_rows(sa))
    second = _parameter(imp, node, e, 4, scales, sb, **_columns(sb))
    _requantised(imp, node, e, product, first, second)


def qlinear_conv(imp: Importer, node, e: OnnxOp) -> None:
    _check_types(imp, node)
    product = _with_bias(imp, node, e, _as(imp, e, _conv_product(imp, node, e, 0, 2, 3, 5), "float64"), 8)
    out_channels = imp.shape(node.input[3])[0]
    channels = (1, out_channels) + (1,) * (len(imp.shape(node.input[0])) - 2)  # w_scale's place in y
    scales = dtype_text(imp, node.input[1])
    first = _parameter(imp, node, e, 1, scales, ())
    second = _parameter(imp, node, e, 4, scales, channels, axis=1, per="output channel of w")
    _requantised(imp, node, e, product, first, second)


QLINEAR_KINDS = {
    "matmul_integer": matmul_integer,
    "conv_integer": conv_integer,
    "qlinear_matmul": qlinear_matmul,
    "qlinear_conv": qlinear_conv,
}
"""The handlers of this module that ops.yaml's ``kind`` names."""
