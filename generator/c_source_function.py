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
  thread's workspace (:mod:`byoc.generator.c_workspace`: one block, allocated on the
  thread's first call and kept), calls the kernels in topological order and returns 0,
  or -1 when the workspace cannot be allocated. Intermediates whose lifetimes do not
  overlap share a buffer (the memory plan of :mod:`byoc.generator.memory_plan`), so a
  chain of any length needs two;
- ``<sym>_wrapper_``: takes the ``DLTensor*`` arguments that the exported entry
  (:mod:`byoc.generator.ffi_entry`) has checked and calls the body on their data.

An intermediate value may keep another memory order than row-major between the
kernels that make and read it, when all of them take it (the spec's ``layouts:``,
:mod:`byoc.generator.c_source_layouts`); each kernel gets its ports' layouts as
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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from byoc.catalog import Catalog
from byoc.errors import GraphError
from byoc.ir import C_TYPES, Function, Node, TensorType
from byoc.spec.backend import BackendSpec, MacroDef
from byoc.spec.bindings import MacroBinding

from . import ffi_entry
from .artifacts import Artifact
from .c_source_layouts import (
    choose_layouts,
    kernel_layouts,
    kernel_macro,
    layout_note,
    layout_text,
    layout_values,
)
from .c_source_state import (
    KernelSetup,
    init_guard,
    kernel_setup,
    setup_constants,
    setup_text,
    state_pointer,
    state_text,
    stateful,
)
from .c_source_values import c_list, check_input_axes, op_values
from .c_text import (
    block_comment,
    comment,
    constant_arrays,
    function_origin,
    item_list,
    origin,
    value_label,
)
from .c_workspace import RELEASE, layout
from .composite import GraphView, Match, composite_match, composite_values
from .memory_plan import ScheduledOp, plan_memory

SYMBOL = "\0symbol\0"
"""Stands for ``${symbol}`` in a rendered macro use until the kernel's name replaces it:
a use is rendered once per op and type, not once per node. Rendering every node's use
afresh halves the throughput (lower + generate, 10k and 100k nodes, paired runs)."""


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


