"""The op catalog's model: what an op is, how its output type follows from its
inputs, and how its reference is computed.

The catalog's *data* lives in ``spec/ops.yaml`` and is loaded by :mod:`byoc.spec`;
this module holds only the generic machinery (attribute checking, the
reference-expression compiler and the lookup of reference kernels), and
:mod:`byoc.shape_rules` the shape rules, so that no op is hard-coded in Python.
"""

from __future__ import annotations

import ast
import inspect
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from . import reference_kernels
from .ast_lock import PYTHON_AST_LOCK
from .errors import Location
from .ir import Attrs, AttrValue, TensorType, is_float
from .shape_rule_model import OUTPUT_COUNT, RuleError, ShapeRule, count_text
from .shape_rules import SHAPE_RULES
from .value_types import VALUE_TYPES, ValueType

__all__ = [
    "SHAPE_RULES",
    "AttrDef",
    "Catalog",
    "CatalogFile",
    "OnnxImport",
    "OpDef",
    "RuleError",
    "ShapeRule",
    "check_attr_value",
    "compile_reference",
    "count_text",
    "evaluate_op",
    "evaluate_outputs",
    "infer_type",
    "infer_types",
    "kernel_reference",
    "normalize_attrs",
]


@dataclass(frozen=True, slots=True)
class AttrDef:
    name: str
    type: str
    """A name of :data:`~byoc.value_types.VALUE_TYPES`."""
    default: AttrValue | None = None
    """``None`` means the attribute is required."""
    choices: tuple[AttrValue, ...] = ()
    """The values the attribute may take; empty means any value of its type."""

    @property
    def value_type(self) -> ValueType:
        return VALUE_TYPES[self.type]


Reference = Callable[..., np.ndarray]
"""A compiled reference: (inputs, :meth:`OpDef.kwargs` of the attributes, out=None) -> the
result, or ``out`` holding it (an array of the result's shape that it may fill)."""


@dataclass(frozen=True, slots=True)
class OnnxImport:
    """The ``onnx:`` key of a user catalog's op: the ONNX op that imports as it (its
    ``domain`` and ``type``, at the ``opsets`` from ``opsets[0]`` to ``opsets[1]``, None
    for no end), and ``attrs``, ONNX attribute -> (the op's attribute, ONNX's default).
    :meth:`row` is the same mapping as a row of ``byoc/onnx/ops.yaml``, which
    :func:`byoc.onnx.ops.onnx_row` reads for both."""

    type: str
    domain: str = ""
    opsets: tuple[int, int | None] = (1, None)
    attrs: tuple[tuple[str, str, AttrValue], ...] = ()
    loc: Location | None = field(default=None, compare=False)

    def row(self, op: str) -> dict[str, object]:
        """The row of ``byoc/onnx/ops.yaml`` that imports the ONNX op as ``op``."""
        return {
            "kind": "own_op",
            "op": op,
            "attrs": {key: [name, default] for key, name, default in self.attrs},
        }

    def covers(self, opset: int) -> bool:
        low, high = self.opsets
        return low <= opset and (high is None or opset <= high)

    def overlaps(self, other: OnnxImport) -> bool:
        """Whether both import the same ONNX op at some opset."""
        if (self.domain, self.type) != (other.domain, other.type):
            return False
        low = max(self.opsets[0], other.opsets[0])
        return self.covers(low) and other.covers(low)

    def opsets_text(self) -> str:
        low, high = self.opsets
        return f"opset {low} and later" if high is None else f"opsets {low} to {high}"


