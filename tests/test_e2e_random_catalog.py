"""Random graphs of the whole op catalog, through every shipped backend.

Hypothesis builds small, well-typed float graphs op by op: the op is drawn from the
catalog (spec/ops.yaml through ``byoc.load_catalog``), mostly from the ops the backend
under test maps (its spec says which), and its inputs and attributes by a strategy
keyed by the op's *shape rule* (convolutions with random strides, pads, dilations and
groups; pools; reductions; reshapes; split; gather ...). Attributes the rule does not
read are drawn from their catalog type. Every proposal is checked by the catalog's own
inference (``infer_types``); one it rejects is dropped and another op is tried, so the
strategies need not know each op's every constraint.

Each graph is printed as DSL, parsed, built with ``--backend X`` (automatic
partitioning, host fallback for what X lacks) and run; every output must match the
reference evaluator within a tolerance for its dtype. A backend that gains ops (C
macros for conv, dense, pools ...) is exercised on them without editing this file.
One build (one compile) per example; few examples per backend.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from libraries import missing_library

import byoc
from byoc.api import parse
from byoc.building import build
from byoc.catalog import OpDef, RuleError, infer_types, normalize_attrs
from byoc.generator.partition import partition
from byoc.ir import TensorType, is_integer
from byoc.runtime.probe import for_machine
from byoc.shape_rules import SHAPE_RULES

CATALOG = byoc.load_catalog()
SPECS = {spec.name: spec for spec in byoc.list_backends()}
FLOATS = ("float32", "float64", "float16", "bfloat16")
"""The dtypes a graph is drawn at (its values of other dtypes come from comparisons and
casts), where the backend declares them."""
INDEX_DTYPE = "int64"
EXAMPLES = {"engine": 8}
"""Examples per backend; the default is DEFAULT_EXAMPLES (engine pays a C++ compile each)."""
DEFAULT_EXAMPLES = 20
DERANDOMIZE = True
MAX_ELEMENTS = 2048
"""No value of a random graph has more elements; keeps the reference and compiles cheap."""
TOLERANCE = {
    "float32": (2e-4, 1e-5),
    "float64": (1e-9, 1e-12),
    "float16": (4e-3, 1e-3),
    "bfloat16": (3e-2, 8e-3),
}
"""(rtol, atol relative to the largest finite reference magnitude) per dtype: backends
sum in other orders than numpy (convolutions, reductions), so results differ by rounding.
float16 and bfloat16 are computed in float32 (the reference in float64), and a value
one rounding apart is one of their ulps (2**-10 and 2**-7 relative) away. Integer and
bool results must be equal."""


@dataclass(frozen=True)
class Value:
    name: str
    type: TensorType


@dataclass
class Param:
    value: Value
    low: float
    high: float


@dataclass
class Proposal:
    """One statement before the catalog checks it: inputs, attributes, new parameters."""

    inputs: list[Value]
    attrs: dict[str, object] = field(default_factory=dict)
    params: list[Param] = field(default_factory=list)
    outputs: int = 1


class Draft:
    """A graph being drawn: its parameters, statements and the float values in scope."""

    def __init__(self, draw, dtype: str) -> None:
        self.draw = draw
        self.dtype = dtype
        self.params: list[Param] = []
        self.values: list[Value] = []
        self.lines: list[str] = []
        self.names = itertools.count()
        self.pending: list[Param] = []

    def fresh(self, shape, dtype: str | None = None, low: float = -1.0, high: float = 1.0) -> Value:
        """A new parameter of ``shape`` (kept only if the statement is accepted)."""
        value = Value(f"p{next(self.names)}", TensorType(tuple(shape), dtype or self.dtype))
        self.pending.append(Param(value, low, high))
        return value

    def shape(self, rank: int, low: int = 1, high: int = 4) -> tuple[int, ...]:
        return tuple(self.draw(st.lists(st.integers(low, high), min_size=rank, max_size=rank)))

    def data(self, min_rank: int = 0, max_rank: int = 4) -> Value:
        """An input of rank ``min_rank``..``max_rank``: a value in scope, or a new parameter."""
        fits = [v for v in self.values if min_rank <= v.type.rank <= max_rank]
        if fits and self.draw(st.integers(0, 3)):
            return self.draw(st.sampled_from(fits))
        return self.fresh(self.shape(self.draw(st.integers(min_rank, max_rank))))

    def integers(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def maybe(self) -> bool:
        return self.draw(st.booleans())


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
            inputs.append(d.draw(st.sampled_from(same)))
        else:
            inputs.append(d.fresh(x.type.shape if choice == 1 else _broadcastable(d, x.type.shape)))
    return Proposal(list(d.draw(st.permutations(inputs))))


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


def _conv(d: Draft, op: OpDef) -> Proposal:
    x = d.data(3, 5)
    n, channels = x.type.rank - 2, x.type.shape[1]
    groups = d.draw(st.sampled_from([g for g in range(1, channels + 1) if channels % g == 0]))
    kernel = d.shape(n, 1, 3)
    weight = d.fresh((groups * d.integers(1, 2), channels // groups, *kernel))
    attrs = {**_spatial(d, n, "strides", 1, 2), **_pads(d, n), **_spatial(d, n, "dilations", 1, 2)}
    if groups > 1 or d.maybe():
        attrs["groups"] = groups
    return Proposal([x, weight], attrs)


def _conv_transpose(d: Draft, op: OpDef) -> Proposal:
    x = d.data(3, 5)
    n, channels = x.type.rank - 2, x.type.shape[1]
    groups = d.draw(st.sampled_from([g for g in range(1, channels + 1) if channels % g == 0]))
    weight = d.fresh((channels, d.integers(1, 2), *d.shape(n, 1, 3)))
    attrs = {**_spatial(d, n, "strides", 1, 2), **_pads(d, n), **_spatial(d, n, "dilations", 1, 2)}
    attrs.update(_spatial(d, n, "output_padding", 0, 1))
    if groups > 1 or d.maybe():
        attrs["groups"] = groups
    return Proposal([x, weight], attrs)


def _pool(d: Draft, op: OpDef) -> Proposal:
    x = d.data(3, 5)
    n = x.type.rank - 2
    attrs = {"kernel_shape": d.shape(n, 1, 3), **_spatial(d, n, "strides", 1, 2), **_pads(d, n)}
    attrs.update(_spatial(d, n, "dilations", 1, 2))
    return Proposal([x], attrs)


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


def _bias_add(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = d.integers(-x.type.rank, x.type.rank - 1)
    return Proposal([x, d.fresh((x.type.shape[axis],))], {"axis": axis})


def _batch_norm(d: Draft, op: OpDef) -> Proposal:
    x = d.data(2)
    channel = (x.type.shape[1],)
    scale, bias, mean = (d.fresh(channel) for _ in range(3))
    return Proposal([x, scale, bias, mean, d.fresh(channel, low=0.5, high=1.5)])  # a variance


def _lrn(d: Draft, op: OpDef) -> Proposal:
    return Proposal([d.data(2)], {"size": d.draw(st.sampled_from([1, 3, 5]))})


def _one_axis(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    return Proposal([x], {"axis": d.integers(-x.type.rank, x.type.rank - 1)})


def _reduce(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    attrs: dict[str, object] = {"keepdims": d.maybe()}
    if d.maybe():
        axes = d.draw(st.lists(st.integers(0, x.type.rank - 1), min_size=1, unique=True))
        attrs["axes"] = tuple(a - x.type.rank if d.maybe() else a for a in axes)
    return Proposal([x], attrs)


def _reshape(d: Draft, op: OpDef) -> Proposal:
    x = d.data()
    dims = list(d.draw(st.permutations(x.type.shape)))
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
    return Proposal([x], {"perm": tuple(d.draw(st.permutations(range(x.type.rank))))} if d.maybe() else {})


def _squeeze(d: Draft, op: OpDef) -> Proposal:
    x = d.data()
    ones = [a for a, s in enumerate(x.type.shape) if s == 1]
    if ones and d.maybe():
        return Proposal(
            [x], {"axes": tuple(d.draw(st.lists(st.sampled_from(ones), min_size=1, unique=True)))}
        )
    return Proposal([x])


def _unsqueeze(d: Draft, op: OpDef) -> Proposal:
    x = d.data(0, 3)
    count = d.integers(1, 2)
    axes = d.draw(
        st.lists(st.integers(0, x.type.rank + count - 1), min_size=count, max_size=count, unique=True)
    )
    return Proposal([x], {"axes": tuple(axes)})


def _expand(d: Draft, op: OpDef) -> Proposal:
    x = d.data(0, 3)
    grown = tuple(d.integers(1, 3) if s == 1 else s for s in x.type.shape)
    return Proposal([x], {"newshape": (*d.shape(d.integers(0, 1), 1, 3), *grown)})


def _pad(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    return Proposal([x], {"pads": tuple(d.integers(0, 2) for _ in range(2 * x.type.rank))})


def _slice(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axes = d.draw(st.lists(st.integers(0, x.type.rank - 1), min_size=1, unique=True))
    sizes = [x.type.shape[a] for a in axes]
    attrs = {
        "starts": tuple(d.integers(-s, s - 1) for s in sizes),
        "ends": tuple(d.integers(-s - 1, s + 1) for s in sizes),
        "axes": tuple(axes),
        "steps": tuple(d.draw(st.sampled_from([1, 1, 2, -1])) for _ in sizes),
    }
    return Proposal([x], attrs)


def _split(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = d.integers(-x.type.rank, x.type.rank - 1)
    size = x.type.shape[axis]
    if d.maybe():
        cuts = sorted(d.draw(st.lists(st.integers(1, size - 1), max_size=2, unique=True)) if size > 1 else [])
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, size])]
        return Proposal([x], {"axis": axis, "sizes": tuple(sizes)}, outputs=len(sizes))
    return Proposal([x], {"axis": axis}, outputs=d.integers(1, min(size, 3)))


def _gather(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = d.integers(-x.type.rank, x.type.rank - 1)
    size = x.type.shape[axis]
    indices = d.fresh(d.shape(d.integers(0, 2), 1, 3), INDEX_DTYPE, -size, size - 1)
    return Proposal([x, indices], {"axis": axis})


def _axis_of(d: Draft, x) -> int:
    return d.integers(-x.type.rank, x.type.rank - 1)


def _arg_reduce(d: Draft, op: OpDef) -> Proposal:
    """argmax, argmin: an axis (the rule reads it), keepdims and select_last_index drawn."""
    x = d.data(1)
    return Proposal([x], {"axis": _axis_of(d, x)})


def _cumulative(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    return Proposal([x], {"axis": _axis_of(d, x)})


def _top_k(d: Draft, op: OpDef) -> Proposal:
    """top_k: k of at most the axis' size; two outputs (values, int64 indices)."""
    x = d.data(1)
    axis = _axis_of(d, x)
    return Proposal([x], {"axis": axis, "k": d.integers(1, x.type.shape[axis])}, outputs=2)


