"""The op catalog's model: what an op is, how its output type follows from its
inputs, and how its numpy reference is computed.

The catalog's *data* lives in ``spec/ops.yaml`` and is loaded by :mod:`byoc.spec`;
this module holds only the generic machinery (shape rules, attribute checking and
the reference-expression compiler) so that no op is hard-coded in Python.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .ast_lock import PYTHON_AST_LOCK
from .errors import Location
from .ir import Attrs, AttrValue, TensorType
from .value_types import VALUE_TYPES, ValueType


class RuleError(Exception):
    """A shape rule, attribute or reference check failed; the caller adds a location."""

    def __init__(
        self, message: str, hint: str | None = None, column: int = 0, key: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.column = column
        self.key = key
        """The attribute the error is about, when there is one."""


@dataclass(frozen=True, slots=True)
class AttrDef:
    name: str
    type: str
    """A name of :data:`~byoc.value_types.VALUE_TYPES`."""
    default: AttrValue | None = None
    """``None`` means the attribute is required."""

    @property
    def value_type(self) -> ValueType:
        return VALUE_TYPES[self.type]


Reference = Callable[[Sequence[np.ndarray], Mapping[str, AttrValue]], np.ndarray]


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
    numpy: str
    """The numpy reference, as an expression over ``x0``, ``x1``, ..., ``inputs`` and the attrs."""
    c: str | None
    """A C expression template over ``${x0}``, ``${x1}``, ...; only for elementwise ops."""
    doc: str = ""
    loc: Location | None = field(default=None, compare=False, repr=False)
    reference: Reference | None = field(default=None, compare=False, repr=False)

    @property
    def rule(self) -> ShapeRule:
        return SHAPE_RULES[self.shape_rule]

    def arity_text(self) -> str:
        if self.max_inputs is None:
            return f"at least {self.min_inputs}"
        if self.max_inputs == self.min_inputs:
            return str(self.min_inputs)
        return f"{self.min_inputs} to {self.max_inputs}"


class Catalog(Mapping[str, OpDef]):
    """An immutable mapping from op name to :class:`OpDef`."""

    def __init__(self, ops: Mapping[str, OpDef], source: str | None = None) -> None:
        self._ops = dict(ops)
        self.source = source

    def __getitem__(self, name: str) -> OpDef:
        return self._ops[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ops)

    def __len__(self) -> int:
        return len(self._ops)


# --------------------------------------------------------------------------- shapes


def broadcast_shapes(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """numpy's broadcasting rule; raises RuleError when the shapes do not broadcast."""
    first = shapes[0]
    if all(s == first for s in shapes):
        return first
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise RuleError(
                f"shapes {' and '.join(_shape_text(s) for s in shapes)} do not broadcast",
                hint="each axis must have equal sizes, or size 1 (numpy broadcasting)",
            )
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def _shape_text(shape: tuple[int, ...]) -> str:
    return f"[{', '.join(map(str, shape))}]"


def _same_dtype(types: Sequence[TensorType]) -> str:
    dtype = types[0].dtype
    for t in types[1:]:
        if t.dtype != dtype:
            raise RuleError(
                f"dtype mismatch: {' and '.join(sorted({x.dtype for x in types}))}",
                hint="all inputs of this op must have the same dtype",
            )
    return dtype


