"""Where a ``c_fused`` function's buffers live: the workspace slot of each value one nest
writes and a later one reads, and of each staged input (:mod:`.staging`), planned by
:mod:`byoc.generator.memory_plan` over the nests so that values whose lifetimes do not
overlap share memory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from byoc.ir import TensorType

from ..memory_plan import ScheduledOp, plan_memory
from .staging import Staged

if TYPE_CHECKING:
    from .nests import Nest, Piece


def buffer_slots(
    units: Sequence[Piece],
    nests: Sequence[Nest],
    nest_of: Mapping[str, int],
    buffered: Mapping[str, TensorType],
    staged: Sequence[Staged] = (),
) -> dict[str, int]:
    """The workspace slot of each buffered value (:mod:`byoc.generator.memory_plan` over
    the nests: a nest reads the buffers of earlier nests and writes its own), so values
    whose lifetimes do not overlap share memory. A staged input's buffer (keyed by
    ``Staged.key``) is written by a step of its own just before its nest, which reads it."""
    types = {**buffered, **{st.key: st.type for st in staged}}
    steps = []
    for n, nest in enumerate(nests):
        nodes = [units[k].node for k in nest.members]
        reads = [name for node in nodes for name in node.inputs if name in buffered and nest_of[name] != n]
        mine = [st for st in staged if st.nest == n]
        if mine:
            sources = [st.value for st in mine if st.value in buffered]
            steps.append(ScheduledOp(tuple(dict.fromkeys(sources)), tuple(st.key for st in mine)))
        writes = [node.name for node in nodes if node.name in buffered]
        steps.append(ScheduledOp(tuple(dict.fromkeys([*reads, *(st.key for st in mine)])), tuple(writes)))
    return dict(plan_memory((), steps, types).storage)
