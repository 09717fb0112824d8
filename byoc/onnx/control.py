"""ONNX control flow at import: If with a condition known at import, and Loop and Scan
over a trip count known at import, unrolled.

byoc compiles graphs of static shape with no control flow, so a subgraph runs at
import instead: its nodes are imported in place, as if the model had been written
out, with its inputs bound to the values of the enclosing graph. Every value the body
defines gets a name of its own per iteration (``loop_3/2/sum``: node 3, iteration 2),
so that iterations never clash; what the body reads from the enclosing scopes keeps
its name. An If takes the branch its condition names; a Loop runs until its trip count
or until its body's condition, which must then be known at import, says stop; a Scan
runs once per slice of its scan inputs. Scan outputs (the per-iteration values) are
stacked along their axis.

A body that depends on what only the run knows (a Loop's condition computed from the
inputs, a trip count that is a model input: byoc specialises the model to its value)
is refused at its node, and so is an unrolled loop of more than :data:`UNROLL_LIMIT`
iterations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .importer import Importer
    from .ops import OnnxOp

IN_PLACE = frozenset(("branch", "loop", "scan"))
"""The handler kinds (byoc/onnx/ops.yaml) of this module. Their nodes are imported in
place even when all they read is constant, their subgraphs' nodes then folding one
by one: ONNX's reference evaluator, which folds other constant nodes, stacks a
Loop's rank-0 scan outputs as shape [N, 1] where ONNX says [N]."""

UNROLL_LIMIT = 1024
"""The most iterations an unrolled Loop or Scan may take: each iteration is a copy of
its body in the imported graph."""


def inline(imp: Importer, graph, bound: list[str], prefix: str) -> list[str]:
    """Import the nodes of subgraph ``graph`` here, its inputs bound to the ONNX values
    ``bound`` (in order) and every value it defines renamed under ``prefix``; the ONNX
    names of its outputs."""
    from .values import tensor_array

    if len(bound) != len(graph.input):
        raise imp.invalid(
            f"its subgraph {graph.name!r} takes {len(graph.input)} input(s), given {len(bound)}"
        )
    rename = {value.name: outer for value, outer in zip(graph.input, bound)}
    for tensor in graph.initializer:
        rename[tensor.name] = prefix + tensor.name
        imp.consts[prefix + tensor.name] = tensor_array(imp.onnx, tensor, imp.path)
    nodes = []
    for node in graph.node:
        copy = imp.onnx.NodeProto()
        copy.CopyFrom(node)
        for k, name in enumerate(copy.input):
            copy.input[k] = rename.get(name, name)
        for k, name in enumerate(copy.output):
            if name:
                rename[name] = copy.output[k] = prefix + name
        if copy.attribute and any(a.HasField("g") or a.graphs for a in copy.attribute):
            _rename_free(imp, copy, rename)
        nodes.append(copy)
    imp.used |= {i for n in nodes for i in n.input} | {rename.get(o.name, o.name) for o in graph.output}
    for node in nodes:
        imp.import_node(node)
    return [rename.get(o.name, o.name) for o in graph.output]


def _rename_free(imp: Importer, node, rename: dict[str, str]) -> None:
    """In the subgraphs of ``node`` (a nested If or Loop), the values read from the
    enclosing body take their renamed names."""

    free = {name: rename[name] for name in outer_names(node) if name in rename and rename[name] != name}
    for attribute in node.attribute:
        for graph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
            for inner in graph.node:
                for k, name in enumerate(inner.input):
                    if name in free:
                        inner.input[k] = free[name]
                if inner.attribute:
                    _rename_free(imp, inner, free)
            for output in graph.output:
                if output.name in free:
                    output.name = free[output.name]


def bind(imp: Importer, out: str, name: str) -> None:
    """ONNX value ``out`` of the node is the value ``name``."""
    if name in imp.consts:
        imp.consts[out] = imp.consts[name]
        return
    imp.alias(out, imp.value(name))
    known = imp.type_of(name)
    if known[0] is not None:
        imp.types[out] = known


