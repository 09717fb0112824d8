"""Random well-typed statements of catalog ops, keyed by each op's *shape rule*.

A :class:`Draft` is a graph being drawn: :meth:`Draft.add` proposes one statement of an
op (its inputs, new parameters and attributes, by the strategy of the op's shape rule in
:data:`RULES`: convolutions with random strides, pads, dilations and groups; pools;
reductions; reshapes; split; gather ...), fills the attributes the rule does not read
from their catalog type, and keeps the statement only if the catalog's own inference
(``infer_types``) accepts it, so the strategies need not know each op's every
constraint. Nothing here names an op: a backend or an ``ops.yaml`` that gains ops is
drawn without editing this file.

Every random choice goes through a :class:`Choices`: :class:`NumpyChoices` (a seeded
numpy generator, what ``byoc sweep`` uses) or a test's own (tests/test_e2e_random_catalog.py
draws through hypothesis, which shrinks a failing graph).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import numpy as np

from byoc.catalog import OpDef, RuleError, infer_types, normalize_attrs
from byoc.ir import TensorType, is_integer
from byoc.shape_rules import SHAPE_RULES

T = TypeVar("T")

INDEX_DTYPE = "int64"
"""The dtype of index inputs (gather's, one_hot's, ...)."""
MAX_ELEMENTS = 2048
"""No value of a drawn statement has more elements: keeps the reference and compiles cheap."""
MAX_RANK = 4
"""The largest rank drawn for an input that the strategy does not bound, unless a
:class:`Draft` aims at a larger one."""
SIGNED_RANGE = (-4, 4)
UNSIGNED_RANGE = (0, 4)
FLOAT_RANGE = (-1.0, 1.0)
"""The values of a parameter whose strategy sets no range, by the kind of its dtype."""


class Choices(Protocol):
    """The random choices a :class:`Draft` makes."""

    def integers(self, low: int, high: int) -> int:
        """An integer in ``low..high`` (both included)."""

    def choice(self, items: Sequence[T]) -> T:
        """One of ``items`` (not empty)."""

    def permutation(self, items: Sequence[T]) -> list[T]:
        """``items`` in a random order."""

    def subset(self, items: Sequence[T], min_size: int, max_size: int | None = None) -> list[T]:
        """Distinct ``items``, at least ``min_size`` and at most ``max_size``, in a random order."""


class NumpyChoices:
    """:class:`Choices` from a numpy generator (seeded: the same seed draws the same)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def integers(self, low: int, high: int) -> int:
        return int(self.rng.integers(low, high + 1))

    def choice(self, items: Sequence[T]) -> T:
        return items[int(self.rng.integers(len(items)))]

    def permutation(self, items: Sequence[T]) -> list[T]:
        return [items[k] for k in self.rng.permutation(len(items))]

    def subset(self, items: Sequence[T], min_size: int, max_size: int | None = None) -> list[T]:
        high = len(items) if max_size is None else min(max_size, len(items))
        return self.permutation(items)[: self.integers(min_size, high)]


@dataclass(frozen=True)
class Value:
    name: str
    type: TensorType


@dataclass
class Param:
    """A new graph input; its random values lie in ``low..high`` (None: by its dtype)."""

    value: Value
    low: float | None = None
    high: float | None = None


@dataclass
class Proposal:
    """One statement before the catalog checks it: inputs, attributes, new parameters."""

    inputs: list[Value]
    attrs: dict[str, object] = field(default_factory=dict)
    outputs: int = 1


@dataclass(frozen=True)
class Statement:
    """An accepted statement: ``outputs = op(inputs, attrs)``, and the parameters it added."""

    op: str
    outputs: tuple[Value, ...]
    inputs: tuple[Value, ...]
    attrs: tuple[tuple[str, object], ...]
    params: tuple[Param, ...]

    @property
    def call(self) -> str:
        """The right-hand side in DSL: ``conv(p0, p1, strides=[2, 2])``."""
        args = [v.name for v in self.inputs] + [f"{k}={attr_text(v)}" for k, v in self.attrs]
        return f"{self.op}({', '.join(args)})"

    @property
    def text(self) -> str:
        return f"{', '.join(v.name for v in self.outputs)} = {self.call}"

    def signature(self) -> str:
        """The call with its input types, for messages: ``add(float32[2, 3], float32[3])``."""
        args = [str(v.type) for v in self.inputs] + [f"{k}={attr_text(v)}" for k, v in self.attrs]
        return f"{self.op}({', '.join(args)}) -> {', '.join(str(v.type) for v in self.outputs)}"