def _element_indices(d: Draft, x, axis: int) -> tuple[tuple[int, ...], Value]:
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


def _nd_indices(d: Draft, x) -> tuple[int, Value]:
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
    return Proposal([d.fresh(d.shape(d.integers(0, 4)))])


def _select(d: Draft, op: OpDef) -> Proposal:
    """where: a bool condition (a comparison's result in scope, or a new parameter) and
    two values, all broadcast."""
    x = d.data()
    conditions = [v for v in d.values if v.type.dtype == "bool"]
    if conditions and d.maybe():
        condition = d.draw(st.sampled_from(conditions))
    else:
        condition = d.fresh(_broadcastable(d, x.type.shape), "bool")
    other = d.fresh(_broadcastable(d, x.type.shape)) if d.maybe() else x
    return Proposal([condition, *d.draw(st.permutations([x, other]))])


def _quantize(d: Draft, op: OpDef) -> Proposal:
    """quantize_linear: x (float32 in a float32 graph; another is refused, and redrawn),
    a positive scale and an int8 or uint8 zero point, broadcast."""
    x = d.data()
    scale = d.fresh(_broadcastable(d, x.type.shape), low=0.01, high=0.5)
    zero = d.fresh(_broadcastable(d, x.type.shape), d.draw(st.sampled_from(["int8", "uint8"])), 0, 9)
    return Proposal([x, scale, zero])