def _known_bool(imp: Importer, name: str, what: str) -> bool:
    """The value of a condition that must be known at import."""
    if name not in imp.consts:
        raise imp.not_constant(name, what)
    return _condition(imp, imp.consts[name])


def _condition(imp: Importer, value) -> bool:
    """A condition input's one value."""
    value = np.asarray(value)
    if value.size != 1:
        raise imp.invalid(f"its condition holds {value.size} values, not one")
    return bool(value.ravel()[0])


def _prefix(imp: Importer, node, *steps) -> str:
    """Where the values of one import of ``node``'s subgraph are named."""
    label = node.name or node.output[0]
    return "/".join([f"{node.op_type.lower()}_{imp.index}_{label}", *map(str, steps)]) + "/"


def branch(imp: Importer, node, e: OnnxOp) -> None:
    """If: the branch that its condition, known at import, names, in place."""
    imp.check_attrs(node, {"then_branch", "else_branch"})
    taken = "then_branch" if _condition(imp, imp.const_input(0, "condition")) else "else_branch"
    graph = imp.attr(taken)
    outputs = inline(imp, graph, [], _prefix(imp, node, taken))
    if len(outputs) != len(node.output):
        raise imp.invalid(f"its {taken} has {len(outputs)} output(s), the node {len(node.output)}")
    for out, name in zip(node.output, outputs):
        if out:
            bind(imp, out, name)


def _stack(imp: Importer, e: OnnxOp, values: list[str], axis: int, out: str) -> None:
    """ONNX value ``out``: ``values`` (one per iteration, of one shape) stacked along a
    new ``axis``."""
    if all(v in imp.consts for v in values):
        imp.consts[out] = np.stack([np.asarray(imp.consts[v]) for v in values], axis=axis)
        return
    rank = len(imp.shape(values[0]))
    axis = axis % (rank + 1)
    parts = [imp.emit(e.roles["stack"], [imp.value(v)], {"axes": [axis]}) for v in values]
    if len(parts) == 1:
        imp.emit(e.roles["single"], parts, out=out)
    else:
        imp.emit(e.roles["join"], parts, {"axis": axis}, out=out)


def loop(imp: Importer, node, e: OnnxOp) -> None:
    """Loop: its body unrolled, once per iteration, while the trip count (input 0) and
    the body's condition (known at import) allow."""
    imp.check_attrs(node, {"body"})
    body = imp.attr("body")
    given = imp.const_input(0, "Loop trip count")
    trips = None if given is None else int(np.ravel(given)[0])
    given_condition = imp.const_input(1, "condition")
    keep_going = True if given_condition is None else _condition(imp, given_condition)
    carried = list(node.input[2:])
    n_scan = len(body.output) - 1 - len(carried)
    if n_scan < 0:
        raise imp.invalid(
            f"its body has {len(body.output)} outputs, fewer than 1 + {len(carried)} carried values"
        )
    scans: list[list[str]] = [[] for _ in range(n_scan)]
    step = 0
    while keep_going and (trips is None or step < trips):
        if step >= UNROLL_LIMIT:
            raise imp.unsupported(
                f"a Loop of more than {UNROLL_LIMIT} iterations (byoc unrolls it)",
                hint="byoc unrolls loops at import; export the model with a shorter loop",
            )
        counter = imp.names.fresh("iteration")
        imp.consts[counter] = np.asarray(step, np.int64)
        condition = imp.names.fresh("condition")
        imp.consts[condition] = np.asarray(True)
        outputs = inline(imp, body, [counter, condition, *carried], _prefix(imp, node, step))
        keep_going = _known_bool(imp, outputs[0], "condition of its body")
        carried = outputs[1 : 1 + len(carried)]
        for k, name in enumerate(outputs[1 + len(carried) :]):
            scans[k].append(name)
        step += 1
    for out, name in zip(node.output, carried):
        if out:
            bind(imp, out, name)
    for out, values in zip(node.output[len(carried) :], scans):
        if out and not values:
            raise imp.unsupported("a Loop of no iterations with scan outputs (their shape is unknown)")
        if out:
            _stack(imp, e, values, 0, out)


