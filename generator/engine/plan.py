"""Plan one external function for the engine codegen: its layers and buffer ids.

The engine runs a *layer graph*: one line per layer, naming the buffer it writes
and the buffers it reads by id. Ids are assigned here:

- ``0 .. n_in-1``: the function's inputs, in parameter order;
- ``n_in .. n_in+n_out-1``: its outputs, in order (a node that computes an output
  writes the caller's buffer directly);
- then the constants the function uses, as static arrays the generated code passes;
- then intermediate buffers, which the engine allocates. An intermediate id is
  reused once its last reader has run, by a later buffer of the same element count
  (never by a layer that still reads it), so long chains need few buffers.

Outputs that no layer writes (a parameter or constant returned as is, or a value
returned twice) become copies that the generated wrapper makes after the engine ran.

Everything the engine cannot run is a located GraphError: an op without a layer at
its rank, a dtype other than the backend's one, a layer arity mismatch, or inputs of
an elementwise op whose shape differs from the output's (engine layers do not
broadcast). A layer line carries each input's extents and the op's attributes as
the kernel uses them (:func:`byoc.attr_values.resolve`).
"""

from __future__ import annotations

from dataclasses import dataclass

from byoc.attr_values import AttrView, resolve
from byoc.catalog import Catalog
from byoc.errors import GraphError
from byoc.ir import CALL_OP, Constant, Function, Node, Param, TensorType
from byoc.spec.backend import BackendSpec, LayerDef
from byoc.spec.bindings import LayerBinding

from ..memory_plan import ScheduledOp, plan_memory


@dataclass(frozen=True, slots=True)
class PlannedLayer:
    """One line of the layer graph: ``layer`` writes buffer ``output`` from ``inputs``."""

    node: Node
    layer: LayerDef
    output: int
    inputs: tuple[int, ...]
    dims: tuple[int, ...]
    in_dims: tuple[tuple[int, ...], ...]
    attrs: AttrView
    """The op's attributes as the kernel uses them."""


@dataclass(frozen=True, slots=True)
class Copy:
    """After the engine ran, output ``output`` gets a copy of a parameter, a constant or
    an earlier output: ``source`` is ``("param", i)``, ``("const", k)`` or ``("output", j)``."""

    output: int
    source: tuple[str, int]
    type: TensorType


@dataclass(frozen=True, slots=True)
class EnginePlan:
    fn: Function
    dtype: str
    constants: tuple[tuple[Constant, int], ...]
    """The constants the function uses, each with its buffer id."""
    layers: tuple[PlannedLayer, ...]
    copies: tuple[Copy, ...]
    intermediates: int
    """How many distinct intermediate buffer ids the layer graph uses."""

    @property
    def num_args(self) -> int:
        """Buffers the generated code passes to the engine: inputs, outputs, constants."""
        return len(self.fn.params) + len(self.fn.outputs) + len(self.constants)


def plan(fn: Function, spec: BackendSpec, catalog: Catalog) -> EnginePlan:
    """The layer graph of ``fn`` on ``spec``'s engine; raises a located GraphError."""
    dtype = spec.dtypes[0]
    _check_values(fn, spec, dtype)
    n_in, n_out = len(fn.params), len(fn.outputs)
    producers = {name for node in fn.nodes for name in node.outputs}

    ids: dict[str, int] = {p.name: i for i, p in enumerate(fn.params)}
    first_output: dict[str, int] = {}
    for j, name in enumerate(fn.outputs):
        first_output.setdefault(name, j)

    used_consts = _used_constants(fn)
    constants = tuple((c, n_in + n_out + k) for k, c in enumerate(used_consts))
    ids.update((c.name, i) for c, i in constants)

    # Intermediate ids come from the shared lifetime plan (generator/memory_plan.py):
    # an id is reused once its last reader ran, never by a layer that still reads it.
    # Empty tensors compute nothing, and so do their readers: they get no layer.
    live = [node for node in fn.nodes if node.type.size]
    memory = plan_memory(
        (), [ScheduledOp(n.inputs, n.outputs) for n in live], {n.name: n.type for n in live}, fn.outputs
    )
    first_intermediate = n_in + n_out + len(constants)
    intermediate: dict[int, int] = {}  # plan buffer -> engine id, in order of first use
    layers: list[PlannedLayer] = []
    types = fn.types()
    for node in fn.nodes:
        layer = _layer_of(node, fn, types, spec, dtype, catalog)
        if not node.type.size:
            continue
        if node.name in first_output:
            out = n_in + first_output[node.name]
        else:
            out = intermediate.setdefault(memory.storage[node.name], first_intermediate + len(intermediate))
        in_types = [types[i] for i in node.inputs]
        attrs = resolve(catalog[node.op], in_types, node.attrs)
        in_dims = tuple(t.shape for t in in_types)
        layers.append(
            PlannedLayer(
                node, layer, out, tuple(ids[i] for i in node.inputs), node.type.shape, in_dims, attrs
            )
        )
        ids[node.name] = out

    copies = []
    for j, name in enumerate(fn.outputs):
        t = fn.output_types[j]
        if t.size == 0 or (name in producers and first_output[name] == j):
            continue  # empty, or written by its layer
        source = ("output", first_output[name]) if name in producers else _value_source(name, fn)
        copies.append(Copy(j, source, t))
    return EnginePlan(fn, dtype, constants, tuple(layers), tuple(copies), len(intermediate))