def function_text(
    fn: Function, spec: BackendSpec, catalog: Catalog, values: Mapping[str, object]
) -> FunctionText:
    """``fn``'s constants, kernels, body, wrapper and exported entry.

    ``values`` holds the placeholders common to every template of the spec (the
    backend's name, symbol prefix and option values); ``catalog`` gives each op's
    attributes their kernel values.
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
    composites = {k: _composite(node, spec, fn, catalog) for k, node in enumerate(fn.nodes) if node.callee}
    node_inputs = []
    for k, node in enumerate(fn.nodes):
        # A composite's kernel takes its pattern's inputs, in the pattern's order.
        names = composites[k].inputs if k in composites else node.inputs
        node_inputs.append([index[name] for name in names])
        index[node.name] = len(types)
        types.append(node.type)
    outputs = [index[name] for name in fn.outputs]
    base = first_const + len(fn.constants)
    chosen = choose_layouts(spec, fn.nodes, composites, node_inputs, base, types, outputs)
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

    calls: list[_Call] = []
    uses: dict[tuple[object, ...], tuple[str, str, MacroDef]] = {}
    kernel_of: dict[tuple[object, ...], int] = {}
    kernels: list[_Kernel] = []
    setups: list[KernelSetup] = []
    buffers: list[tuple[str, TensorType, list[str]]] = []
    steps = [
        ScheduledOp(tuple(ins), (first_const + len(fn.constants) + k,)) for k, ins in enumerate(node_inputs)
    ]
    plan = plan_memory((), steps, types, outputs)
    buffer_of: dict[int, int] = {}
    for k, node in enumerate(fn.nodes):
        ins = node_inputs[k]
        in_types = tuple(types[i] for i in ins)
        ports = kernel_layouts(chosen, ins, base + k)  # None: every port plain
        if k in composites:
            with_layouts = {**values, **layout_values(len(ins), ports)}
            use, type_text, macro = _composite_use(node, composites[k], spec, catalog, with_layouts)
        else:
            key = (node.op, node.type, in_types, node.attrs, ports)
            cached = uses.get(key)
            if cached is None:
                # Rendered once per op, types, attributes and layouts, with a stand-in for the kernel's name.
                macro = _macro(node, spec, catalog, in_types)
                with_layouts = {**values, **layout_values(len(ins), ports)}
                args = macro.arguments(_macro_values(with_layouts, spec, catalog, node, in_types))
                cached = uses[key] = (f"{macro.name}({', '.join(args)})", str(node.type), macro)
            use, type_text, macro = cached
        type_text += layout_text(ports)  # a kernel's layouts are part of what identifies it
        # One kernel per distinct use: nodes of the same op, types and attributes (or
        # composites of the same pattern and values) call the same function, unless its
        # macro's setup reads their constants (${in<k>_const}): then per constants too.
        constant_inputs = setup_constants(macro, ins, const_storage)
        found = kernel_of.setdefault((use, type_text, tuple(constant_inputs.items())), len(kernels))
        if found == len(kernels):
            kernels.append(_Kernel(f"{sym}_{found}", use, type_text, []))
            setup = kernel_setup(macro, kernels[found].name, common, constant_inputs)
            if setup is not None:
                setups.append(setup)
        kernel = kernels[found].name
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
        calls.append(_Call(item_list(f"  {kernel}(", args, ");"), [a for a in args if a[0] != "("], k))
        storage[value] = target

    def what(k: int) -> str:
        node = fn.nodes[k]
        return composite_origin(node, composites[k]) if k in composites else origin(node)

    parts += [_kernel_text(kernel, what) for kernel in kernels]
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
    pieces, body_calls = _parts(fn, sym, calls, ctypes)
    parts += pieces
    where = {v: (storage[v], value_label(fn.nodes[v - base].name)) for v in chosen}
    laid_out = layout_note(spec, chosen, where)
    parts += _body(fn, sym, output_types, buffers, body_calls, len(calls), copies, unused_inputs, laid_out)
    parts.append(_wrapper(fn, sym, init_guard(sym) if has_state else []))
    parts.append(ffi_entry.entry(fn, f"{sym}_wrapper_"))
    return FunctionText("\n".join(parts), non_finite, tuple(arrays.blobs), bool(buffers))


# ------------------------------------------------------------------------- kernels

SHOWN_NODES = 4
"""How many of the nodes a shared kernel serves its comment names (then a count)."""


@dataclass(slots=True)
class _Kernel:
    """One kernel function: its name, its macro use, its output type, the nodes it serves."""

    name: str
    use: str
    type_text: str
    nodes: list[int]


def _kernel_text(kernel: _Kernel, what: Callable[[int], str]) -> str:
    """The kernel's definition, after a comment naming the nodes it serves (``what`` says
    where node ``k`` came from); a kernel of many nodes names the first few and counts the rest."""
    if len(kernel.nodes) == 1:
        note = comment(f"{kernel.name}: {what(kernel.nodes[0])}, {kernel.type_text}")
    else:
        lines = [f"{kernel.name}: {kernel.type_text}, for {len(kernel.nodes)} nodes:"]
        lines += [f"  {what(k)}" for k in kernel.nodes[:SHOWN_NODES]]
        if len(kernel.nodes) > SHOWN_NODES:
            lines.append(f"  ... and {len(kernel.nodes) - SHOWN_NODES} more")
        note = block_comment(lines)
    return f"{note}\n{kernel.use.replace(SYMBOL, kernel.name)}\n"


def _macro(node: Node, spec: BackendSpec, catalog: Catalog, input_types: Sequence[TensorType]) -> MacroDef:
    """The spec macro for ``node``; raises GraphError when it cannot serve the node.

    The inputs of an elementwise op must have its output's type (the macros do not
    broadcast); a macro of another rule reads each input's extents itself."""
    t = node.type
    macro = kernel_macro(spec, node, None)
    if macro is None:
        raise GraphError(
            f"backend {spec.name} has no macro for {node.op} at rank {t.rank}",
            node.loc,
            hint=f"move {node.op} out of the @{spec.name} region, or map it in the backend spec",
        )
    name = macro.name
    if macro.inputs is not None and macro.inputs != len(node.inputs):
        raise GraphError(
            f"macro {name} of backend {spec.name} takes {macro.inputs} input(s), but {node.op} has {len(node.inputs)}",
            node.loc,
        )
    check_input_axes(node, macro, input_types, spec.name)
    if not catalog[node.op].rule.elementwise:
        return macro
    for name_in, given in zip(node.inputs, input_types):
        if given.shape != t.shape or given.dtype != t.dtype:
            raise GraphError(
                f"{node.op} on backend {spec.name} needs every input to be {t}, but {value_label(name_in)} is {given}",
                node.loc,
                hint=f"the macros of {spec.name} do not broadcast: make the shapes equal before the "
                "region, or run this op on the host (broadcasting is for the `fused` backend)",
            )
    return macro


