"""The handlers (:data:`KINDS`) that turn an ONNX node into byoc statements, by the
``kind`` its row of ``ops.yaml`` names: the general ones here (elementwise ops, casts,
ops by their attributes, constants folded at import), the layers' in
:mod:`.layers`, the tensor ops' in :mod:`.tensors`, and each family's in its module.

The catalog follows ONNX's conventions (layouts, ``pads`` as begins then ends,
Reshape's 0 and -1, Split, Slice, Gather), so most handlers only rename the op and
its attributes; the rest compose several ops (Gemm, Softmax before opset 13) or
compute what ONNX leaves implicit (``auto_pad``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..ir import DTYPES, dtype_name
from .attention import ATTENTION_KINDS
from .composed import COMPOSED_KINDS
from .control import branch, loop, scan
from .grid_sample import GRID_SAMPLE_KINDS
from .indexing import INDEXING_KINDS
from .layers import LAYER_KINDS
from .ops import OnnxOp, onnx_ops
from .qlinear import QLINEAR_KINDS
from .quantize import QUANTIZE_KINDS
from .resize import resize
from .rnn import recurrent
from .signal import SIGNAL_KINDS
from .tensors import TENSOR_KINDS

if TYPE_CHECKING:
    from .importer import Importer


Handler = Callable[["Importer", object, OnnxOp], None]


def _unary(imp: Importer, node, e: OnnxOp) -> None:
    """An elementwise op of one input; ``attrs`` maps ONNX attribute -> (byoc name, default)."""
    imp.check_attrs(node, set(e.attrs))
    values = {name: float(imp.attr(key, default)) for key, (name, default) in e.attrs.items()}
    imp.emit(e.op, [imp.value(node.input[0])], values, node.output[0])


def _binary(imp: Importer, node, e: OnnxOp) -> None:
    """An elementwise op of two inputs, or of several (Sum, Max, Min) as a chain.
    Before opset 7, Add, Sub, Mul, Div and Pow broadcast only when ``broadcast=1``
    says so, the second input's dimensions matching the first's from ``axis`` on
    (default: its last ones): trailing size-1 axes make that a numpy broadcast."""
    imp.check_attrs(node, {"broadcast", "axis"})
    names = [imp.value(i) for i in node.input]
    if imp.attr("broadcast", 0):
        rank, b_shape = len(imp.shape(node.input[0])), list(imp.shape(node.input[1]))
        trailing = rank - int(imp.attr("axis", rank - len(b_shape))) - len(b_shape)
        if trailing > 0:
            names[1] = imp.reshaped(node.input[1], b_shape + [1] * trailing, e.roles["reshape"])
    if len(names) == 1:
        imp.emit(e.roles["single"], names, out=node.output[0])
        return
    result = names[0]
    for k, other in enumerate(names[1:], start=2):
        result = imp.emit(e.op, [result, other], out=node.output[0] if k == len(names) else None)


def _pass_through(imp: Importer, node, e: OnnxOp) -> None:
    """Identity, and Dropout in inference (its mask output must be unused)."""
    if any(o in imp.used for o in node.output[1:]):
        raise imp.unsupported("Dropout's mask output")
    imp.alias(node.output[0], imp.value(node.input[0]))


def _where(imp: Importer, node, e: OnnxOp) -> None:
    """Where(condition, x, y): a bool condition (a constant or a value computed at run
    time), all three broadcast."""
    imp.check_attrs(node, set())
    imp.emit(e.op, [imp.value(i) for i in node.input[:3]], out=node.output[0])


def _cast(imp: Importer, node, e: OnnxOp) -> None:
    """Cast to ``to``, or CastLike to the dtype of input 1, as the catalog's ``cast`` (its
    rule: spec/ops.yaml); a cast to the dtype the value already has is no node at all.
    ``saturate`` and ``round_mode`` concern float8 targets only, which byoc lacks."""
    imp.check_attrs(node, {"to", "saturate", "round_mode"})
    target = imp.dtype(node.input[1]) if len(node.input) > 1 else _to(imp, "Cast")
    source = imp.dtype(node.input[0])
    for what, dtype in (("from", source), ("to", target)):
        if dtype is None or dtype_name(np.dtype(dtype)) is None:
            raise imp.unsupported(
                f"a Cast {what} {'an unknown dtype' if dtype is None else dtype}",
                hint=f"byoc's dtypes: {', '.join(DTYPES)}",
            )
    if source == target:
        imp.alias(node.output[0], imp.value(node.input[0]))
        return
    imp.emit(e.op or "cast", [imp.value(node.input[0])], {"to": dtype_name(np.dtype(target))}, node.output[0])


def _to(imp: Importer, what: str) -> np.dtype:
    """The dtype that the node's attribute ``to`` (an ONNX TensorProto type number) names;
    one byoc lacks is an error naming the node (``what``: a Cast to FLOAT8E4M3FN)."""
    to = int(imp.attr("to"))
    try:
        target = np.dtype(imp.onnx.helper.tensor_dtype_to_np_dtype(to))
    except Exception:
        target = None
    if target is None or dtype_name(target) is None:
        name = imp.onnx.TensorProto.DataType.Name(to) if to in imp.onnx.TensorProto.DataType.values() else to
        raise imp.unsupported(f"a {what} to {name}", hint=f"byoc's dtypes: {', '.join(DTYPES)}")
    return target


def _bitcast(imp: Importer, node, e: OnnxOp) -> None:
    """BitCast: each element's bits as the dtype ``to`` of the same width, the catalog's
    ``e.op`` (its rule, which refuses another width: spec/ops.yaml)."""
    imp.check_attrs(node, {"to"})
    to = dtype_name(_to(imp, "BitCast"))
    imp.emit(e.op, [imp.value(node.input[0])], {"to": to}, node.output[0])


def _attributed(imp: Importer, node, e: OnnxOp, *, own: bool = False) -> None:
    """An elementwise op of any number of inputs whose ONNX attributes ``attrs`` names
    (ONNX name -> [catalog name, default]); each value the node gives is converted to
    the type of the row's default (an ONNX int flag to a bool where the default is
    ``true``/``false``), the defaults being the catalog's (which are ONNX's). Kind
    ``own_op``, a user catalog's ``onnx:`` key, takes an op of any shape rule and
    writes ONNX's default where the node leaves an attribute out (the op's own
    default need not be ONNX's)."""
    imp.check_attrs(node, set(e.attrs))
    if own and len(node.output) > 1:
        raise imp.invalid(
            f"it has {len(node.output)} outputs, and {e.op}, which your catalog imports it as, gives one",
            hint="an op of your own imports an ONNX op of one output (spec/README.md)",
        )
    values: dict[str, object] = {}
    for key, (name, default) in e.attrs.items():
        value = imp.attr(key)
        if value is None and own:
            value = default
        if value is None:
            continue
        # The row's default says the catalog attribute's type: a YAML bool for a flag
        # that ONNX writes as an int, a string for a string.
        values[name] = (
            bool(int(value))
            if isinstance(default, bool)
            else str(value)
            if isinstance(default, str)
            else value
        )
    imp.emit(e.op, [imp.value(i) for i in node.input], values, node.output[0])