@dataclass(frozen=True, slots=True)
class OpDef:
    """One op of the catalog."""

    name: str
    min_inputs: int
    max_inputs: int | None
    """``None`` means variadic."""
    shape_rule: str
    dtypes: tuple[str, ...]
    attrs: tuple[AttrDef, ...]
    numpy: str | None
    """The reference as a numpy expression over ``x0``, ``x1``, ..., ``inputs`` and the
    attrs; None when the reference is a kernel (``kernel``)."""
    c: str | None
    """A C expression template over ``${x0}``, ``${x1}``, ...; only for elementwise ops."""
    doc: str = ""
    kernel: str | None = None
    """The reference kernel's name, when the reference is one (then ``numpy`` is None)."""
    loc: Location | None = field(default=None, compare=False, repr=False)
    reference: Reference | None = field(default=None, compare=False, repr=False)
    min_outputs: int = 1
    max_outputs: int | None = 1
    """The outputs a node of the op defines; ``None`` means any number (a node's
    count is the number of names the text binds)."""
    onnx: OnnxImport | None = field(default=None, repr=False)
    """The ONNX op that imports as this one (a user catalog's ``onnx:`` key)."""

    @property
    def several_outputs(self) -> bool:
        """Whether a node of the op may define more than one output."""
        return self.max_outputs != 1

    @property
    def rule(self) -> ShapeRule:
        return SHAPE_RULES[self.shape_rule]

    def kwargs(self, attrs: Attrs) -> dict[str, object]:
        """The attribute values as shape rules and reference kernels take them: a bool as
        0 or 1, and an empty int list whose default is empty as None (the kernels' "all
        ones", "all zeros" or "every axis")."""
        if not attrs:
            return {}
        empty_default = {a.name for a in self.attrs if a.default == ()}
        out: dict[str, object] = {}
        for key, value in attrs:
            if isinstance(value, bool):
                out[key] = int(value)
            elif value == () and key in empty_default:
                out[key] = None
            else:
                out[key] = value
        return out

    def arity_text(self) -> str:
        if self.max_inputs is None:
            return f"at least {self.min_inputs}"
        return count_text(self.min_inputs, self.max_inputs)

    def outputs_text(self) -> str:
        return count_text(self.min_outputs, self.max_outputs)


@dataclass(frozen=True, slots=True)
class CatalogFile:
    """One user op catalog merged into a :class:`Catalog`: its path (as errors name it)
    and its text, which a bundle carries so that it runs where the file is absent."""

    path: str
    text: str


class Catalog(Mapping[str, OpDef]):
    """An immutable mapping from op name to :class:`OpDef`.

    ``key`` identifies the content it was loaded from (a digest of the YAML texts), so
    that whatever is cached per catalog stays correct when a catalog file changes;
    empty for a catalog built in code. ``user_files`` are the user catalogs merged over
    the shipped one, in search order, and ``doc_locations`` where a user catalog
    changed the doc of an op defined elsewhere.
    """

    def __init__(
        self,
        ops: Mapping[str, OpDef],
        source: str | None = None,
        *,
        key: str = "",
        user_files: Sequence[CatalogFile] = (),
        doc_locations: Mapping[str, Location] | None = None,
    ) -> None:
        self._ops = dict(ops)
        self.source = source
        self.key = key
        self.user_files = tuple(user_files)
        self.doc_locations = dict(doc_locations or {})

    def __getitem__(self, name: str) -> OpDef:
        return self._ops[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ops)

    def __len__(self) -> int:
        return len(self._ops)


# --------------------------------------------------------------------------- shapes


