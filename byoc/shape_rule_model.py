"""What a shape rule is (:class:`ShapeRule`), how one fails (:class:`RuleError`), and the
counts of inputs and outputs it takes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .ir import TensorType


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


Kwargs = Mapping[str, object]
"""Attribute values as rules and kernels receive them (see :meth:`byoc.catalog.OpDef.kwargs`)."""
Infer = Callable[[Sequence[TensorType], Kwargs], TensorType | tuple[TensorType, ...]]
"""A rule's inference: one type, or for a rule of several outputs a tuple of them."""

OUTPUT_COUNT = "num_outputs"
"""The keyword that tells a rule of several outputs, and its reference kernel, how many
outputs the node has (a node's output count comes from the names the text binds)."""


def count_text(low: int, high: int | None) -> str:
    """A count range in words: ``2``, ``2 or more``, ``1 to 3``."""
    if high is None:
        return f"{low} or more"
    return str(low) if low == high else f"{low} to {high}"


def count_within(low: int, high: int | None, outer_low: int, outer_high: int | None) -> bool:
    """Whether the count range ``low``..``high`` lies inside ``outer_low``..``outer_high``
    (``None``: no upper bound)."""
    if low < outer_low:
        return False
    return outer_high is None or (high is not None and high <= outer_high)


@dataclass(frozen=True, slots=True)
class ShapeRule:
    """How an op's output type follows from its inputs."""

    name: str
    infer: Infer
    elementwise: bool
    """True when each output element comes from the input elements at its index, the
    inputs broadcast to the output's shape (numpy's rule): an input of another shape
    than the output is broadcast, and one C expression per element computes the op."""
    attrs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """The attributes the rule reads: name -> value type name (``ints``, ``int``, ...)."""
    doc: str = ""
    min_inputs: int = 1
    max_inputs: int | None = None
    """The inputs the rule takes; ``None`` means any number."""
    parameters: tuple[int, ...] = ()
    """Inputs that are the op's parameters, not its data: one value or one per entry of
    an axis, shaped to broadcast (quantize_linear's scale and zero point). They keep
    their own shape on every backend, whatever its ``broadcast:`` says."""
    check_constant: Callable[[int, np.ndarray], RuleError | None] | None = None
    """A check of an input's values where that input is a constant: (the input's
    index, its values, flat) -> what is wrong with them, or None. The graph builder
    runs it on every such node and reports the problem at the node (quantize_linear's
    scale: a zero would divide by zero)."""
    step: Callable[[Sequence[np.ndarray | None], Sequence[float]], float] | None = None
    """How far the op's result may lie from the numpy reference, in its own units,
    given its constant inputs (None where an input is not a constant) and how far each
    input may lie (:mod:`byoc.output_steps`); None: as far as its inputs' dtype
    tolerances allow, no step."""
    min_outputs: int = 1
    max_outputs: int | None = 1
    """The outputs the rule gives. A rule of several outputs (``max_outputs`` not 1) is
    told their number as the keyword :data:`OUTPUT_COUNT` and infers a tuple of types."""

    def takes(self, min_inputs: int, max_inputs: int | None) -> bool:
        """Whether an op of ``min_inputs`` to ``max_inputs`` inputs fits the rule."""
        return count_within(min_inputs, max_inputs, self.min_inputs, self.max_inputs)

    def gives(self, min_outputs: int, max_outputs: int | None) -> bool:
        """Whether an op of ``min_outputs`` to ``max_outputs`` outputs fits the rule."""
        return count_within(min_outputs, max_outputs, self.min_outputs, self.max_outputs)

    def arity_text(self) -> str:
        return count_text(self.min_inputs, self.max_inputs)

    def infer_outputs(
        self, types: Sequence[TensorType], kwargs: Kwargs, count: int
    ) -> tuple[TensorType, ...]:
        """The types of a node's ``count`` outputs."""
        if self.max_outputs == 1:
            return (self.infer(types, kwargs),)  # type: ignore[return-value]
        return self.infer(types, {**kwargs, OUTPUT_COUNT: count})  # type: ignore[return-value]
