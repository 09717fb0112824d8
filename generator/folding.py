"""Constant folding, IR to IR: a node whose inputs are all constants becomes a
constant, computed once at build time by its op's numpy reference (the oracle every
backend is checked against), so that a dequantized weight, a transposed one or a
reshaped scale costs nothing per run.

It runs after the backends' composite patterns are matched (partitioning's step 0),
so that a pattern that takes a constant through an op keeps it: an int8 backend's
``dequantize_linear(w, scale, zero) -> conv`` receives the int8 weight, and the same
dequantization of a weight that no pattern takes is folded to float. A node stays an
op when its result holds more elements than its inputs together (an ``expand`` of a
scalar to a large tensor is cheaper to run than to store) or is one of the function's
outputs (an output is a computed value, which the runtime writes). Explicit regions
(call nodes) are kept as they are.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from byoc.catalog import Catalog, evaluate_outputs
from byoc.ir import CALL_OP, Constant, Function, Node

SMALL = 64
"""Elements a folded result may hold whatever its inputs hold (a shape's arithmetic)."""


def foldable_nodes(fn: Function) -> list[Node]:
    """The nodes :func:`fold_constants` folds, in order (a chain of them folds through)."""
    sizes = {c.name: c.type.size for c in fn.constants}
    outputs = set(fn.outputs)
    found = []
    for node in fn.nodes:
        if node.op == CALL_OP or not node.inputs or outputs.intersection(node.outputs):
            continue
        if not all(name in sizes for name in node.inputs):
            continue
        if sum(t.size for t in node.types) > max(SMALL, sum(sizes[name] for name in node.inputs)):
            continue
        found.append(node)
        sizes.update((name, t.size) for name, t in zip(node.outputs, node.types))
    return found


def fold_constants(fn: Function, catalog: Catalog) -> Function:
    """``fn`` with its :func:`foldable_nodes` replaced by constants of their values."""
    folding = foldable_nodes(fn)
    if not folding:
        return fn
    constants = {c.name: c for c in fn.constants}
    for node in folding:
        args = [constants[name].array for name in node.inputs]
        with np.errstate(all="ignore"):  # IEEE results, as in the generated C
            results = evaluate_outputs(catalog[node.op], args, node.attrs, node.types)
        for name, type_, value in zip(node.outputs, node.types, results, strict=True):
            constants[name] = Constant(name, type_, value, loc=node.loc)
    gone = {id(node) for node in folding}
    kept = [node for node in fn.nodes if id(node) not in gone]
    used = {name for node in kept for name in node.inputs} | set(fn.outputs)
    read = {name for node in folding for name in node.inputs}
    # What only folded nodes read goes; a constant the graph had and nothing read stays.
    remaining = [c for c in fn.constants if c.name in used or c.name not in read]
    remaining += [constants[o] for node in folding for o in node.outputs if o in used]
    return replace(fn, constants=tuple(remaining), nodes=tuple(kept))