def infer_type(op: OpDef, types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """The output type of a one-output node of ``op`` on inputs of ``types``; raises RuleError."""
    return infer_types(op, types, attrs)[0]


def infer_types(
    op: OpDef, types: Sequence[TensorType], attrs: Attrs, count: int = 1
) -> tuple[TensorType, ...]:
    """The types of the ``count`` outputs of a node of ``op`` on inputs of ``types``;
    raises RuleError."""
    n = len(types)
    if n < op.min_inputs or (op.max_inputs is not None and n > op.max_inputs):
        noun = "input" if op.arity_text() == "1" else "inputs"
        raise RuleError(f"{op.name} takes {op.arity_text()} {noun}, got {n}")
    for t in types:
        if t.dtype not in op.dtypes:
            raise RuleError(
                f"{op.name} does not support dtype {t.dtype}",
                hint=f"{op.name} supports {', '.join(op.dtypes)}",
            )
    if count < op.min_outputs or (op.max_outputs is not None and count > op.max_outputs):
        noun = "output" if op.outputs_text() == "1" else "outputs"
        raise RuleError(
            f"{op.name} gives {op.outputs_text()} {noun}, but the node has {count}",
            hint=f"bind one name per output: `a, b = {op.name}(...)`"
            if op.several_outputs
            else f"bind one name: `y = {op.name}(...)`",
        )
    return op.rule.infer_outputs(types, op.kwargs(attrs), count)


# --------------------------------------------------------------------------- attrs


def check_attr_value(adef: AttrDef, value: object) -> AttrValue:
    """Coerce and check one attribute value; raises RuleError."""
    try:
        checked = adef.value_type.check(value)
    except ValueError as exc:
        raise RuleError(f"attribute {adef.name} {exc}", key=adef.name) from None
    if isinstance(checked, float) and not math.isfinite(checked):
        raise RuleError(f"attribute {adef.name} must be a finite number, got {checked!r}", key=adef.name)
    if adef.choices and checked not in adef.choices:
        shown = ", ".join(map(repr, adef.choices))
        raise RuleError(
            f"attribute {adef.name} must be one of {shown}, got {checked!r}", hint=None, key=adef.name
        )
    return checked


def normalize_attrs(op: OpDef, given: Sequence[tuple[str, AttrValue]]) -> Attrs:
    """Check ``given`` against the op's attributes; return every attribute in catalog
    order with defaults filled in. Raises RuleError naming the bad key."""
    known = {a.name: a for a in op.attrs}
    values: dict[str, AttrValue] = {}
    for key, value in given:
        if key not in known:
            allowed = ", ".join(known) or "none"
            raise RuleError(f"{op.name} has no attribute {key!r}", hint=f"its attributes: {allowed}", key=key)
        if key in values:
            raise RuleError(f"attribute {key!r} is given twice", key=key)
        values[key] = check_attr_value(known[key], value)
    out = []
    for adef in op.attrs:
        if adef.name in values:
            out.append((adef.name, values[adef.name]))
        elif adef.default is not None:
            out.append((adef.name, adef.default))
        else:
            raise RuleError(f"{op.name} needs the attribute {adef.name!r} ({adef.type})")
    return tuple(out)


# ----------------------------------------------------------------------- reference


def _numpy_function(name: str) -> Callable[..., np.ndarray] | None:
    fn = getattr(np, name, None)
    return fn if isinstance(fn, np.ufunc) else None


def compile_reference(text: str, arity: int | None, attr_names: Sequence[str]) -> Reference:
    """Compile a reference expression such as ``maximum(x0, 0)`` into a function of
    (inputs, attrs, out=None).

    Only a small, safe subset of Python expressions is allowed: calls of numpy
    ufuncs, the names ``x0``..``x<n-1>``, attribute names and number literals.
    Nothing is ``eval``-ed. Raises RuleError with the 0-based column of the offending
    part. Anything beyond ufuncs is a reference kernel (:func:`kernel_reference`).

    A ufunc with a float argument runs its float64 loop (``dtype=float64``), whatever
    the inputs' float dtype; ``out``, when given, receives the outermost call's result
    (cast to its dtype, as numpy's ufuncs cast into ``out``).
    """
    try:
        with PYTHON_AST_LOCK:
            tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise RuleError(f"invalid reference expression: {exc.msg}", column=(exc.offset or 1) - 1) from None
    attrs = set(attr_names)

    def build(node: ast.AST) -> Callable[..., object]:
        col = getattr(node, "col_offset", 0)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            value = node.value
            return lambda xs, at, out=None: value
        if isinstance(node, ast.Name):
            name = node.id
            if name in attrs:
                return lambda xs, at, out=None: at[name]
            if name.startswith("x") and name[1:].isdigit():
                index = int(name[1:])
                if arity is None:
                    raise RuleError("a variadic op's reference must be a kernel", column=col)
                if index >= arity:
                    raise RuleError(f"{name} is out of range for an op with {arity} inputs", column=col)
                return lambda xs, at, out=None: xs[index]
            raise RuleError(
                f"unknown name {name!r} in reference expression",
                hint="use x0, x1, ... or an attribute name",
                column=col,
            )
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            fn = _numpy_function(node.func.id)
            if fn is None:
                raise RuleError(
                    f"{node.func.id!r} is not a numpy ufunc",
                    hint="a numpy expression calls ufuncs only; name a reference kernel with `kernel:`",
                    column=col,
                )
            if node.keywords:
                raise RuleError("keyword arguments are not allowed in a reference expression", column=col)
            args = [build(a) for a in node.args]
            return partial(_call_ufunc, fn, args)
        raise RuleError(
            f"{type(node).__name__} is not allowed in a reference expression",
            hint="write a call of numpy ufuncs over x0, x1, ..., attributes and numbers",
            column=col,
        )

    body = build(tree.body)

    def reference(
        inputs: Sequence[np.ndarray], kwargs: Mapping[str, object], out: np.ndarray | None = None
    ) -> np.ndarray:
        return np.asarray(body(inputs, kwargs, out))

    reference.rebuilt_by = (compile_reference, (text, arity, tuple(attr_names)))  # type: ignore[attr-defined]
    return reference


def _call_ufunc(fn: np.ufunc, args: Sequence[Callable[..., object]], xs, at, out=None) -> object:
    values = [a(xs, at) for a in args]
    floats = any(isinstance(v, np.ndarray) and is_float(str(v.dtype)) for v in values)
    if out is None:
        return fn(*values, dtype=np.float64) if floats else fn(*values)
    return fn(*values, dtype=np.float64, out=out) if floats else fn(*values, out=out)


def kernel_reference(
    name: str, min_inputs: int, variadic: bool, attr_names: Sequence[str], several: bool = False
) -> Reference:
    """The reference that calls kernel ``name`` of :mod:`byoc.reference_kernels` with the
    inputs positionally and the attributes as keyword arguments. Raises RuleError when
    there is no such kernel or it cannot take those inputs and attributes.

    The kernel of an op of ``several`` outputs returns a tuple and is also told how
    many outputs the node has, as the keyword ``num_outputs``; any other returns one
    array."""
    kernels = reference_kernels.by_name()
    fn = kernels.get(name)
    if fn is None:
        raise RuleError(f"unknown reference kernel {name!r}", hint=f"kernels: {', '.join(sorted(kernels))}")
    signature = inspect.signature(fn)
    returns_tuple = str(signature.return_annotation).startswith("tuple")
    if returns_tuple and not several:
        raise RuleError(
            f"kernel {name} returns several outputs; the op declares one",
            hint="declare the op's outputs, `outputs: 1+`, with a shape rule of several outputs",
        )
    if several and not returns_tuple:
        raise RuleError(
            f"kernel {name} returns one output; the op declares several",
            hint="an op of several outputs needs a kernel that returns a tuple of arrays",
        )
    probe = [None] * (min_inputs + (1 if variadic else 0))
    keywords = (*attr_names, OUTPUT_COUNT) if several else tuple(attr_names)
    try:
        signature.bind(*probe, **dict.fromkeys(keywords))
    except TypeError as exc:
        raise RuleError(
            f"kernel {name}{signature} cannot take {len(probe)} input(s) and the attributes "
            f"{', '.join(keywords) or '(none)'}: {exc}"
        ) from None

    def reference(
        inputs: Sequence[np.ndarray], kwargs: Mapping[str, object], out: np.ndarray | None = None
    ) -> np.ndarray:
        return fn(*inputs, **kwargs)

    reference.rebuilt_by = (kernel_reference, (name, min_inputs, variadic, tuple(attr_names), several))  # type: ignore[attr-defined]
    return reference


def evaluate_op(op: OpDef, inputs: Sequence[np.ndarray], attrs: Attrs, out: TensorType) -> np.ndarray:
    """Run the op's reference and cast the result to the node's dtype.

    Float inputs are computed in float64 (ufuncs run their float64 loop; the reference
    kernels convert), so a float32 result is the float64 one rounded once, as C's
    ``(float)exp((double)x)``; for the basic arithmetic ops that equals numpy's float32
    result bit for bit. Integer inputs keep their dtype (and numpy's wrap-around).
    Callers that loop over a graph run the loop under ``np.errstate(all="ignore")``:
    NaN and infinities are IEEE results, as in the generated C, not warnings."""
    assert op.reference is not None, f"op {op.name} was not compiled"
    target = np.empty(out.shape, out.dtype) if op.rule.elementwise else None
    result = op.reference(inputs, op.kwargs(attrs), target)
    # Not np.ascontiguousarray: it turns a rank-0 result into shape (1,).
    return np.asarray(result, dtype=out.dtype, order="C")


def evaluate_outputs(
    op: OpDef, inputs: Sequence[np.ndarray], attrs: Attrs, types: Sequence[TensorType]
) -> tuple[np.ndarray, ...]:
    """Every output of a node of ``op`` whose outputs have ``types``, as :func:`evaluate_op`
    computes one: the reference kernel of an op of several outputs is told their number."""
    if not op.several_outputs:
        return (evaluate_op(op, inputs, attrs, types[0]),)
    assert op.reference is not None, f"op {op.name} was not compiled"
    results = op.reference(inputs, {**op.kwargs(attrs), OUTPUT_COUNT: len(types)})
    return tuple(np.asarray(r, dtype=t.dtype, order="C") for r, t in zip(results, types, strict=True))