def _value_source(name: str, fn: Function) -> tuple[str, int]:
    for i, p in enumerate(fn.params):
        if p.name == name:
            return ("param", i)
    for k, c in enumerate(_used_constants(fn)):
        if c.name == name:
            return ("const", k)
    raise AssertionError(f"output {name!r} of {fn.name} is not defined")


def _used_constants(fn: Function) -> tuple[Constant, ...]:
    used = {name for node in fn.nodes for name in node.inputs} | set(fn.outputs)
    return tuple(c for c in fn.constants if c.name in used)


def _check_values(fn: Function, spec: BackendSpec, dtype: str) -> None:
    values: tuple[Param | Constant, ...] = (*fn.params, *fn.constants)
    for v in values:
        if v.type.dtype != dtype:
            what = "input" if isinstance(v, Param) else "constant"
            raise GraphError(
                f"backend {spec.name} cannot take {what} {v.name}: {v.type}",
                v.loc or fn.loc,
                hint=f"an engine backend has one dtype; {spec.name} runs {dtype} only",
            )


def _layer_of(
    node: Node, fn: Function, types: dict[str, TensorType], spec: BackendSpec, dtype: str, catalog: Catalog
) -> LayerDef:
    """The engine layer that runs ``node`` (``types``: every value of ``fn`` by name,
    built once per function: building it per node made planning quadratic)."""
    where = node.loc or fn.loc
    if node.op == CALL_OP:
        raise GraphError("a region cannot contain another region", where, hint="move the inner region out")
    if len(node.outputs) != 1:
        raise GraphError(f"engine layers have one output; {node.op} has {len(node.outputs)}", where)
    t = node.type
    binding = spec.ops.get(node.op)
    if not isinstance(binding, LayerBinding):
        raise GraphError(
            f"backend {spec.name} has no op {node.op!r}",
            where,
            hint=f"{spec.name} supports {', '.join(spec.ops)}; move {node.op} out of the region",
        )
    name = binding.construct(t.rank)
    if name is None or t.rank not in spec.ranks:
        ranks = ", ".join(str(r) for r in spec.ranks if binding.supports(r))
        raise GraphError(
            f"backend {spec.name} has no layer for {node.op} at rank {t.rank} ({t})",
            where,
            hint=f"{spec.name} runs {node.op} at rank {ranks}; add a layer to the spec or move it out",
        )
    if t.dtype != dtype:
        raise GraphError(
            f"backend {spec.name} cannot run {node.op} on {t}",
            where,
            hint=f"an engine backend has one dtype; {spec.name} runs {dtype} only",
        )
    layer = spec.layers[name]
    if len(node.inputs) != layer.inputs:
        raise GraphError(
            f"layer {name} of backend {spec.name} takes {layer.inputs} input(s); {node.op} has {len(node.inputs)}",
            where,
        )
    for arg in node.inputs if catalog[node.op].rule.elementwise else ():
        if types[arg] != t:
            raise GraphError(
                f"backend {spec.name} cannot broadcast: input {_shown(arg)} of {node.op} is {types[arg]}, its output {t}",
                where,
                hint="engine layers read inputs of the output's shape; broadcast on the host, or pass full-shape tensors",
            )
    return layer


def _shown(name: str) -> str:
    return "(a nested call)" if name.startswith("%") else name
