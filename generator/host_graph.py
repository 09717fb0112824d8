"""The host graph: each lowered host function becomes a graph in the graph-executor JSON
format of TVM's BYOC guide (``get_whole_graph_json``), ``<fn>.graph.json``, plus the
host functions it runs, ``<fn>.host.graph``.

The graph JSON::

    {"nodes": [{"op": "null", "name": "x", "inputs": []}, ...,
               {"op": "tvm_op", "name": "json_0",
                "attrs": {"num_outputs": "1", "num_inputs": "4", "func_name": "json_0",
                          "flatten_data": "0", "source": "g.graph:8"},
                "inputs": [[0, 0, 0], [1, 0, 0], ...]}, ...],
     "arg_nodes": [...], "node_row_ptr": [...], "heads": [[nid, index, 0], ...],
     "attrs": {"shape": ["list_shape", [...]], "dltype": ["list_str", [...]],
               "storage_id": ["list_int", [...]]},
     "metadata": {"function": "main", "source": "g.graph:1", "host_functions": "main.host.graph"}}

* one ``null`` node per parameter (the ``arg_nodes``), in parameter order;
* one ``tvm_op`` node per external call, whose ``func_name`` is the callee's symbol;
* one ``tvm_op`` node per *host function*: connected host ops are fused, like TVM's
  ``fused_add_subtract_concatenate``, unless that would make a cycle through an
  external call (see :func:`host_units`); each is printed as a ``graph host_<k>_<ops>(...)`` in the graph
  DSL into ``<fn>.host.graph``, which the runtime parses back and evaluates with
  numpy. Its parameters are the ``inputs`` of the node, in order, and its results
  the node's outputs;
* a constant that an external call or the result needs directly gets a host
  function of its own that returns it (``host_<k>_const``); host functions that
  use a constant embed it;
* ``node_row_ptr`` counts every output of every node, ``heads`` are ``[nid, index, 0]``;
* ``attrs`` give the ``shape``, ``dltype`` and ``storage_id`` of every entry; the
  storage ids come from :mod:`byoc.generator.memory_plan`, so entries whose
  lifetimes do not overlap share a buffer (inputs and outputs never do).

Provenance: every ``tvm_op`` carries ``attrs.source`` (``file:line``; node attrs
are strings, as in TVM), the graph a ``metadata`` object after TVM's own keys
(function name, source, host functions file), and every host function a ``#``
comment. TVM's keys and their order are those of the guide. Host ops whose results
nobody uses are dropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from byoc.catalog import Catalog
from byoc.errors import Location
from byoc.grammar.graph_printer import print_function, weights_declaration
from byoc.grammar.weights_file import externalize
from byoc.ir import ANON_PREFIX, CALL_OP, Constant, Function, Node, Param, Program, TensorType

from .artifacts import LARGE_CONSTANT_ELEMENTS, Artifact, Role, weights_artifact
from .json_codegen import Inline, dumps
from .memory_plan import MemoryPlan, ScheduledOp, plan_memory

HOST_PREFIX = "host"
MAX_NAME_OPS = 4
"""A fused host function is named after at most this many distinct ops."""


@dataclass(frozen=True, slots=True)
class HostUnit:
    """One ``tvm_op`` of the host graph: an external call, a fused group of host ops,
    or a provider of one constant."""

    name: str
    """The ``func_name``: a callee's symbol or a host function's name."""
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[Node, ...]
    function: Function | None = None
    """The host function (None for an external call)."""
    source: str = ""


@dataclass(frozen=True, slots=True)
class HostGraph:
    graph: dict[str, Any]
    units: tuple[HostUnit, ...]
    plan: MemoryPlan

    @property
    def host_functions(self) -> tuple[Function, ...]:
        return tuple(u.function for u in self.units if u.function is not None)


def generate(
    hosts: Sequence[Function], catalog: Catalog | None = None, *, indent: int = 2
) -> tuple[Artifact, ...]:
    """``<fn>.graph.json`` (and ``<fn>.host.graph`` when it has host ops) for every host."""
    taken = {node.callee.name for fn in hosts for node in fn.nodes if node.callee is not None}
    taken.update(fn.name for fn in hosts if fn.name)
    counter = itertools.count()
    artifacts = []
    for fn in hosts:
        hg = host_graph(fn, taken, counter)
        artifacts.append(Artifact(f"{fn.name}.graph.json", dumps(hg.graph, indent), Role.HOST_GRAPH))
        weights = f"{fn.name}.host.npz"
        text, data = host_functions_text(fn, hg.units, weights)
        if text:
            artifacts.append(Artifact(f"{fn.name}.host.graph", text, Role.HOST_FUNCTIONS))
        if data is not None:
            artifacts.append(weights_artifact(weights, data, None))
    return tuple(artifacts)


def host_graph(
    fn: Function, taken: set[str] | None = None, counter: Iterator[int] | None = None
) -> HostGraph:
    """The graph-executor JSON of host function ``fn`` (as a dict) and its units.

    ``taken`` holds the names host functions must avoid (symbols); new names are
    added to it. ``counter`` numbers host functions (shared across a program).
    """
    taken = set() if taken is None else taken
    counter = itertools.count() if counter is None else counter
    units = host_units(fn, taken, counter)
    types = fn.types()

    nodes: list[Inline] = []
    entries: dict[str, list[int]] = {}
    row_ptr = [0]
    shapes: list[list[int]] = []
    dtypes: list[str] = []
    order: list[str] = []

    def add(node: dict[str, Any], outputs: Sequence[str]) -> None:
        nid = len(nodes)
        nodes.append(Inline(node))
        for index, name in enumerate(outputs):
            entries[name] = [nid, index, 0]
            shapes.append(list(types[name].shape))
            dtypes.append(types[name].dtype)
            order.append(name)
        row_ptr.append(row_ptr[-1] + len(outputs))

    for p in fn.params:
        add({"op": "null", "name": p.name, "inputs": []}, (p.name,))
    for unit in units:
        attrs = {
            "num_outputs": str(len(unit.outputs)),
            "num_inputs": str(len(unit.inputs)),
            "func_name": unit.name,
            "flatten_data": "0",
            "source": unit.source,
        }
        inputs = [entries[name] for name in unit.inputs]
        add({"op": "tvm_op", "name": unit.name, "attrs": attrs, "inputs": inputs}, unit.outputs)

    plan = plan_memory(
        [p.name for p in fn.params],
        [ScheduledOp(u.inputs, u.outputs) for u in units],
        types,
        fn.outputs,
    )
    graph = {
        "nodes": nodes,
        "arg_nodes": list(range(len(fn.params))),
        "node_row_ptr": row_ptr,
        "heads": [entries[name] for name in fn.outputs],
        "attrs": {
            "shape": ["list_shape", shapes],
            "dltype": ["list_str", dtypes],
            "storage_id": ["list_int", [plan.storage[name] for name in order]],
        },
        "metadata": {
            "function": fn.name,
            "source": _where(fn.loc),
            "host_functions": f"{fn.name}.host.graph" if any(u.function for u in units) else None,
        },
    }
    return HostGraph(graph, tuple(units), plan)


def host_functions_text(fn: Function, units: Iterable[HostUnit], weights: str) -> tuple[str, bytes | None]:
    """The host functions of ``fn`` as graph DSL text, each after a comment ("" if
    none), and the bytes of the weights file ``weights`` that its constants of more
    than :data:`~byoc.generator.artifacts.LARGE_CONSTANT_ELEMENTS` elements are read
    from (None if it has none)."""
    picked = [u for u in units if u.function is not None]
    if not picked:
        return "", None
    program, data = externalize(
        Program(tuple(u.function for u in picked if u.function is not None)), weights, LARGE_CONSTANT_ELEMENTS
    )
    blocks = []
    for unit, function in zip(picked, program.functions):
        if unit.nodes:
            what = ", ".join(n.op for n in unit.nodes) + f": host ops of graph {fn.name}"
        else:
            what = f"constant {unit.outputs[0]} of graph {fn.name}, as a value for a call or the result"
        blocks.append(
            _comment(f"{what} at {unit.source}") + print_function(function, external=data is not None)
        )
    header = (
        _comment(f"Host functions of graph {fn.name}, called by the tvm_op nodes of {fn.name}.graph.json.")
        + "# Generated by byoc; the runtime evaluates them with numpy.\n\n"
    )
    return header + (weights_declaration(program) if data is not None else "") + "\n".join(blocks), data


def _comment(text: str) -> str:
    """A one-line DSL comment: a line break in ``text`` (a file path can hold one)
    would end the comment and let the rest be read as DSL, so breaks are escaped."""
    return "# " + text.replace("\n", "\\n").replace("\r", "\\r") + "\n"


def host_units(fn: Function, taken: set[str], counter: Iterator[int]) -> list[HostUnit]:
    """Split ``fn``'s nodes into units, in an order the executor can run them.

    Host ops are fused by *stage*. An external call's stage is the number of calls on
    the longest path up to it (itself included); a host op is put as late as it can
    go: just before the first stage of a call that needs it, otherwise last. Host
    ops joined by an edge and in the same stage form one host function. Stages only
    grow along edges and strictly grow through a call, so no path leaves a group
    and comes back: the fused graph has no cycle. The run order is: for each stage,
    its calls, then its host functions, each by source order.
    """
    live = _live_nodes(fn)
    nodes = [node for k, node in enumerate(fn.nodes) if k in live]
    producer = {name: k for k, node in enumerate(nodes) for name in node.outputs}
    preds = [sorted({producer[x] for x in node.inputs if x in producer}) for node in nodes]
    succs: list[list[int]] = [[] for _ in nodes]
    for k, ps in enumerate(preds):
        for p in ps:
            succs[p].append(k)
    is_call = [node.op == CALL_OP for node in nodes]

    depth = [0] * len(nodes)
    for k in range(len(nodes)):
        depth[k] = max((depth[p] for p in preds[k]), default=0) + (1 if is_call[k] else 0)
    last = max((depth[k] for k in range(len(nodes)) if is_call[k]), default=0)
    stage = list(depth)
    for k in reversed(range(len(nodes))):
        if not is_call[k]:
            stage[k] = min((depth[s] - 1 if is_call[s] else stage[s] for s in succs[k]), default=last)

    parent = list(range(len(nodes)))

    def find(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for k in range(len(nodes)):
        for p in preds[k]:
            if not is_call[k] and not is_call[p] and stage[p] == stage[k]:
                a, b = find(p), find(k)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for k in range(len(nodes)):
        groups.setdefault(k if is_call[k] else find(k), []).append(k)
    ordered = sorted(groups.values(), key=lambda g: (stage[g[0]], not is_call[g[0]], g[0]))

    consumers: dict[str, set[int]] = {}
    for k, node in enumerate(nodes):
        for name in node.inputs:
            consumers.setdefault(name, set()).add(k)
    results = set(fn.outputs)
    constants = {c.name: c for c in fn.constants}
    types = fn.types()
    all_names = set(types)

    units: list[HostUnit] = []
    provided: list[Constant] = [
        c for c in fn.constants if c.name in results or any(is_call[k] for k in consumers.get(c.name, ()))
    ]
    for c in provided:
        name = _fresh(f"{HOST_PREFIX}_{next(counter)}_const", taken)
        function = Function(name, (), (c,), (), (c.name,))
        units.append(HostUnit(name, (), (c.name,), (), function, _where(c.loc)))
    for group in ordered:
        members = set(group)
        group_nodes = tuple(nodes[k] for k in group)
        if is_call[group[0]]:
            node = group_nodes[0]
            assert node.callee is not None and node.callee.name is not None
            units.append(
                HostUnit(node.callee.name, node.inputs, node.outputs, group_nodes, None, _where(node.loc))
            )
            continue
        defined = {name for node in group_nodes for name in node.outputs}
        inputs = tuple(
            dict.fromkeys(
                x for node in group_nodes for x in node.inputs if x not in defined and x not in constants
            )
        )
        outputs = tuple(
            name
            for node in group_nodes
            for name in node.outputs
            if name in results or any(k not in members for k in consumers.get(name, ()))
        )
        used_consts = {x for node in group_nodes for x in node.inputs if x in constants}
        name = _fresh(_group_name(next(counter), group_nodes), taken)
        function = _host_function(fn, types, name, inputs, group_nodes, outputs, used_consts, all_names)
        units.append(HostUnit(name, inputs, outputs, group_nodes, function, _lines(group_nodes)))
    return units


def _live_nodes(fn: Function) -> set[int]:
    """Indices of the nodes the outputs need, plus every external call."""
    needed = set(fn.outputs)
    live = set()
    for k in reversed(range(len(fn.nodes))):
        node = fn.nodes[k]
        if node.op == CALL_OP or needed.intersection(node.outputs):
            live.add(k)
            needed.update(node.inputs)
    return live


def _host_function(
    fn: Function,
    types: Mapping[str, TensorType],
    name: str,
    inputs: tuple[str, ...],
    nodes: tuple[Node, ...],
    outputs: tuple[str, ...],
    used_consts: set[str],
    all_names: set[str],
) -> Function:
    """A standalone DSL function for one group; anonymous names it cannot print as
    nested calls (parameters, or used more than once) get fresh identifiers."""
    uses: dict[str, int] = {}
    for node in nodes:
        for x in node.inputs:
            uses[x] = uses.get(x, 0) + 1
    for x in outputs:
        uses[x] = uses.get(x, 0) + 1
    rename: dict[str, str] = {}
    for x in (*inputs, *(n for node in nodes for n in node.outputs)):
        if x.startswith(ANON_PREFIX) and (x in inputs or uses.get(x, 0) != 1):
            rename[x] = _fresh("t" + x[len(ANON_PREFIX) :], all_names)

    def r(x: str) -> str:
        return rename.get(x, x)

    params = tuple(Param(r(x), types[x]) for x in inputs)
    constants = tuple(c for c in fn.constants if c.name in used_consts)
    body = tuple(
        Node(tuple(map(r, n.outputs)), n.op, tuple(map(r, n.inputs)), n.types, n.attrs, None, n.loc)
        for n in nodes
    )
    return Function(name, params, constants, body, tuple(map(r, outputs)))


def _group_name(k: int, nodes: Sequence[Node]) -> str:
    ops = list(dict.fromkeys(n.op for n in nodes))
    if len(ops) > MAX_NAME_OPS:
        ops = [*ops[:MAX_NAME_OPS], "etc"]
    return f"{HOST_PREFIX}_{k}_" + "_".join(ops)


def _fresh(base: str, taken: set[str]) -> str:
    name, j = base, 1
    while name in taken:
        name, j = f"{base}_{j}", j + 1
    taken.add(name)
    return name


def _where(loc: Location | None) -> str:
    if loc is None:
        return "<unknown>"
    return f"{loc.file or '<string>'}:{loc.line}"


def _lines(nodes: Sequence[Node]) -> str:
    """``file:l1,l2`` for the distinct source lines of a group's nodes."""
    locs = [n.loc for n in nodes if n.loc is not None]
    if not locs:
        return "<unknown>"
    lines = sorted({loc.line for loc in locs})
    return f"{locs[0].file or '<string>'}:" + ",".join(map(str, lines))