def _folded(imp: Importer, node, e: OnnxOp) -> None:
    """An op that byoc only folds (ConstantOfShape, Range): its inputs are shapes and
    bounds, whose values a build needs. It reaches this handler when one is not a
    constant: a model input's value specialises the model (:class:`NeedsValue`);
    anything else is refused."""
    for k, name in enumerate(node.input):
        if name and name not in imp.consts:
            imp.const_input(k, f"input {k}")


KINDS: dict[str, Handler] = {
    **ATTENTION_KINDS,
    "recurrent": recurrent,
    **INDEXING_KINDS,
    **SIGNAL_KINDS,
    **COMPOSED_KINDS,
    **QUANTIZE_KINDS,
    **QLINEAR_KINDS,
    **GRID_SAMPLE_KINDS,
    "folded": _folded,
    "branch": branch,
    "loop": loop,
    "scan": scan,
    "resize": lambda imp, node, e: resize(imp, node, onnx_ops()["Upsample"] if imp.opset < 11 else e),
    "unary": _unary,
    "binary": _binary,
    "pass_through": _pass_through,
    "select": _where,
    "cast": _cast,
    "bitcast": _bitcast,
    "attributed": _attributed,
    "own_op": lambda imp, node, e: _attributed(imp, node, e, own=True),
    **LAYER_KINDS,
    **TENSOR_KINDS,
}
"""The handlers that ops.yaml's ``kind`` names."""