def _dequantize(d: Draft, op: OpDef) -> Proposal:
    """dequantize_linear: an int8 x (new, or a quantize_linear's result in scope), a
    positive scale of the graph's dtype and a zero point of x's type, broadcast."""
    quantized = [v for v in d.values if v.type.dtype == "int8"]
    x = (
        d.draw(st.sampled_from(quantized))
        if quantized and d.maybe()
        else d.fresh(d.shape(d.integers(0, 4)), "int8", -100, 100)
    )
    scale = d.fresh(_broadcastable(d, x.type.shape), low=0.01, high=0.5)
    zero = d.fresh(_broadcastable(d, x.type.shape), "int8", -9, 9)
    return Proposal([x, scale, zero])


NEW_RULES: dict[str, Callable[[Draft, OpDef], Proposal]] = {
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

RULES: dict[str, Callable[[Draft, OpDef], Proposal]] = {
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
    "arg_reduce": _arg_reduce,
    "cumulative": _cumulative,
    "top_k": _top_k,
    "gather_elements": _gather_elements,
    "scatter_elements": _scatter_elements,
    "gather_nd": _gather_nd,
    "scatter_nd": _scatter_nd,
    "one_hot": _one_hot,
    **{rule: strategy for rule, strategy in NEW_RULES.items() if rule in SHAPE_RULES},
}
"""Inputs and the rule's attributes, by shape rule name (the rule vocabulary's, not ops)."""


def test_every_shape_rule_has_a_strategy():
    assert set(RULES) == {op.rule.name for op in CATALOG.values()}


def _other_attrs(d: Draft, op: OpDef, given: dict[str, object]) -> dict[str, object]:
    """Attributes the rule strategy did not set, drawn from their catalog type; a
    required one always, an optional one half of the time. Floats are positive (a
    bias, a variance epsilon, a power's base stay in range)."""
    out = dict(given)
    for a in op.attrs:
        if a.name in out or (a.default is not None and d.maybe()):
            continue
        if a.choices:
            out[a.name] = d.draw(st.sampled_from(a.choices))
        elif a.type == "float":
            out[a.name] = d.integers(1, 10) / 10
        elif a.type == "bool":
            out[a.name] = d.maybe()
        elif a.default is not None:
            out[a.name] = a.default
    return out


def _attr_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def _accepted(op: OpDef, proposal: Proposal) -> tuple[TensorType, ...] | None:
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


def _statement(d: Draft, op: OpDef) -> bool:
    """Add one statement of ``op`` to ``d``; False if the drawn proposal is rejected."""
    d.pending = []
    proposal = RULES[op.rule.name](d, op)
    proposal.attrs = _other_attrs(
        d, op, {k: v for k, v in proposal.attrs.items() if k in {a.name for a in op.attrs}}
    )
    types = _accepted(op, proposal)
    if types is None:
        return False
    d.params += d.pending
    d.values += [p.value for p in d.pending if p.value.type.dtype == d.dtype]
    targets = [Value(f"v{next(d.names)}", t) for t in types]
    args = [v.name for v in proposal.inputs] + [f"{k}={_attr_text(v)}" for k, v in proposal.attrs.items()]
    d.lines.append(f"  {', '.join(v.name for v in targets)} = {op.name}({', '.join(args)})")
    d.values += targets
    return True


@dataclass(frozen=True)
class RandomGraph:
    text: str
    inputs: dict[str, np.ndarray]
    ops: tuple[str, ...]


@st.composite
def catalog_graphs(draw, backend: str) -> RandomGraph:
    """A random float graph of catalog ops, most of them ops ``backend`` maps."""
    spec = machine_spec(backend)
    dtype = draw(st.sampled_from([t for t in FLOATS if t in spec.dtypes] or list(FLOATS)))
    usable = [name for name, op in CATALOG.items() if dtype in op.dtypes]
    mapped = [name for name in usable if name in spec.ops]
    d = Draft(draw, dtype)
    # Ops are chosen by a seeded Random: hypothesis would favour the first op of a list.
    chooser = draw(st.randoms(use_true_random=False))
    ops: list[str] = []
    for _ in range(draw(st.integers(3, 7))):
        for _attempt in range(6):
            name = chooser.choice(mapped if mapped and chooser.random() < 0.7 else usable)
            if _statement(d, CATALOG[name]):
                ops.append(name)
                break
    if not ops:  # every proposal was rejected: an op that always fits
        simple = [n for n in usable if CATALOG[n].rule.elementwise and CATALOG[n].max_inputs == 1]
        assert _statement(d, CATALOG[draw(st.sampled_from(simple))])
    defined = [v for v in d.values if v.name.startswith("v")]
    results = [defined[-1], *draw(st.lists(st.sampled_from(defined), max_size=2))]
    params = ", ".join(f"{p.value.name}: {p.value.type}" for p in d.params)
    returned = ", ".join(dict.fromkeys(v.name for v in results))
    text = f"graph main({params}) {{\n" + "\n".join(d.lines) + f"\n  return {returned}\n}}\n"
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    inputs = {}
    for p in d.params:
        t = p.value.type
        if t.dtype == "bool":
            inputs[p.value.name] = rng.integers(0, 2, size=t.shape).astype(bool)
        elif is_integer(t.dtype):
            inputs[p.value.name] = rng.integers(int(p.low), int(p.high) + 1, size=t.shape).astype(t.dtype)
        else:
            inputs[p.value.name] = rng.uniform(p.low, p.high, size=t.shape).astype(t.dtype)
    return RandomGraph(text, inputs, tuple(ops))


def check_close(got: np.ndarray, want: np.ndarray, text: str) -> None:
    """``got`` equals the reference: NaN exactly where it is NaN (a domain error, the log
    of a negative, or a NaN carried on through maximum, relu, a max pool, ...), the same
    infinities (an overflow), and the finite values within the dtype's tolerance."""
    assert got.dtype == want.dtype and got.shape == want.shape, text
    if str(want.dtype) not in TOLERANCE:  # integers and bool
        np.testing.assert_array_equal(got, want, err_msg=text)
        return
    rtol, atol = TOLERANCE[str(want.dtype)]
    if want.dtype.kind != "f":  # bfloat16 (ml_dtypes): numpy's NaN tests and differences in float32
        got, want = got.astype(np.float32), want.astype(np.float32)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite], err_msg=text)  # NaN equals NaN here
    scale = max(1.0, float(np.abs(want[finite]).max())) if finite.any() else 1.0
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol * scale, err_msg=text)


