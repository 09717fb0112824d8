"""The C text of one external function, for the ``c_source`` codegen.

For a function with symbol ``<sym>`` it writes, as the BYOC guide does:

- ``<sym>_const_<j>``: each constant, as a ``static const`` C array;
- ``<sym>_<k>``: one kernel per distinct macro use, by *using* the macro the backend
  spec maps the op to at the rank of the node's output (``NAME(arg, arg, ...)``), or a
  composite's pattern's macro (its inputs in the pattern's order, its nodes'
  attributes as ``${<node>.<attr>}``). Nodes whose uses are the same text (the same
  op, types and attributes) share one kernel, whose comment names the nodes it serves
  (the first few, then a count), so a region of 10,000 ops of three kinds compiles
  three kernels, and a library backend creates one primitive per distinct kernel;
- ``<sym>_``: the subgraph body; it places the intermediate buffers in the calling
  thread's workspace (:mod:`byoc.generator.c.workspace`: one block, allocated on the
  thread's first call and kept), calls the kernels in topological order and returns 0,
  or -1 when the workspace cannot be allocated. Intermediates whose lifetimes do not
  overlap share a buffer (the memory plan of :mod:`byoc.generator.memory_plan`), so a
  chain of any length needs two; a kernel whose macro says ``overwrites: in<k>`` may
  get input k's buffer for its result, when it reads that value last;
- ``<sym>_wrapper_``: takes the ``DLTensor*`` arguments that the exported entry
  (:mod:`byoc.generator.c.ffi_entry`) has checked and calls the body on their data.

An intermediate value may keep another memory order than row-major between the
kernels that make and read it, when all of them take it (the spec's ``layouts:``,
:mod:`byoc.generator.c_source.layouts`); each kernel gets its ports' layouts as
``${in<k>_layout}`` and ``${out_layout}``.

A node's result goes straight into the output buffer when the node computes a
function output. An output that is a parameter, a constant, or a value returned
a second time is copied with ``memcpy`` at the end.

C names of values are positional (``in0``, ``out0``, ``buf0``), so IR names (which
may be numbers, as in ExampleJSON, or C keywords) only ever appear in comments. They
contain no ``_``, so they never shadow a generated global, all of which do.

Kernels take plain ``ctype*`` pointers, as in the guide, so that a spec's macro may
declare its inputs ``const`` or not; a constant array is passed with its ``const``
cast away, and no kernel writes its inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from byoc.catalog import Catalog
from byoc.ir import C_TYPES, Function, TensorType
from byoc.spec.backend import BackendSpec, MacroDef

from ..artifacts import Artifact
from ..c import ffi_entry
from ..c.profile import Site
from ..c.text import (
    comment,
    constant_arrays,
    function_origin,
    origin,
    value_label,
)
from ..memory_plan import ScheduledOp, plan_memory
from .body import Call, body_lines, body_parts, wrapper_text
from .kernels import (
    Kernel,
    composite_of,
    composite_origin,
    composite_use,
    failure_message,
    kernel_text,
    macro_values,
    node_macro,
)
from .layouts import (
    choose_layouts,
    layout_note,
    layout_text,
    layout_values,
    overwritten_input,
)
from .state import (
    KernelSetup,
    init_guard,
    kernel_setup,
    module_guard,
    module_stateful,
    setup_constants,
    setup_text,
    state_pointer,
    state_text,
    stateful,
)


@dataclass(frozen=True, slots=True)
class FunctionText:
    """The C text of one external function."""

    text: str
    non_finite: bool
    """True when a constant holds an infinity or a NaN (the module includes <math.h>)."""
    blobs: tuple[Artifact, ...] = ()
    """The binary artifacts its large constants are included from."""
    workspace: bool = False
    """True when its body places buffers in the per-thread workspace (the module defines it)."""
    fails: bool = False
    """True when a kernel may report a failure (the module defines ``byoc_error``)."""
    sites: tuple[Site, ...] = ()
    """Its timed kernel calls, in a build with profiling (:mod:`byoc.generator.c.profile`)."""
    stateful: bool = False
    """True when it has state and an init, which may say why it fails (``byoc_error``)."""


def function_text(
    fn: Function,
    spec: BackendSpec,
    catalog: Catalog,
    values: Mapping[str, object],
    first_site: int | None = None,
) -> FunctionText:
    """``fn``'s constants, kernels, body, wrapper and exported entry.

    ``values`` holds the placeholders common to every template of the spec (the
    backend's name, symbol prefix and option values); ``catalog`` gives each op's
    attributes their kernel values. With ``first_site`` (a build with profiling) each
    kernel call is timed as a profiling site, numbered from it.
    """
    sym = fn.name
    assert sym is not None, "lower() gives every external function a symbol"
    parts: list[str] = [comment(f"---- {sym}: {function_origin(fn)} ----") + "\n"]
    has_state = stateful(spec)
    state_at = len(parts)  # the state struct goes here, once the kernels' members are known
    common = values
    if has_state:
        values = {**values, "state": state_pointer(sym)}

    # Values are numbered (parameters, constants, then nodes) and looked up by
    # number: one dict from names, then lists, so large graphs stay cache-friendly.
    index: dict[str, int] = {}
    types: list[TensorType] = []
    for p in fn.params:
        index[p.name] = len(types)
        types.append(p.type)
    first_const = len(types)
    for c in fn.constants:
        index[c.name] = len(types)
        types.append(c.type)
    composites = {k: composite_of(node, spec, fn, catalog) for k, node in enumerate(fn.nodes) if node.callee}
    node_inputs = []
    for k, node in enumerate(fn.nodes):
        # A composite's kernel takes its pattern's inputs, in the pattern's order.
        names = composites[k].inputs if k in composites else node.inputs
        node_inputs.append([index[name] for name in names])
        index[node.name] = len(types)
        types.append(node.type)
    outputs = [index[name] for name in fn.outputs]
    base = first_const + len(fn.constants)
    layouts = choose_layouts(spec, fn.nodes, composites, node_inputs, base, types, outputs)
    used = bytearray(len(types))
    for ins in node_inputs:
        for i in ins:
            used[i] = 1
    for i in outputs:
        used[i] = 1

    # An unused constant would be an unused static array, which -Werror rejects.
    constants = [c for j, c in enumerate(fn.constants) if used[first_const + j]]
    arrays = constant_arrays(sym, constants, spec.name)
    const_text, const_names, non_finite = arrays.texts, arrays.names, arrays.non_finite
    parts += const_text
    storage: list[str] = [f"in{i}" for i in range(len(fn.params))] + [""] * (len(types) - len(fn.params))
    const_storage: dict[int, str] = {}
    for c, cname in zip(constants, const_names):
        const_storage[index[c.name]] = cname
        storage[index[c.name]] = f"({C_TYPES[c.type.dtype]}*){cname}"

    first_output: dict[int, int] = {}
    for i, value in enumerate(outputs):
        first_output.setdefault(value, i)

    def what(k: int) -> str:
        node = fn.nodes[k]
        return composite_origin(node, composites[k]) if k in composites else origin(node)

    calls: list[Call] = []
    sites: list[Site] = []
    uses: dict[tuple[object, ...], tuple[str, str, MacroDef]] = {}
    kernel_of: dict[tuple[object, ...], int] = {}
    kernels: list[Kernel] = []
    setups: list[KernelSetup] = []
    buffers: list[tuple[str, TensorType, list[str]]] = []
    steps = [
        ScheduledOp(
            tuple(ins),
            (base + k,),
            overwritten_input(spec, fn.nodes[k], composites.get(k), ins, layouts.ports.get(k)),
        )
        for k, ins in enumerate(node_inputs)
    ]
    plan = plan_memory((), steps, types, outputs)
    buffer_of: dict[int, int] = {}
    for k, node in enumerate(fn.nodes):
        ins = node_inputs[k]
        in_types = tuple(types[i] for i in ins)
        ports = layouts.ports.get(k)  # None: every port plain
        if k in composites:
            with_layouts = {**values, **layout_values(len(ins), ports)}
            use, type_text, macro = composite_use(node, composites[k], spec, catalog, with_layouts)
        else:
            key = (node.op, node.type, in_types, node.attrs, ports)
            cached = uses.get(key)
            if cached is None:
                # Rendered once per op, types, attributes and layouts, with a stand-in for the kernel's name.
                macro = node_macro(node, spec, catalog, in_types)
                with_layouts = {**values, **layout_values(len(ins), ports)}
                args = macro.arguments(macro_values(with_layouts, spec, catalog, node, in_types))
                cached = uses[key] = (f"{macro.name}({', '.join(args)})", str(node.type), macro)
            use, type_text, macro = cached
        type_text += layout_text(ports)  # a kernel's layouts are part of what identifies it
        # One kernel per distinct use: nodes of the same op, types and attributes (or
        # composites of the same pattern and values) call the same function, unless its
        # macro's setup reads their constants (${in<k>_const}): then per constants too.
        constant_inputs = setup_constants(macro, ins, const_storage)
        found = kernel_of.setdefault((use, type_text, tuple(constant_inputs.items())), len(kernels))
        if found == len(kernels):
            kernels.append(Kernel(f"{sym}_{found}", use, type_text, [], macro.status))
            setup = kernel_setup(macro, kernels[found].name, common, constant_inputs)
            if setup is not None:
                setups.append(setup)
        kernels[found].nodes.append(k)
        value = base + k
        if value in first_output:
            target = f"out{first_output[value]}"
        else:
            slot = buffer_of.setdefault(plan.storage[value], len(buffers))
            if slot == len(buffers):
                buffers.append((f"buf{slot}", node.type, []))
            target = buffers[slot][0]
            buffers[slot][2].append(value_label(node.name))
        args = [storage[i] for i in ins] + [target]
        failure = found + 1 if kernels[found].status else 0  # what the body returns when it fails
        if first_site is None:
            calls.append(Call(kernels[found].name, args, k, failure))
        else:
            op = composites[k].pattern.name if k in composites else node.op
            note = f"{kernels[found].name} {op} -> {value_label(node.name)}"
            calls.append(Call(kernels[found].name, args, k, failure, first_site + len(sites), note))
            sites.append(Site(sym, note, what(k)))
        storage[value] = target

    parts += [kernel_text(kernel, what) for kernel in kernels]
    if has_state:
        parts.insert(state_at, state_text(spec, sym, common, setups))
        parts.append(setup_text(spec, sym, common, setups))

    copies = []
    for i, value in enumerate(outputs):
        source = storage[value]
        if source != f"out{i}":
            src = const_storage.get(value, source)
            t = types[value]
            copies.append(f"  memcpy(out{i}, {src}, sizeof({C_TYPES[t.dtype]}) * {t.size});")

    unused_inputs = [i for i in range(len(fn.params)) if not used[i]]
    output_types = [types[v] for v in outputs]
    ctypes = {f"in{i}": C_TYPES[p.type.dtype] for i, p in enumerate(fn.params)}
    ctypes.update((f"out{i}", C_TYPES[t.dtype]) for i, t in enumerate(output_types))
    ctypes.update((buf, C_TYPES[t.dtype]) for buf, t, _ in buffers)
    pieces, body_calls = body_parts(fn, sym, calls, ctypes)
    parts += pieces
    where = {v: (storage[v], value_label(fn.nodes[v - base].name)) for v in layouts.values}
    laid_out = layout_note(spec, layouts.values, where)
    fails = any(c.failure for c in calls)
    parts += body_lines(
        fn, sym, output_types, buffers, body_calls, len(calls), copies, unused_inputs, laid_out, fails
    )
    failures = {j: failure_message(sym, kernel, what) for j, kernel in enumerate(kernels) if kernel.status}
    guard = (module_guard(sym) if module_stateful(spec) else []) + (init_guard(sym) if has_state else [])
    parts.append(wrapper_text(fn, sym, guard, failures, len(kernels)))
    parts.append(ffi_entry.entry(fn, f"{sym}_wrapper_"))
    return FunctionText(
        "\n".join(parts), non_finite, tuple(arrays.blobs), bool(buffers), fails, tuple(sites), has_state
    )
