"""Storage planning: give every value of a schedule a buffer, and let values whose
lifetimes do not overlap share one.

The input is a schedule, a sequence of :class:`ScheduledOp` (one kernel or function call
each: the values it reads, then the values it writes), plus the graph's inputs,
outputs and value types. The rules:

* Every graph input has a buffer of its own, numbered first, in input order.
* A step's outputs are allocated *before* its inputs are released, so a step never
  writes into a buffer it reads, unless it says it may: a step whose one result may
  overwrite one of its inputs (``overwrites``: a kernel that reads each element of that
  input before it writes the element there) gives the result that input's buffer when
  the step is the input's last reader, reads it once, and the two have the same dtype
  and size, and neither is a graph input or output.
  A conv whose residual is added this way writes where the residual already sits in
  cache instead of into a cold buffer of its own.
* An intermediate value is released after its last reader (a value nobody reads is
  released right after the step that writes it). A later value of the identical
  dtype and element count takes the lowest-numbered released buffer that fits.
* Graph outputs get a buffer of their own and keep it: a caller can hand output
  buffers back without copying, and nothing overwrites them.
* Values that are read but neither inputs nor written by a step (constants that
  live elsewhere, say) are not planned.

Buffer ids are assigned in order of first allocation, so the same schedule always
gives the same plan. The host graph (``storage_id`` of the graph-executor JSON)
uses this; so can a C body that declares its intermediate buffers.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from byoc.ir import TensorType


@dataclass(frozen=True, slots=True)
class ScheduledOp:
    """One scheduled operation: it reads ``uses`` and writes ``defines``."""

    uses: tuple[Hashable, ...]
    defines: tuple[Hashable, ...]
    overwrites: Hashable | None = None
    """A value of ``uses`` whose buffer the step's one result may take (see the module's rules)."""


@dataclass(frozen=True, slots=True)
class Buffer:
    """One storage buffer: ``size`` elements of ``dtype``."""

    dtype: str
    size: int


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """``storage`` maps every planned value to its buffer id (an index into ``buffers``)."""

    storage: Mapping[Hashable, int]
    buffers: tuple[Buffer, ...]

    @property
    def reused(self) -> int:
        """How many values got a buffer that an earlier value had used."""
        return len(self.storage) - len(self.buffers)


def plan_memory(
    inputs: Sequence[Hashable],
    steps: Sequence[ScheduledOp],
    types: Mapping[Hashable, TensorType],
    outputs: Iterable[Hashable] = (),
) -> MemoryPlan:
    """Plan buffers for ``inputs`` and every value a step defines.

    ``types`` gives each planned value's type; ``outputs`` are the graph's results.
    Raises ValueError when a value is defined twice.
    """
    pinned = set(inputs) | set(outputs)
    last_use: dict[Hashable, int] = {}
    for k, step in enumerate(steps):
        for value in step.uses:
            last_use[value] = k

    storage: dict[Hashable, int] = {}
    buffers: list[Buffer] = []
    free: dict[tuple[str, int], list[int]] = {}

    def fresh(value: Hashable) -> int:
        t = types[value]
        buffers.append(Buffer(t.dtype, t.size))
        return len(buffers) - 1

    for value in inputs:
        if value in storage:
            raise ValueError(f"input {value!r} is listed twice")
        storage[value] = fresh(value)

    def release(value: Hashable) -> None:
        if value not in pinned and value in storage:
            heapq.heappush(free.setdefault(_key(types[value]), []), storage[value])

    for k, step in enumerate(steps):
        inherited = None  # the buffer of an input the result overwrites
        if step.overwrites is not None and _may_overwrite(step, k, last_use, storage, pinned, types):
            inherited = storage[step.overwrites]
            last_use[step.overwrites] = -1  # its buffer passes to the result, unreleased
        for value in step.defines:
            if value in storage:
                raise ValueError(f"value {value!r} is defined twice")
            if inherited is not None:
                storage[value] = inherited
                continue
            pool = None if value in pinned else free.get(_key(types[value]))
            storage[value] = heapq.heappop(pool) if pool else fresh(value)
        for value in step.uses:
            if last_use[value] == k:
                last_use[value] = -1  # released once, however often this step reads it
                release(value)
        for value in step.defines:
            if value not in last_use:
                release(value)
    return MemoryPlan(storage, tuple(buffers))


def _may_overwrite(
    step: ScheduledOp,
    k: int,
    last_use: Mapping[Hashable, int],
    storage: Mapping[Hashable, int],
    pinned: set[Hashable],
    types: Mapping[Hashable, TensorType],
) -> bool:
    """Whether step ``k``'s result may take the buffer of the input it overwrites."""
    taken = step.overwrites
    if len(step.defines) != 1 or taken not in storage or last_use.get(taken) != k:
        return False
    (value,) = step.defines
    return (
        step.uses.count(taken) == 1
        and taken not in pinned
        and value not in pinned
        and _key(types[taken]) == _key(types[value])
    )


def _key(t: TensorType) -> tuple[str, int]:
    return (t.dtype, t.size)