def scan(imp: Importer, node, e: OnnxOp) -> None:
    """Scan (opset 9 on): the body once per slice of the scan inputs along their
    axes (reversed where their direction is 1), its states carried from one
    iteration to the next; the scan outputs stacked along theirs."""
    allowed = {"body", "num_scan_inputs", "scan_input_axes", "scan_input_directions"}
    imp.check_attrs(node, allowed | {"scan_output_axes", "scan_output_directions"})
    if imp.opset < 9:
        raise imp.unsupported(
            "Scan before opset 9 (its batch axis and sequence_lens)",
            hint="convert the model to opset 9 or newer",
        )
    body = imp.attr("body")
    n_in = int(imp.attr("num_scan_inputs"))
    states, inputs = list(node.input[: len(node.input) - n_in]), list(node.input[len(node.input) - n_in :])
    in_axes = list(imp.attr("scan_input_axes", [0] * n_in))
    in_dirs = list(imp.attr("scan_input_directions", [0] * n_in))
    n_out = len(body.output) - len(states)
    out_axes = list(imp.attr("scan_output_axes", [0] * n_out))
    out_dirs = list(imp.attr("scan_output_directions", [0] * n_out))
    lengths = set()
    for k, name in enumerate(inputs):
        rank = len(imp.shape(name))
        if not -rank <= in_axes[k] < rank:
            raise imp.invalid(
                f"its scan_input_axes {in_axes} are out of range for input {name!r} of rank {rank}"
            )
        in_axes[k] %= rank
        lengths.add(imp.shape(name)[in_axes[k]])
    if len(lengths) != 1:
        raise imp.invalid(f"its scan inputs have different lengths along their axes: {sorted(lengths)}")
    (length,) = lengths
    if length > UNROLL_LIMIT:
        raise imp.unsupported(f"a Scan of more than {UNROLL_LIMIT} iterations (byoc unrolls it)")
    scans: list[list[str]] = [[] for _ in range(n_out)]
    for step in range(length):
        slices = []
        for k, name in enumerate(inputs):
            at = length - 1 - step if in_dirs[k] else step
            slices.append(_slice(imp, e, name, at, in_axes[k]))
        outputs = inline(imp, body, [*states, *slices], _prefix(imp, node, step))
        states = outputs[: len(states)]
        for k, value in enumerate(outputs[len(states) :]):
            scans[k].append(value)
    for out, name in zip(node.output, states):
        if out:
            bind(imp, out, name)
    for k, (out, values) in enumerate(zip(node.output[len(states) :], scans)):
        if out and not values:
            raise imp.unsupported("a Scan of no iterations with scan outputs (their shape is unknown)")
        if out:
            _stack(imp, e, values[::-1] if out_dirs[k] else values, out_axes[k], out)


def _slice(imp: Importer, e: OnnxOp, name: str, at: int, axis: int) -> str:
    """The ONNX name of ``name``'s slice ``at`` along ``axis``, the axis dropped."""
    sliced = imp.names.fresh("slice")
    if name in imp.consts:
        imp.consts[sliced] = np.take(imp.consts[name], at, axis=axis)
        return sliced
    index = imp.constant(np.asarray(at, np.int64), imp.names.fresh("at"))
    imp.emit(e.op, [imp.value(name), index], {"axis": axis}, out=sliced)
    return sliced


def outer_names(node) -> set[str]:
    """The values that ``node``'s subgraphs (an If's branches, a Loop's or Scan's body,
    and theirs in turn) read from the scopes around ``node``."""
    found: set[str] = set()
    for attribute in node.attribute:
        for graph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
            defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
            for inner in graph.node:
                read = {i for i in inner.input if i} | outer_names(inner)
                found |= read - defined
                defined |= set(inner.output)
            found |= {o.name for o in graph.output} - defined
    return found
