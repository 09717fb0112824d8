"""ONNX values as byoc's: a TensorProto as a numpy array, ONNX element types as byoc
dtypes, ONNX names as unique DSL identifiers (:class:`Names`), and numbers, strings
and attributes as DSL text."""

from __future__ import annotations

import re

import numpy as np

from ..errors import GraphError, ParseError
from ..ir import DTYPES, MAX_NAME_LENGTH

_KEYWORDS = frozenset(("graph", "return", "const", "as", "true", "false"))


class Names:
    """ONNX value names as unique DSL identifiers."""

    def __init__(self) -> None:
        self.taken: set[str] = set()
        self.table: dict[str, str] = {}

    def __call__(self, onnx_name: str) -> str:
        found = self.table.get(onnx_name)
        if found is not None:
            return found
        ident = re.sub(r"[^A-Za-z0-9_]", "_", onnx_name)[: MAX_NAME_LENGTH - 8] or "v"
        if not re.match(r"[A-Za-z_]", ident) or ident in _KEYWORDS:
            ident = "v_" + ident
        base, k = ident, 1
        while ident in self.taken:
            ident, k = f"{base}_{k}", k + 1
        self.taken.add(ident)
        self.table[onnx_name] = ident
        return ident

    def fresh(self, hint: str) -> str:
        """A new identifier for a value byoc adds (no ONNX name of its own)."""
        k = len(self.taken)
        while f"{hint}_{k}" in self.taken:
            k += 1
        self.taken.add(f"{hint}_{k}")
        return f"{hint}_{k}"


def dsl_string(text: str) -> str:
    """``text`` as a DSL string literal: every quote, backslash, line break and other
    control or non-ASCII character escaped (the parser decodes the escapes back)."""
    return '"' + text.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'


def tensor_array(onnx, tensor, where: str = "<model>") -> np.ndarray:
    """A TensorProto's values; a bfloat16 one as ml_dtypes' bfloat16 (byoc's) also where
    an older onnx gives its bits as uint16. Data that does not fill the tensor's shape
    (raw bytes not a whole number of elements, too few or too many values) is an error
    naming ``where`` and the tensor."""
    try:
        array = onnx.numpy_helper.to_array(tensor)
    except Exception as exc:  # numpy's ValueError on a buffer of the wrong size, onnx's own
        dims = "x".join(map(str, tensor.dims)) or "scalar"
        raise ParseError(
            f"{where}: tensor {tensor.name!r} ({dims}) has data that does not fill its shape "
            f"({type(exc).__name__}: {exc})",
            hint="its raw_data must hold exactly one element per position of its dims; the model is corrupt",
        ) from None
    if tensor.data_type == onnx.TensorProto.BFLOAT16 and array.dtype != np.dtype("bfloat16"):
        bf16 = np.dtype("bfloat16")
        array = array.view(bf16) if array.dtype == np.uint16 else array.astype(bf16)
    return array


def element_dtype(onnx, elem: int) -> np.dtype:
    """The numpy dtype of a TensorProto element type; bfloat16 as byoc's (ml_dtypes')
    also where an older onnx maps it to float32 or uint16."""
    if elem == onnx.TensorProto.BFLOAT16:
        return np.dtype("bfloat16")
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))


def dsl_dtype(dtype: np.dtype, what: str) -> str:
    name = np.dtype(dtype).name
    if name not in DTYPES:
        raise GraphError(
            f"{what} has dtype {name}, which byoc does not support", hint=f"byoc supports {', '.join(DTYPES)}"
        )
    return name


def number(v) -> str:
    """A DSL literal for one value (repr keeps a float32's value exactly)."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    text = repr(float(v))
    if text in ("inf", "-inf", "nan"):
        raise GraphError(f"the constant value {text} cannot be written in the DSL")
    return text


def attr_text(v) -> str:
    """An attribute value as DSL text: a bool, an ints list, a string or a number."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(str(int(x)) for x in v) + "]"
    if isinstance(v, str):
        return dsl_string(v)
    return number(v)


def value_type(onnx, value):
    """A ValueInfo's (shape, dtype): None for a shape that is unknown or dynamic, or a
    dtype this onnx does not know."""
    t = value.type.tensor_type
    try:
        dtype = element_dtype(onnx, t.elem_type) if t.elem_type else None
    except (KeyError, ValueError, TypeError):  # an element type this onnx does not know
        dtype = None  # the node that makes or takes such a value is refused with its name
    if not t.HasField("shape") or any(not d.HasField("dim_value") or d.dim_value < 0 for d in t.shape.dim):
        return None, dtype  # unknown: dynamic, or a negative dimension (inference of a corrupt model)
    return tuple(d.dim_value for d in t.shape.dim), dtype


def dims_text(shape) -> str:
    """A shape as DSL text, ``[2, 3]``."""
    return "[" + ", ".join(map(str, shape)) + "]"
