"""Iteration spaces of the ``c_fused`` codegen: the loops over one output shape, and
how each operand of another shape is indexed in them (numpy broadcasting).

Shapes are static, so everything is decided when the code is generated:

* Every operand's *stride* along each axis of the loop shape is computed the numpy
  way: shapes are aligned on the right; an axis the operand lacks, or has with
  extent 1, has stride 0 (the operand is broadcast along it); otherwise the stride
  is the operand's row-major element stride.
* Axes of extent 1 are dropped, and neighbouring axes are merged when every operand
  steps through them as through one axis (``stride[a] == stride[a + 1] * extent[a + 1]``,
  which broadcast axes satisfy too when both are). So operands of the loop's own
  shape give ONE flat loop over the element count, indexed ``[i]``; a bias add
  ``[M, N] + [N]`` gives two nested loops, ``out[i0 * N + i1]`` and ``bias[i1]``; and
  a loop with one element gives no loop at all (every index is ``0``).
* An operand's *depth* is the number of loops, from the outside, that it varies in:
  a value is computed inside the innermost loop it needs and no deeper, so what is
  invariant in the inner loops is computed once per outer iteration (or once).

No division or modulo is ever needed: nested loops give each axis its own counter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Shape = tuple[int, ...]


def axis_strides(shape: Shape, loop_shape: Shape) -> tuple[int, ...]:
    """The element stride of an operand of ``shape`` along each axis of ``loop_shape``;
    0 where numpy broadcasting repeats it. ``shape`` must broadcast to ``loop_shape``."""
    offset = len(loop_shape) - len(shape)
    assert offset >= 0, f"{shape} does not broadcast to {loop_shape}"
    strides = [0] * len(loop_shape)
    step = 1
    for b in reversed(range(len(shape))):
        assert shape[b] in (1, loop_shape[b + offset]), f"{shape} does not broadcast to {loop_shape}"
        strides[b + offset] = 0 if shape[b] == 1 else step
        step *= shape[b]
    return tuple(strides)


@dataclass(frozen=True, slots=True)
class Loops:
    """The loops over ``shape`` for a fixed set of operand shapes (see the module doc).

    ``axes[k]`` lists the axes of ``shape`` that loop ``k`` covers, outermost first;
    each loop's extent is the product of theirs and is at least 2.
    """

    shape: Shape
    axes: tuple[tuple[int, ...], ...]

    @property
    def size(self) -> int:
        """The number of elements (iterations of the innermost body)."""
        return math.prod(self.shape)

    @property
    def extents(self) -> tuple[int, ...]:
        return tuple(math.prod(self.shape[a] for a in group) for group in self.axes)

    @property
    def variables(self) -> tuple[str, ...]:
        """The loop counters: ``i`` for one flat loop, else ``i0``, ``i1``, ..."""
        if len(self.axes) == 1:
            return ("i",)
        return tuple(f"i{k}" for k in range(len(self.axes)))

    def strides(self, shape: Shape) -> tuple[int, ...]:
        """The stride of an operand of ``shape`` along each loop (0: broadcast)."""
        per_axis = axis_strides(shape, self.shape)
        return tuple(per_axis[group[-1]] for group in self.axes)

    def index(self, shape: Shape) -> str:
        """The C index of the current element of an operand of ``shape``."""
        terms = [
            var if stride == 1 else f"{var} * {stride}"
            for var, stride in zip(self.variables, self.strides(shape))
            if stride
        ]
        return " + ".join(terms) or "0"

    def depth(self, shape: Shape) -> int:
        """How many loops, from the outside, an operand of ``shape`` varies in."""
        strides = self.strides(shape)
        return max((k + 1 for k, s in enumerate(strides) if s), default=0)

    def broadcast(self, shape: Shape) -> bool:
        """Whether an operand of ``shape`` is not simply indexed like the loop's own shape."""
        return self.strides(shape) != self.strides(self.shape)


def plan_loops(shape: Shape, operands: Sequence[Shape]) -> Loops:
    """The loops over ``shape`` for operands of the given shapes (each broadcasts to it).

    The output (``shape`` itself) always takes part, so merged loops stay row-major
    over the output. Deterministic: it depends on the shapes only.
    """
    table = [axis_strides(s, shape) for s in dict.fromkeys((tuple(shape), *map(tuple, operands)))]
    groups: list[list[int]] = []
    for axis, extent in enumerate(shape):
        if extent == 1:
            continue  # index 0 along it, whatever the strides
        if groups:
            prev = groups[-1][-1]
            if all(strides[prev] == strides[axis] * extent for strides in table):
                groups[-1].append(axis)
                continue
        groups.append([axis])
    return Loops(tuple(shape), tuple(tuple(g) for g in groups))