def _macro_values(
    common: Mapping[str, object],
    spec: BackendSpec,
    catalog: Catalog,
    node: Node,
    input_types: Sequence[TensorType],
) -> dict[str, object]:
    """Every placeholder of a macro argument for ``node``: byoc's own names win over an
    attribute of the same name (``lrn``'s ``size`` is ``${size}``, the element count)."""
    values = dict(common)
    values.update(op_values(node, catalog[node.op], input_types))
    values.update(spec.ops[node.op].vars)
    return _fixed_values(values, node.type)


def _fixed_values(values: dict[str, object], t: TensorType) -> dict[str, object]:
    """``values`` with byoc's own placeholders of a kernel whose output is ``t``."""
    values.update(
        symbol=SYMBOL, ctype=C_TYPES[t.dtype], dtype=t.dtype, rank=t.rank, size=t.size, shape=c_list(t.shape)
    )
    values.update((f"dim{a}", extent) for a, extent in enumerate(t.shape))
    return values


# ---------------------------------------------------------------------- composites


def _composite(node: Node, spec: BackendSpec, region: Function, catalog: Catalog) -> Match:
    """The match of a composite of ``region`` against its pattern (lowering checked it)."""
    found = composite_match(node, spec, region, catalog)
    if isinstance(found, str):
        raise GraphError(f"composite @{spec.name}.{node.callee.composite} does not match: {found}", node.loc)
    return found


def _composite_use(
    node: Node, found: Match, spec: BackendSpec, catalog: Catalog, common: Mapping[str, object]
) -> tuple[str, str, MacroDef]:
    """The use of a composite's macro: the pattern's vars, its inputs' extents and its
    nodes' attributes (``${conv.strides0}``), and byoc's names for its result."""
    binding = found.pattern.binding
    macro = kernel_macro(spec, node, found)
    assert isinstance(binding, MacroBinding) and macro is not None and node.callee is not None
    values = dict(common)
    values.update(composite_values(found, GraphView.of(node.callee), catalog))
    values.update(binding.vars)
    args = macro.arguments(_fixed_values(values, node.type))
    return f"{macro.name}({', '.join(args)})", str(node.type), macro


def composite_origin(node: Node, found: Match) -> str:
    """Where a composite came from, for a comment: its pattern and ops."""
    assert node.callee is not None
    ops = ", ".join(n.op for n in node.callee.nodes)
    where = f" at {node.loc}" if node.loc is not None else ""
    return f"{node.name} = composite {found.pattern.name} of {ops}{where}"


# ----------------------------------------------------------------- body, wrapper


def _body(
    fn: Function,
    sym: str,
    output_types: Sequence[TensorType],
    buffers: Sequence[tuple[str, TensorType, list[str]]],
    calls: Sequence[str],
    kernel_calls: int,
    copies: Sequence[str],
    unused_inputs: Sequence[int],
    laid_out: Sequence[str] = (),
) -> list[str]:
    """The body's lines; ``calls`` are its statements that call kernels or parts;
    ``laid_out`` notes its values that are not plain."""
    params = [f"{C_TYPES[p.type.dtype]}* in{i}" for i, p in enumerate(fn.params)]
    params += [f"{C_TYPES[t.dtype]}* out{i}" for i, t in enumerate(output_types)]
    note = [
        f"{sym}_: the body of {function_origin(fn)},",
        f"with {kernel_calls} kernel call(s) and {len(buffers)} intermediate buffer(s), shared where lifetimes allow:",
    ]
    note += [f"  in{i}: {p.name}: {p.type}" for i, p in enumerate(fn.params)]
    note += [
        f"  out{i}: {value_label(name)}: {t}" for i, (name, t) in enumerate(zip(fn.outputs, output_types))
    ]
    note += laid_out
    lines = [block_comment(note), item_list(f"static int {sym}_(", params, ") {")]
    if buffers:
        lines += layout(
            [(buf, t, _holds(holds), k) for k, (buf, t, holds) in enumerate(buffers)], "return -1;"
        )
    lines += [f"  (void)in{i};" for i in unused_inputs]
    lines += calls
    lines += copies
    lines += [RELEASE] if buffers else []
    lines += ["  return 0;", "}", ""]
    return lines