class Draft:
    """A graph being drawn at ``dtype``: its parameters, statements and the values in
    scope. ``rank``, when given, is the rank an unbounded input is mostly drawn at;
    ``prefix`` starts every name (cases of one graph stay apart)."""

    def __init__(self, choices: Choices, dtype: str, *, rank: int | None = None, prefix: str = "") -> None:
        self.choices = choices
        self.dtype = dtype
        self.rank = rank
        self.prefix = prefix
        self.params: list[Param] = []
        self.values: list[Value] = []
        self.statements: list[Statement] = []
        self.names = itertools.count()
        self.pending: list[Param] = []

    # --------------------------------------------------------------- choices

    def integers(self, low: int, high: int) -> int:
        return self.choices.integers(low, high)

    def maybe(self) -> bool:
        return self.choices.integers(0, 1) == 1

    def choice(self, items: Sequence[T]) -> T:
        return self.choices.choice(items)

    def permutation(self, items: Sequence[T]) -> list[T]:
        return self.choices.permutation(items)

    def subset(self, items: Sequence[T], min_size: int, max_size: int | None = None) -> list[T]:
        return self.choices.subset(items, min_size, max_size)

    # --------------------------------------------------------------- values

    def fresh(
        self, shape, dtype: str | None = None, low: float | None = None, high: float | None = None
    ) -> Value:
        """A new parameter of ``shape`` (kept only if the statement is accepted)."""
        value = Value(f"{self.prefix}p{next(self.names)}", TensorType(tuple(shape), dtype or self.dtype))
        self.pending.append(Param(value, low, high))
        return value

    def shape(self, rank: int, low: int = 1, high: int = 4) -> tuple[int, ...]:
        """``rank`` sizes in ``low..high``; at most 2 each beyond rank 4, so that a
        tensor of rank 8 stays small."""
        if rank > MAX_RANK:
            high = max(low, min(high, 2))
        return tuple(self.integers(low, high) for _ in range(rank))

    def data(self, min_rank: int = 0, max_rank: int | None = None) -> Value:
        """An input of rank ``min_rank``..``max_rank`` (default :data:`MAX_RANK`, or the
        aimed rank): a value in scope, or a new parameter."""
        top = max(MAX_RANK, self.rank or 0) if max_rank is None else max_rank
        fits = [v for v in self.values if min_rank <= v.type.rank <= top]
        if fits and self.integers(0, 3):
            return self.choice(fits)
        return self.fresh(self.shape(self.any_rank(min_rank, top)))

    def any_rank(self, low: int = 0, high: int | None = None) -> int:
        """A rank in ``low..high`` (default :data:`MAX_RANK`, or the aimed rank): mostly
        the aimed one, when it is in range."""
        high = max(MAX_RANK, self.rank or 0) if high is None else high
        if self.rank is not None and low <= self.rank <= high and self.integers(0, 3):
            return self.rank
        return self.integers(low, high)

    # --------------------------------------------------------------- statements

    def add(self, op: OpDef) -> Statement | None:
        """Draw one statement of ``op`` into the graph; None if the catalog rejects the
        proposal (nothing is kept then)."""
        self.pending = []
        proposal = RULES[op.rule.name](self, op)
        names = {a.name for a in op.attrs}
        proposal.attrs = other_attrs(self, op, {k: v for k, v in proposal.attrs.items() if k in names})
        types = accepted(op, proposal)
        if types is None:
            return None
        self.params += self.pending
        self.values += [p.value for p in self.pending if p.value.type.dtype == self.dtype]
        targets = tuple(Value(f"{self.prefix}v{next(self.names)}", t) for t in types)
        statement = Statement(
            op.name, targets, tuple(proposal.inputs), tuple(proposal.attrs.items()), tuple(self.pending)
        )
        self.statements.append(statement)
        self.values += targets
        return statement

    def graph_text(self, outputs: Sequence[Value], name: str = "main") -> str:
        """The drawn statements as a DSL graph returning ``outputs``."""
        params = ", ".join(f"{p.value.name}: {p.value.type}" for p in self.params)
        lines = "".join(f"  {s.text}\n" for s in self.statements)
        returned = ", ".join(dict.fromkeys(v.name for v in outputs))
        return f"graph {name}({params}) {{\n{lines}  return {returned}\n}}\n"


# ------------------------------------------------------------- inputs per shape rule


