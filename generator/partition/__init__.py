"""Automatic partitioning, IR to IR: annotate, merge regions, partition.

0. **Composites.** The backends' composite patterns are matched first, largest
   first (:func:`~byoc.generator.partition.composites.merge_composites`, :mod:`byoc.generator.composite`); each match
   becomes a composite call node, which goes to the backend of its pattern, when
   every condition of the pattern holds (``when:``, on shapes too). Then
   every other node of constants only is folded to a constant
   (:mod:`byoc.generator.folding`): what no pattern took is computed once, at build.
1. **Annotate.** Each op node goes to the first backend, in the user's order, whose
   spec supports it: the op at its output dtype and rank, its inputs' dtypes and
   ranks, broadcasting (of ops whose catalog shape rule is elementwise) only if
   the spec declares ``broadcast: true`` (c_source: the macro that runs the node),
   attributes only if the backend's kind can carry them, and only where the
   conditions of its mapping hold (``when:``, :mod:`byoc.spec.conditions`).
   :func:`~byoc.generator.partition.annotate.why_not_supported` says why a backend refuses a node. Nodes no backend
   takes stay on the host. Explicit ``@backend { }`` regions are kept as they are.
2. **Merge.** Walking the nodes in topological order, a node joins the region of
   one of its producers with the same backend, unless that would create a cycle
   through the host: it may not join region R if another of its inputs, outside R,
   depends on R. (Bit sets of the regions each value depends on make the check
   cheap.) Otherwise it starts a region. A region may have several inputs and
   outputs; one whose backend kind allows fewer outputs is split into single ops,
   and the other regions are merged again around them.
3. **Partition.** Each region becomes a call node whose callee is a Function with
   the backend set: its parameters are the values it captures, its outputs the
   values used after it. Constants used only inside one region move into it (when
   the backend's kind embeds constants); one that only such regions use, one of them
   with a composite whose pattern needs it constant (`constants:`), is copied into
   each. Anonymous values (nested calls) that cross
   a region boundary get readable names. The result prints as DSL with explicit
   regions, and lowering gives the regions their symbols.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from byoc.catalog import Catalog
from byoc.ir import Function, Node, Program
from byoc.spec.backend import BackendSpec

from ..folding import fold_constants, foldable_nodes
from .annotate import annotate
from .composites import Refusal, merge_composites
from .merge import merge
from .names import rename_anonymous
from .regions import build_regions, name_crossing_values, oversized_regions


def partition(program: Program, specs: Sequence[BackendSpec], catalog: Catalog | None = None) -> Program:
    """Offload every node some backend of ``specs`` supports, in that order of
    preference. ``catalog`` defaults to the shipped op catalog."""
    if catalog is None:
        from byoc.spec import load_catalog

        catalog = load_catalog()
    return Program(tuple(partition_function(fn, specs, catalog) for fn in program.functions))


@dataclass(frozen=True)
class Placed:
    """A function with its composites merged and its constants folded (steps 0 and 1),
    and the backend of each of its nodes (None: the host)."""

    function: Function
    chosen: list[str | None]
    folded: tuple[Node, ...] = ()
    """The nodes folded into constants at build, as they were."""
    refusals: Mapping[str, list[Refusal]] = field(default_factory=dict)
    """Patterns whose ops matched at a node (by its name) but that were not taken,
    when asked for."""


def placed_function(
    fn: Function, specs: Sequence[BackendSpec], catalog: Catalog, *, explain: bool = False
) -> Placed:
    """Steps 0 and 1 on ``fn``; with ``explain``, also what :class:`Placed` records for
    :mod:`byoc.generator.explain`."""
    refusals: dict[str, list[Refusal]] | None = {} if explain else None
    fn = merge_composites(fn, specs, catalog, refusals)
    fn = rename_anonymous(fn, {name for node in foldable_nodes(fn) for name in node.outputs})
    folded = tuple(foldable_nodes(fn)) if explain else ()
    fn = fold_constants(fn, catalog)
    return Placed(fn, annotate(fn, specs, catalog), folded, refusals or {})


def partition_function(fn: Function, specs: Sequence[BackendSpec], catalog: Catalog) -> Function:
    placed = placed_function(fn, specs, catalog)
    fn, chosen = placed.function, placed.chosen
    if not any(chosen):
        return fn
    by_name = {s.name: s for s in specs}
    single: set[int] = set()
    while True:
        regions = merge(fn, chosen, single)
        too_big = oversized_regions(fn, chosen, regions, by_name)
        if not too_big:
            break
        # Those regions' nodes go alone, and the others merge again without them:
        # the regions they formed may have kept other backends' regions apart.
        single |= {k for k, r in enumerate(regions) if r in too_big}
    fn = name_crossing_values(fn, regions)
    return build_regions(fn, chosen, regions, by_name)
