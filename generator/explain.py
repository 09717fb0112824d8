"""Why each op went where: the text of ``byoc partition --explain`` and ``byoc run --explain``.

For every function, the ops in the order the partitioned program holds them (the names
are those ``byoc partition`` prints), each with the backend that runs it (or the host)
and how: one op alone, or one of a composite (the pattern's name). Under an op, for
every backend before its own in the order of preference (every backend, for an op left
on the host), the first reason that backend did not take it
(:func:`~byoc.generator.partition.annotate.why_not_supported`), and each composite
pattern of those backends that matched the op's neighbourhood but was not taken, with
why (:func:`~byoc.generator.partition.composites.find_composites`). Ops folded at build,
and regions written in the source, are listed for what they are.

The text depends only on the graph and the specs, so it is golden-tested.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from byoc.catalog import Catalog
from byoc.ir import Function, Node, Program
from byoc.spec.backend import BackendSpec

from .partition import placed_function
from .partition.annotate import why_not_supported
from .partition.composites import Refusal
from .placement import placement_summary

HOST = "the host"
FOLDED = "build time"


@dataclass(frozen=True)
class Line:
    """One entry: ``names = ops -> where (how)``, then its reasons, indented."""

    names: str
    ops: str
    where: str | None
    """The backend, None for the host, or :data:`FOLDED`."""
    how: str = ""
    reasons: tuple[str, ...] = ()
    count: int = 1
    """How many ops of the source it stands for."""


def explain(program: Program, specs: Sequence[BackendSpec], catalog: Catalog) -> str:
    """The explanation of partitioning ``program`` over ``specs`` (in order of
    preference), ending with the placement line ``byoc run`` prints."""
    order = ", ".join(s.name for s in specs)
    out = [f"explain: partitioning over {order} (in order of preference)"]
    counts: dict[str | None, int] = {}
    folded = 0
    for fn in program.functions:
        lines = _explain_function(fn, specs, catalog)
        out += ["", f"graph {fn.name}", *_render(lines)]
        for line in lines:
            if line.where == FOLDED:
                folded += 1
            else:
                counts[line.where] = counts.get(line.where, 0) + line.count
    summary = placement_summary(counts) + (f"; {folded} folded at build" if folded else "")
    return "\n".join([*out, "", summary]) + "\n"


def _explain_function(fn: Function, specs: Sequence[BackendSpec], catalog: Catalog) -> list[Line]:
    placed = placed_function(fn, specs, catalog, explain=True)
    types = placed.function.types()
    lines = []
    for node, backend in zip(placed.function.nodes, placed.chosen):
        callee = node.callee
        names = ", ".join(node.outputs)
        if callee is not None:
            how = "region in the source" if callee.composite is None else f"pattern {callee.composite}"
            ops = ", ".join(n.op for n in callee.nodes)
            lines.append(Line(names, ops, callee.backend, how, count=len(callee.nodes)))
        else:
            lines.append(_op_line(node, backend, specs, types, catalog, placed.refusals.get(node.name, ())))
    for node in placed.folded:
        lines.append(Line(", ".join(node.outputs), node.op, FOLDED, "folded: its inputs are constants"))
    return lines


def _op_line(node: Node, backend, specs, types, catalog, refusals: Sequence[Refusal]) -> Line:
    before = specs[: [s.name for s in specs].index(backend)] if backend is not None else specs
    reasons = [f"{s.name}: {why_not_supported(s, node, types, catalog)}" for s in before]
    earlier = {s.name for s in before} | ({backend} if backend is not None else set())
    reasons += [f"{r.backend} pattern {r.pattern}: {r.reason}" for r in refusals if r.backend in earlier]
    return Line(", ".join(node.outputs), node.op, backend, "", tuple(reasons))


def _render(lines: Sequence[Line]) -> list[str]:
    heads = [f"{line.names} = {line.ops}" for line in lines]
    width = min(48, max((len(h) for h in heads), default=0))
    out = []
    for head, line in zip(heads, lines):
        where = f"-> {line.where or HOST}" + (f" ({line.how})" if line.how else "")
        out.append(f"  {head.ljust(width)}  {where}")
        out += [f"      {reason}" for reason in line.reasons]
    return out
