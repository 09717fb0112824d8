"""Random well-typed statements of catalog ops, keyed by each op's *shape rule*.

A :class:`Draft` is a graph being drawn: :meth:`Draft.add` proposes one statement of an
op (its inputs, new parameters and attributes, by the strategy of the op's shape rule in
:data:`RULES`: convolutions with random strides, pads, dilations and groups; pools;
reductions; reshapes; split; gather ...), fills the attributes the rule does not read
from their catalog type, and keeps the statement only if the catalog's own inference
(``infer_types``) accepts it, so the strategies need not know each op's every
constraint. Nothing here names an op: a backend or an ``ops.yaml`` that gains ops is
drawn without editing the strategies.

Every random choice goes through a :class:`~byoc.testing.choices.Choices`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from byoc.catalog import OpDef, RuleError, infer_types, normalize_attrs
from byoc.ir import TensorType

from .choices import Choices, T
from .statements import Param, Proposal, Statement, Value
from .strategies_elementwise import ELEMENTWISE_RULES
from .strategies_layers import LAYER_RULES
from .strategies_layout import LAYOUT_RULES

MAX_ELEMENTS = 2048
"""No value of a drawn statement has more elements: keeps the reference and compiles cheap."""
MAX_RANK = 4
"""The largest rank drawn for an input that the strategy does not bound, unless a
:class:`Draft` aims at a larger one."""


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

    def broadcastable(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts to ``shape``: a suffix of it, some sizes made 1."""
        keep = self.integers(0, len(shape))
        return tuple(1 if self.integers(0, 2) == 0 else s for s in shape[len(shape) - keep :])

    def axis_of(self, x: Value) -> int:
        return self.integers(-x.type.rank, x.type.rank - 1)

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


Strategy = Callable[[Draft, OpDef], Proposal]

RULES: dict[str, Strategy] = {**ELEMENTWISE_RULES, **LAYER_RULES, **LAYOUT_RULES}
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