def _rule_elementwise(types: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    dtype = _same_dtype(types)
    return TensorType(broadcast_shapes([t.shape for t in types]), dtype)


def _rule_concatenate(types: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    dtype = _same_dtype(types)
    rank = types[0].rank
    if rank == 0 or any(t.rank != rank for t in types):
        raise RuleError(
            "concatenate needs inputs of one rank >= 1, got " + ", ".join(_shape_text(t.shape) for t in types)
        )
    axis = int(attrs["axis"])
    if not -rank <= axis < rank:
        raise RuleError(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    for t in types[1:]:
        for a in range(rank):
            if a != axis and t.shape[a] != types[0].shape[a]:
                raise RuleError(
                    f"concatenate on axis {axis}: shapes "
                    + " and ".join(_shape_text(x.shape) for x in types)
                    + f" differ on axis {a}",
                    hint="all axes but the concatenation axis must match",
                )
    shape = list(types[0].shape)
    shape[axis] = sum(t.shape[axis] for t in types)
    return TensorType(tuple(shape), dtype)


@dataclass(frozen=True, slots=True)
class ShapeRule:
    """How an op's output type follows from its inputs."""

    infer: Callable[[Sequence[TensorType], Mapping[str, AttrValue]], TensorType]
    elementwise: bool
    """True when each output element comes from the input elements at its index, the
    inputs broadcast to the output's shape (numpy's rule): an input of another shape
    than the output is broadcast, and one C expression per element computes the op."""


SHAPE_RULES: Mapping[str, ShapeRule] = MappingProxyType(
    {
        "elementwise": ShapeRule(_rule_elementwise, elementwise=True),
        "concatenate": ShapeRule(_rule_concatenate, elementwise=False),
    }
)
"""Shape rules usable in ops.yaml: ``elementwise`` (numpy broadcasting) and ``concatenate``."""


def infer_type(op: OpDef, types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """The output type of ``op`` on inputs of ``types``; raises RuleError."""
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
    return op.rule.infer(types, dict(attrs))


# --------------------------------------------------------------------------- attrs


def check_attr_value(adef: AttrDef, value: object) -> AttrValue:
    """Coerce and check one attribute value; raises RuleError."""
    try:
        return adef.value_type.check(value)
    except ValueError as exc:
        raise RuleError(f"attribute {adef.name} {exc}", key=adef.name) from None


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

REFERENCE_ARRAY_FUNCTIONS = ("concatenate", "copy", "where", "clip", "stack")
"""numpy functions, besides ufuncs, that a reference expression may call."""


def _numpy_function(name: str) -> Callable[..., np.ndarray] | None:
    fn = getattr(np, name, None)
    if isinstance(fn, np.ufunc) or name in REFERENCE_ARRAY_FUNCTIONS:
        return fn
    return None


def compile_reference(text: str, arity: int | None, attr_names: Sequence[str]) -> Reference:
    """Compile a reference expression such as ``maximum(x0, 0)`` or
    ``concatenate(inputs, axis=axis)`` into a function of (inputs, attrs).

    Only a small, safe subset of Python expressions is allowed: calls of numpy
    ufuncs and a few array functions, the names ``x0``..``x<n-1>`` (or ``inputs``,
    the list of all inputs), attribute names, number literals, and lists. Nothing is
    ``eval``-ed. Raises RuleError with the 0-based column of the offending part.
    """
    try:
        with PYTHON_AST_LOCK:
            tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise RuleError(f"invalid reference expression: {exc.msg}", column=(exc.offset or 1) - 1) from None
    attrs = set(attr_names)

    def build(node: ast.AST) -> Callable[[Sequence[np.ndarray], Mapping[str, AttrValue]], object]:
        col = getattr(node, "col_offset", 0)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            value = node.value
            return lambda xs, at: value
        if isinstance(node, ast.Name):
            name = node.id
            if name == "inputs":
                return lambda xs, at: list(xs)
            if name in attrs:
                return lambda xs, at: at[name]
            if name.startswith("x") and name[1:].isdigit():
                index = int(name[1:])
                if arity is not None and index >= arity:
                    raise RuleError(f"{name} is out of range for an op with {arity} inputs", column=col)
                if arity is None:
                    raise RuleError("a variadic op's reference must use 'inputs', not x<k>", column=col)
                return lambda xs, at: xs[index]
            raise RuleError(
                f"unknown name {name!r} in reference expression",
                hint="use x0, x1, ..., inputs, or an attribute name",
                column=col,
            )
        if isinstance(node, ast.List):
            items = [build(e) for e in node.elts]
            return lambda xs, at: [f(xs, at) for f in items]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            fn = _numpy_function(node.func.id)
            if fn is None:
                raise RuleError(
                    f"{node.func.id!r} is not a numpy ufunc or an allowed array function",
                    hint="allowed: any numpy ufunc, " + ", ".join(REFERENCE_ARRAY_FUNCTIONS),
                    column=col,
                )
            args = [build(a) for a in node.args]
            kwargs = {k.arg: build(k.value) for k in node.keywords if k.arg}
            if len(kwargs) != len(node.keywords):
                raise RuleError("**kwargs are not allowed in a reference expression", column=col)
            return lambda xs, at: fn(*(a(xs, at) for a in args), **{k: v(xs, at) for k, v in kwargs.items()})
        raise RuleError(
            f"{type(node).__name__} is not allowed in a reference expression",
            hint="write a call of numpy functions over x0, x1, ..., inputs, attributes and numbers",
            column=col,
        )

    body = build(tree.body)

    def reference(inputs: Sequence[np.ndarray], attrs_: Mapping[str, AttrValue]) -> np.ndarray:
        return np.asarray(body(inputs, attrs_))

    return reference


def evaluate_op(op: OpDef, inputs: Sequence[np.ndarray], attrs: Attrs, out: TensorType) -> np.ndarray:
    """Run the op's numpy reference and cast the result to the node's dtype."""
    assert op.reference is not None, f"op {op.name} was not compiled"
    result = op.reference(inputs, dict(attrs))
    # Not np.ascontiguousarray: it turns a rank-0 result into shape (1,).
    return np.asarray(result, dtype=out.dtype, order="C")