def _broadcastable(d: Draft, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``shape``: a suffix of it, some sizes made 1."""
    keep = d.integers(0, len(shape))
    return tuple(1 if d.integers(0, 2) == 0 else s for s in shape[len(shape) - keep :])


def _elementwise(d: Draft, op: OpDef) -> Proposal:
    x = d.data()
    inputs = [x]
    for _ in range(op.min_inputs - 1):
        same = [v for v in d.values if v.type.shape == x.type.shape]
        choice = d.integers(0, 2)
        if choice == 0 and same:
            inputs.append(d.choice(same))
        else:
            inputs.append(d.fresh(x.type.shape if choice == 1 else _broadcastable(d, x.type.shape)))
    return Proposal(d.permutation(inputs))


def _unidirectional(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    return Proposal([x, *(d.fresh(_broadcastable(d, x.type.shape)) for _ in range(op.min_inputs - 1))])


def _concatenate(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = d.integers(-x.type.rank, x.type.rank - 1)
    others = []
    for _ in range(d.integers(max(0, op.min_inputs - 1), 2)):
        shape = list(x.type.shape)
        shape[axis] = d.integers(1, 3)
        others.append(x if d.integers(0, 3) == 0 else d.fresh(shape))
    return Proposal([x, *others], {"axis": axis})


def _spatial(d: Draft, n: int, name: str, low: int, high: int) -> dict[str, object]:
    """``name``: n values in low..high, or the default (omitted)."""
    return {name: tuple(d.integers(low, high) for _ in range(n))} if d.maybe() else {}


def _pads(d: Draft, n: int) -> dict[str, object]:
    return {"pads": tuple(d.integers(0, 1) for _ in range(2 * n))} if d.maybe() else {}


def _window(d: Draft, n: int) -> dict[str, object]:
    """strides, pads and dilations of a convolution or a pool (each maybe the default)."""
    return {**_spatial(d, n, "strides", 1, 2), **_pads(d, n), **_spatial(d, n, "dilations", 1, 2)}


def _groups(d: Draft, channels: int) -> int:
    return d.choice([g for g in range(1, channels + 1) if channels % g == 0])


def _conv(d: Draft, op: OpDef) -> Proposal:
    x = d.data(3, 5)
    n, channels = x.type.rank - 2, x.type.shape[1]
    groups = _groups(d, channels)
    kernel = d.shape(n, 1, 3)
    weight = d.fresh((groups * d.integers(1, 2), channels // groups, *kernel))
    attrs = _window(d, n)
    if groups > 1 or d.maybe():
        attrs["groups"] = groups
    return Proposal([x, weight], attrs)


def _conv_transpose(d: Draft, op: OpDef) -> Proposal:
    x = d.data(3, 5)
    n, channels = x.type.rank - 2, x.type.shape[1]
    groups = _groups(d, channels)
    weight = d.fresh((channels, d.integers(1, 2), *d.shape(n, 1, 3)))
    attrs = {**_window(d, n), **_spatial(d, n, "output_padding", 0, 1)}
    if groups > 1 or d.maybe():
        attrs["groups"] = groups
    return Proposal([x, weight], attrs)


def _pool(d: Draft, op: OpDef) -> Proposal:
    x = d.data(3, 5)
    n = x.type.rank - 2
    return Proposal([x], {"kernel_shape": d.shape(n, 1, 3), **_window(d, n)})


def _global_pool(d: Draft, op: OpDef) -> Proposal:
    return Proposal([d.data(3, 5)])


def _dense(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    return Proposal([x, d.fresh((d.integers(1, 4), x.type.shape[-1]))])


def _matmul(d: Draft, op: OpDef) -> Proposal:
    a = d.data(1)
    k, n = a.type.shape[-1], d.integers(1, 4)
    if a.type.rank == 1 or d.maybe():
        shape: tuple[int, ...] = (k,) if d.maybe() else (k, n)
    else:
        shape = (*_broadcastable(d, a.type.shape[:-2]), k, n)
    return Proposal([a, d.fresh(shape)])


def _axis_of(d: Draft, x: Value) -> int:
    return d.integers(-x.type.rank, x.type.rank - 1)


def _bias_add(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = _axis_of(d, x)
    return Proposal([x, d.fresh((x.type.shape[axis],))], {"axis": axis})


def _batch_norm(d: Draft, op: OpDef) -> Proposal:
    x = d.data(2)
    channel = (x.type.shape[1],)
    scale, bias, mean = (d.fresh(channel) for _ in range(3))
    return Proposal([x, scale, bias, mean, d.fresh(channel, low=0.5, high=1.5)])  # a variance


def _lrn(d: Draft, op: OpDef) -> Proposal:
    return Proposal([d.data(2)], {"size": d.choice([1, 3, 5])})


def _one_axis(d: Draft, op: OpDef) -> Proposal:
    """softmax, argmax, cumsum, ...: an axis (the rule reads it); others drawn by type."""
    x = d.data(1)
    return Proposal([x], {"axis": _axis_of(d, x)})


def _reduce(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    attrs: dict[str, object] = {"keepdims": d.maybe()}
    if d.maybe():
        axes = d.subset(range(x.type.rank), 1)
        attrs["axes"] = tuple(a - x.type.rank if d.maybe() else a for a in axes)
    return Proposal([x], attrs)


def _reshape(d: Draft, op: OpDef) -> Proposal:
    x = d.data()
    dims = d.permutation(x.type.shape)
    if dims and d.maybe():
        dims[d.integers(0, len(dims) - 1)] = -1
    elif d.maybe():
        dims = [math.prod(x.type.shape), 1][: d.integers(1, 2)]
    return Proposal([x], {"newshape": tuple(dims)})


def _flatten(d: Draft, op: OpDef) -> Proposal:
    x = d.data()
    return Proposal([x], {"axis": d.integers(-x.type.rank, x.type.rank)})


def _transpose(d: Draft, op: OpDef) -> Proposal:
    x = d.data()
    return Proposal([x], {"perm": tuple(d.permutation(range(x.type.rank)))} if d.maybe() else {})


def _squeeze(d: Draft, op: OpDef) -> Proposal:
    x = d.data()
    ones = [a for a, s in enumerate(x.type.shape) if s == 1]
    if ones and d.maybe():
        return Proposal([x], {"axes": tuple(d.subset(ones, 1))})
    return Proposal([x])


def _unsqueeze(d: Draft, op: OpDef) -> Proposal:
    x = d.data(0, 3)
    count = d.integers(1, 2)
    return Proposal([x], {"axes": tuple(d.subset(range(x.type.rank + count), count, count))})


def _expand(d: Draft, op: OpDef) -> Proposal:
    x = d.data(0, 3)
    grown = tuple(d.integers(1, 3) if s == 1 else s for s in x.type.shape)
    return Proposal([x], {"newshape": (*d.shape(d.integers(0, 1), 1, 3), *grown)})


def _pad(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    return Proposal([x], {"pads": tuple(d.integers(0, 2) for _ in range(2 * x.type.rank))})


def _slice(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axes = d.subset(range(x.type.rank), 1)
    sizes = [x.type.shape[a] for a in axes]
    attrs = {
        "starts": tuple(d.integers(-s, s - 1) for s in sizes),
        "ends": tuple(d.integers(-s - 1, s + 1) for s in sizes),
        "axes": tuple(axes),
        "steps": tuple(d.choice([1, 1, 2, -1]) for _ in sizes),
    }
    return Proposal([x], attrs)


def _split(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = _axis_of(d, x)
    size = x.type.shape[axis]
    if d.maybe():
        cuts = sorted(d.subset(range(1, size), 0, 2)) if size > 1 else []
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, size])]
        return Proposal([x], {"axis": axis, "sizes": tuple(sizes)}, outputs=len(sizes))
    return Proposal([x], {"axis": axis}, outputs=d.integers(1, min(size, 3)))


def _gather(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = _axis_of(d, x)
    size = x.type.shape[axis]
    indices = d.fresh(d.shape(d.integers(0, 2), 1, 3), INDEX_DTYPE, -size, size - 1)
    return Proposal([x, indices], {"axis": axis})


def _top_k(d: Draft, op: OpDef) -> Proposal:
    """top_k: k of at most the axis' size; two outputs (values, int64 indices)."""
    x = d.data(1)
    axis = _axis_of(d, x)
    return Proposal([x], {"axis": axis, "k": d.integers(1, x.type.shape[axis])}, outputs=2)


def _element_indices(d: Draft, x: Value, axis: int) -> tuple[tuple[int, ...], Value]:
    """An index tensor of x's rank, no larger than x off the axis, in range along it."""
    shape = tuple(
        d.integers(1, 3) if k == axis % x.type.rank else d.integers(1, s) for k, s in enumerate(x.type.shape)
    )
    size = x.type.shape[axis]
    return shape, d.fresh(shape, INDEX_DTYPE, -size, size - 1)


def _gather_elements(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = _axis_of(d, x)
    _, indices = _element_indices(d, x, axis)
    return Proposal([x, indices], {"axis": axis})


def _scatter_elements(d: Draft, op: OpDef) -> Proposal:
    """Duplicate indices are allowed: the reference and every backend that takes the
    op write them in the same (row-major) order."""
    x = d.data(1)
    axis = _axis_of(d, x)
    shape, indices = _element_indices(d, x, axis)
    return Proposal([x, indices, d.fresh(shape, x.type.dtype)], {"axis": axis})


def _nd_indices(d: Draft, x: Value) -> tuple[int, Value]:
    """(m, indices): index tuples of m leading axes of x, each in range for every axis."""
    m = d.integers(1, x.type.rank)
    high = min(x.type.shape[:m]) - 1
    return m, d.fresh((*d.shape(d.integers(0, 1), 1, 3), m), INDEX_DTYPE, 0, high)


def _gather_nd(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    _, indices = _nd_indices(d, x)
    return Proposal([x, indices], {"batch_dims": 0})


def _scatter_nd(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    m, indices = _nd_indices(d, x)
    updates = d.fresh((*indices.type.shape[:-1], *x.type.shape[m:]), x.type.dtype)
    return Proposal([x, indices, updates])


def _one_hot(d: Draft, op: OpDef) -> Proposal:
    """one_hot: int64 indices in [-depth, depth - 1] and two values (off, on)."""
    depth = d.integers(1, 4)
    indices = d.fresh(d.shape(d.integers(0, 2), 1, 3), INDEX_DTYPE, -depth, depth - 1)
    values = d.fresh((2,), d.dtype)
    return Proposal(
        [indices, values], {"depth": depth, "axis": d.integers(-indices.type.rank - 1, indices.type.rank)}
    )


def _one(d: Draft, op: OpDef) -> Proposal:
    """One input of any shape (a predicate's float, a cast's anything; cast's `to` is
    drawn from its choices)."""
    return Proposal([d.data()])


def _fresh_one(d: Draft, op: OpDef) -> Proposal:
    """One new parameter (a bitcast's: it shows every bit of its input, and a computed
    float may be an ulp from the reference's, which as an integer is a mismatch)."""
    return Proposal([d.fresh(d.shape(d.any_rank()))])


def _select(d: Draft, op: OpDef) -> Proposal:
    """where: a bool condition (a comparison's result in scope, or a new parameter) and
    two values, all broadcast."""
    x = d.data()
    conditions = [v for v in d.values if v.type.dtype == "bool"]
    if conditions and d.maybe():
        condition = d.choice(conditions)
    else:
        condition = d.fresh(_broadcastable(d, x.type.shape), "bool")
    other = d.fresh(_broadcastable(d, x.type.shape)) if d.maybe() else x
    return Proposal([condition, *d.permutation([x, other])])


def _quantize(d: Draft, op: OpDef) -> Proposal:
    """quantize_linear: x, a positive scale and an 8-bit zero point, broadcast. In a
    float graph x is of its dtype (float32 only is accepted; another is redrawn) and
    the zero point int8 or uint8; at an integer dtype, x is float32 and the zero point
    of that dtype."""
    integer = is_integer(d.dtype)
    x = d.fresh(d.shape(d.any_rank()), "float32", -4.0, 4.0) if integer else d.data()
    scale = d.fresh(_broadcastable(d, x.type.shape), x.type.dtype, 0.01, 0.5)
    zero_dtype = d.dtype if integer else d.choice(["int8", "uint8"])
    zero = d.fresh(_broadcastable(d, x.type.shape), zero_dtype, 0, 9)
    return Proposal([x, scale, zero])


def _dequantize(d: Draft, op: OpDef) -> Proposal:
    """dequantize_linear: an integer x (int8 in a float graph: new, or a
    quantize_linear's result in scope; at an integer dtype, of that dtype), a positive
    scale (of the float graph's dtype, else float32) and a zero point of x's type,
    broadcast."""
    if is_integer(d.dtype):
        x = d.fresh(d.shape(d.any_rank()), d.dtype, 0, 100)
        scale_dtype = "float32"
    else:
        quantized = [v for v in d.values if v.type.dtype == "int8"]
        x = (
            d.choice(quantized)
            if quantized and d.maybe()
            else d.fresh(d.shape(d.any_rank()), "int8", -100, 100)
        )
        scale_dtype = d.dtype
    scale = d.fresh(_broadcastable(d, x.type.shape), scale_dtype, 0.01, 0.5)
    zero = d.fresh(_broadcastable(d, x.type.shape), x.type.dtype, 0, 9)
    return Proposal([x, scale, zero])


Strategy = Callable[[Draft, OpDef], Proposal]

NEW_RULES: dict[str, Strategy] = {
    "compare": _elementwise,
    "mod": _elementwise,  # a float mod without fmod=true is rejected, and redrawn
    "predicate": _one,
    "cast": _one,
    "bitcast": _fresh_one,
    "select": _select,
    "quantize": _quantize,
    "dequantize": _dequantize,
}
"""The rules of comparisons, where, cast, ... (where the catalog has them)."""

RULES: dict[str, Strategy] = {
    "elementwise": _elementwise,
    "unidirectional": _unidirectional,
    "concatenate": _concatenate,
    "conv": _conv,
    "conv_transpose": _conv_transpose,
    "pool": _pool,
    "global_pool": _global_pool,
    "dense": _dense,
    "matmul": _matmul,
    "bias_add": _bias_add,
    "batch_norm": _batch_norm,
    "lrn": _lrn,
    "softmax": _one_axis,
    "reduce": _reduce,
    "reshape": _reshape,
    "flatten": _flatten,
    "transpose": _transpose,
    "squeeze": _squeeze,
    "unsqueeze": _unsqueeze,
    "expand": _expand,
    "pad": _pad,
    "slice": _slice,
    "split": _split,
    "gather": _gather,
    "arg_reduce": _one_axis,
    "cumulative": _one_axis,
    "top_k": _top_k,
    "gather_elements": _gather_elements,
    "scatter_elements": _scatter_elements,
    "gather_nd": _gather_nd,
    "scatter_nd": _scatter_nd,
    "one_hot": _one_hot,
    **{rule: strategy for rule, strategy in NEW_RULES.items() if rule in SHAPE_RULES},
}
"""Inputs and the rule's attributes, by shape rule name (the rule vocabulary's, not ops)."""


def other_attrs(d: Draft, op: OpDef, given: dict[str, object]) -> dict[str, object]:
    """Attributes the rule strategy did not set, drawn from their catalog type; a
    required one always, an optional one half of the time. Floats are positive (a
    bias, a variance epsilon, a power's base stay in range)."""
    out = dict(given)
    for a in op.attrs:
        if a.name in out or (a.default is not None and d.maybe()):
            continue
        if a.choices:
            out[a.name] = d.choice(a.choices)
        elif a.type == "float":
            out[a.name] = d.integers(1, 10) / 10
        elif a.type == "bool":
            out[a.name] = d.maybe()
        elif a.default is not None:
            out[a.name] = a.default
    return out


def attr_text(value: object) -> str:
    """An attribute value as the DSL writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def accepted(op: OpDef, proposal: Proposal) -> tuple[TensorType, ...] | None:
    """The output types of ``proposal``, or None if the catalog rejects it or an output
    is empty or too large for a cheap test."""
    try:
        attrs = normalize_attrs(op, list(proposal.attrs.items()))
        types = infer_types(op, [v.type for v in proposal.inputs], attrs, proposal.outputs)
    except RuleError:
        return None
    if any(t.size == 0 or t.size > MAX_ELEMENTS for t in types):
        return None
    return types


def random_inputs(params: Sequence[Param], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random values of ``params``, each in its range (see :func:`random_array`)."""
    return {p.value.name: random_array(p.value.type, rng, p.low, p.high) for p in params}


def random_array(
    t: TensorType, rng: np.random.Generator, low: float | None = None, high: float | None = None
) -> np.ndarray:
    """Random values of type ``t`` in ``low..high``, by default its dtype's range:
    :data:`FLOAT_RANGE`, :data:`SIGNED_RANGE` or :data:`UNSIGNED_RANGE`."""
    if t.dtype == "bool":
        return rng.integers(0, 2, size=t.shape).astype(bool)
    if is_integer(t.dtype):
        default = UNSIGNED_RANGE if t.dtype.startswith("u") else SIGNED_RANGE
        low, high = _or(low, default[0]), _or(high, default[1])
        return rng.integers(int(low), int(high) + 1, size=t.shape).astype(t.dtype)
    low, high = _or(low, FLOAT_RANGE[0]), _or(high, FLOAT_RANGE[1])
    return rng.uniform(low, high, size=t.shape).astype(t.dtype)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value