def machine_spec(backend: str):
    """The backend's spec as partitioning sees it on this machine: without the probed
    dtypes (dnnl's 16-bit floats) this CPU does not compute."""
    return for_machine(SPECS[backend], FLOATS)


def _offloaded(program, backend: str) -> int:
    """How many nodes automatic partitioning gives ``backend``."""
    fn = partition(program, [machine_spec(backend)]).functions[0]
    return sum(len(n.callee.nodes) for n in fn.nodes if n.callee is not None)


@pytest.mark.parametrize("backend", sorted(SPECS))
def test_random_catalog_graphs_match_the_reference(backend):
    if missing_library(backend):
        pytest.skip(missing_library(backend))
    offloaded = []

    @settings(
        max_examples=EXAMPLES.get(backend, DEFAULT_EXAMPLES),
        deadline=None,
        derandomize=DERANDOMIZE,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(catalog_graphs(backend))
    def run(graph: RandomGraph) -> None:
        program = parse(graph.text, "graph", file="random.graph")
        assume(_offloaded(program, backend) > 0)  # else there is nothing to build for the backend
        offloaded.append(graph.ops)
        with np.errstate(all="ignore"):  # domain errors give NaN, as in C
            want = byoc.evaluate(program.functions[0], graph.inputs)
            got = build(program, backends=(backend,))(**graph.inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            check_close(g, w, graph.text)

    run()
    assert offloaded, f"{backend} was given no node of any random graph"