PART_CALLS = 256
"""The most kernel calls a body makes itself; a longer one is split into parts of this
many calls. A C compiler's optimiser grows faster than linearly in the size of one
function: gcc -O2 took 14.5 s over a body of 10,000 calls and 4.4 s over the same calls
in parts of 256."""


@dataclass(frozen=True, slots=True)
class _Call:
    """One kernel call of the body: its statement, the pointers it passes, its node."""

    text: str
    pointers: list[str]
    node: int


def _parts(
    fn: Function, sym: str, calls: Sequence[_Call], ctypes: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """The part functions of a long body, and the statements that call them in order;
    a body of at most :data:`PART_CALLS` calls has no parts and makes its calls itself.

    A part ``<sym>_part<j>_`` takes exactly the pointers its calls pass (inputs, outputs
    and buffers), and is ``noinline`` so that the compiler optimises each part alone."""
    if len(calls) <= PART_CALLS:
        return [], [c.text for c in calls]
    parts: list[str] = []
    statements: list[str] = []
    for j, first in enumerate(range(0, len(calls), PART_CALLS)):
        chunk = calls[first : first + PART_CALLS]
        pointers = list(dict.fromkeys(p for c in chunk for p in c.pointers))
        name = f"{sym}_part{j}_"
        nodes = [value_label(fn.nodes[c.node].name) for c in (chunk[0], chunk[-1])]
        note = [
            f"{name}: kernel calls {first} to {first + len(chunk) - 1} of {sym}_ (nodes {nodes[0]} to {nodes[1]});",
            f"the body's calls in parts of at most {PART_CALLS}, each optimised on its own.",
        ]
        parts += [
            block_comment(note),
            item_list(
                f"__attribute__((noinline)) static void {name}(",
                [f"{ctypes[p]}* {p}" for p in pointers],
                ") {",
            ),
            *(c.text for c in chunk),
            "}",
            "",
        ]
        statements.append(item_list(f"  {name}(", pointers, ");"))
    return ["\n".join(parts)], statements


def _holds(labels: list[str]) -> str:
    """The values a shared buffer holds, in order, for its comment."""
    if len(labels) <= 4:
        return "holds " + ", ".join(labels)
    return f"holds {', '.join(labels[:3])}, ... {labels[-1]} ({len(labels)} values)"


def _wrapper(fn: Function, sym: str, guard: list[str]) -> str:
    params = [f"DLTensor* arg{i}" for i in range(len(fn.params))]
    params += [f"DLTensor* out{i}" for i in range(len(fn.outputs))]
    types = [p.type for p in fn.params] + list(fn.output_types)
    args = [
        f"({C_TYPES[t.dtype]}*)((char*){name}->data + {name}->byte_offset)"
        for name, t in zip((p.split()[-1] for p in params), types)
    ]
    note = [
        f"{sym}_wrapper_: runs {sym}_ on the data of the DLTensor arguments the entry checked,",
        f"raising MemoryError when {sym}_ fails; {function_origin(fn)}.",
    ]
    message = f"{sym}: cannot allocate the intermediate buffers"
    return "\n".join(
        [
            block_comment(note),
            item_list(f"static int {sym}_wrapper_(", params, ") {"),
            *guard,
            item_list(f"  if ({sym}_(", args, ") != 0) {"),
            f'    return byoc_raise("MemoryError", "{message}");',
            "  }",
            "  return 0;",
            "}",
            "",
        ]
    )
