"""The order of a body that uses names before defining them.

Most text defines every name before using it, and :class:`~byoc.builder.FunctionBuilder`
types such a body in source order. When it does not, ``finish`` sorts the statements
by their dependencies here (reporting an undefined name, then a cycle), and puts the
result in the order that printing and re-reading it would give.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import Location
from .ir import ANON_PREFIX, TensorType

if TYPE_CHECKING:
    from .builder import FunctionBuilder, Statement


def dependency_order(fb: FunctionBuilder, known: dict[str, TensorType]) -> list[Statement]:
    """Statements in dependency order, for a body that uses names before defining
    them (a body in source order is typed as it is read, in FunctionBuilder)."""
    statements = fb.statements
    for st in statements:  # an undefined name is reported before any cycle
        for i, name in enumerate(st.inputs):
            if name not in fb.defined:
                raise fb.undefined_error(name, fb.where(st, i))
    # Depth-first search; a grey node met again closes a cycle.
    producer = {out: st for st in statements for out in st.outputs}
    state: dict[int, int] = {}
    order: list[Statement] = []
    for root in statements:
        if id(root) in state:
            continue
        stack: list[tuple[Statement, int]] = [(root, 0)]
        state[id(root)] = 1
        while stack:
            st, i = stack[-1]
            if i == len(st.inputs):
                stack.pop()
                state[id(st)] = 2
                order.append(st)
                continue
            stack[-1] = (st, i + 1)
            name = st.inputs[i]
            if name not in producer:
                if name not in known:
                    raise fb.undefined_error(name, fb.where(st, i))
                continue
            dep = producer[name]
            mark = state.get(id(dep))
            if mark == 1:
                path = [s.outputs[0] for s, _ in stack]
                cycle = path[path.index(dep.outputs[0]) :] + [dep.outputs[0]]
                raise fb.error(
                    "cycle: " + " -> ".join(clipped([fb.show(n) for n in cycle])),
                    fb.where(st, i),
                    hint="a node cannot depend on its own output, directly or indirectly",
                )
            if mark is None:
                state[id(dep)] = 1
                stack.append((dep, 0))
    return order


def canonical_order(
    fb: FunctionBuilder, order: list[Statement], outputs: Sequence[tuple[str, Location]]
) -> tuple[list[Statement], list[tuple[str, Location]]]:
    """Put a reordered body in the order that printing and re-parsing it gives.

    A nested call's anonymous nodes are read just before the statement that holds
    them; keep them there, and renumber anonymous names in the new order, so that
    ``parse(print(f)) == f`` also holds when the text used names before defining them.
    """
    nested = {n for st in fb.statements for n in st.inputs if n.startswith(ANON_PREFIX)}
    groups: dict[int, list[Statement]] = {}
    pending: list[Statement] = []
    for st in fb.statements:
        pending.append(st)
        if st.outputs[0] not in nested:  # a statement, not a nested call inside one
            groups[id(st)], pending = pending, []
    order = [s for st in order if id(st) in groups for s in groups[id(st)]]
    rename = {
        out: f"{ANON_PREFIX}{k}"
        for k, out in enumerate((o for st in order for o in st.outputs if o.startswith(ANON_PREFIX)), 1)
    }
    for st in order:
        st.outputs = tuple(rename.get(n, n) for n in st.outputs)
        st.inputs = tuple(rename.get(n, n) for n in st.inputs)
    return order, [(rename.get(n, n), loc) for n, loc in outputs]


def clipped(items: list[str], keep: int = 6) -> list[str]:
    """``items``, or its first and last ``keep`` around a count of the rest, so that an
    error about a 10k-node cycle or a 10k-input call stays one readable line."""
    if len(items) <= 2 * keep + 1:
        return items
    return [*items[:keep], f"... ({len(items) - 2 * keep:,} more)", *items[-keep:]]
