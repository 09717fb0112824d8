"""The C text of one external function, for the ``c_fused`` codegen.

For a function (a region) with symbol ``<sym>`` it writes:

- ``<sym>_const_<j>``: each constant it uses, as a ``static const`` C array;
- ``<sym>_``: the fused body. A region with anchors (conv, dense, ...) is planned
  by :mod:`byoc.generator.c_fused.nests`; an elementwise one as follows. Its
  pointers are ``restrict``-qualified. Outputs are
  grouped by shape; each group gets one loop nest over its shape
  (:mod:`byoc.generator.c_fused.loops`: one flat loop when no operand broadcasts), and
  in it every node the group's outputs need is a scalar local of its compute type,
  ``const float t3 = t1 * in2[i];`` (a half type's element read as a float and each
  node's value rounded to its dtype: :mod:`byoc.generator.c.dtypes`), from the op's C expression (the spec's ``c``, by
  default the op catalog's). Only the outputs are stored. A node needed by groups of
  two shapes is computed in both, and a node of a smaller shape than its loop is
  recomputed along the axes it is broadcast over; so nothing is ever materialised:
  no intermediate buffer, no workspace, no allocation, and the body cannot fail;
- ``<sym>_wrapper_``: takes the ``DLTensor*`` arguments the exported entry checked,
  raises ValueError if an output shares memory with another argument (which
  ``restrict`` forbids), and calls the body;
- ``__tvm_ffi_<sym>``: the exported entry of :mod:`byoc.generator.c.ffi_entry`.

Every statement carries a comment naming its source node and location. C names are
positional (``in0``, ``out0``, ``t3``: node 3 of the region), so IR names only ever
appear in comments.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from byoc.attr_values import resolve
from byoc.catalog import Catalog
from byoc.errors import GraphError
from byoc.ir import ANON_PREFIX, C_TYPES, Constant, Function, Node, TensorType
from byoc.spec.backend import BackendSpec
from byoc.spec.bindings import ExpressionBinding
from byoc.spec.template import render

from ..artifacts import Artifact
from ..c import dtypes as c_dtypes
from ..c import ffi_entry
from ..c.profile import Site, origins, timed
from ..c.text import (
    C_WORD,
    block_comment,
    c_string,
    comment,
    constant_arrays,
    function_origin,
    item_list,
    origin,
    value_label,
)
from ..c.workspace import RELEASE, layout
from .anchors import c_attributes
from .loops import Loops, plan_loops
from .nests import Body, Timer, anchored_body, needs_nests
from .outline import FOLDED_ELEMENTS, Outliner, constant_names, first_of_each, outer_loop
from .staging import Panel
from .support import pragmas, wants_clones


@dataclass(frozen=True, slots=True)
class FusedText:
    """The C text of one external function, and what the module must add for it."""

    text: str
    non_finite: bool
    """True when a constant holds an infinity or a NaN (the module includes <math.h>)."""
    parallel: bool
    """True when a loop runs on the thread pool (the module links byoc_pool.c)."""
    blobs: tuple[Artifact, ...] = ()
    """The binary artifacts its large constants are included from."""
    workspace: bool = False
    """True when its body places buffers in the per-thread workspace (the module links
    byoc_workspace.c)."""
    sites: tuple[Site, ...] = ()
    """Its timed loop nests, in a build with profiling (:mod:`byoc.generator.c.profile`)."""


@dataclass(frozen=True, slots=True)
class _Value:
    """One value of the region: a leaf (``in<i>``, a constant array) or a node (``t<k>``)."""

    name: str
    type: TensorType
    c_name: str
    node: int | None = None
    """The index of the node that computes it; None for a parameter or constant."""


def function_text(
    fn: Function,
    spec: BackendSpec,
    values: Mapping[str, object],
    catalog: Catalog,
    first_site: int | None = None,
) -> FusedText:
    """``fn``'s constants, fused body, wrapper and exported entry (see the module doc).

    ``values`` holds the common placeholders and the backend's option values. With
    ``first_site`` (a build with profiling) each loop nest is timed as a profiling
    site, numbered from it.
    """
    sym = fn.name
    assert sym is not None, "lower() gives every external function a symbol"
    sites: list[Site] = []

    def timer(label: str, lines: list[str], nodes: list[Node]) -> list[str]:
        assert first_site is not None
        sites.append(Site(sym, f"{sym} {label}", origins(nodes) or function_origin(fn)))
        return timed(lines, first_site + len(sites) - 1, label)

    timing = None if first_site is None else timer
    table: dict[str, _Value] = {}
    for i, p in enumerate(fn.params):
        table[p.name] = _Value(p.name, p.type, f"in{i}")
    for k, node in enumerate(fn.nodes):
        _check_node(node, spec)
        for name, t in zip(node.outputs, node.types):  # several for split, which only nests compute
            table[name] = _Value(name, t, f"t{k}", k)
    groups: dict[tuple[int, ...], list[int]] = {}
    for o, t in enumerate(fn.output_types):
        groups.setdefault(t.shape, []).append(o)
    # What is read at all: empty outputs need nothing, and an unused static array or
    # parameter would be a warning (an error under -Werror).
    live = [fn.outputs[o] for o, t in enumerate(fn.output_types) if t.size]
    needed = _ancestors(fn, table, live)
    constants = [c for c in fn.constants if c.name in needed]
    const_names = constant_names(sym, constants)
    for c, c_name in zip(constants, const_names):
        table[c.name] = _Value(c.name, c.type, c_name)
    emitted = first_of_each(list(zip(constants, const_names)))  # each array once
    # A constant with no elements is read by no loop: without a use its array would be
    # an unused static (an error under -Werror).
    empty = [f"  (void){n};  /* no elements: nothing reads it */" for c, n in emitted if not c.values.size]

    # what nothing reads: empty outputs and constants (unused inputs are found below)
    unread = [f"  (void)out{o};" for o, t in enumerate(fn.output_types) if t.size == 0] + empty
    body = [f"  (void)in{i};" for i, p in enumerate(fn.params) if p.name not in needed] + unread
    parallel = False
    clones = wants_clones(values)
    read = {n: f"const {C_TYPES[c.type.dtype]}*" for c, n in emitted if c.values.size > FOLDED_ELEMENTS}
    outline = Outliner(sym, _pointers(fn), clones, {**read, **{f"{n}_panels": t for n, t in read.items()}})
    if needs_nests(fn, catalog):
        leaves = {name: v.c_name for name, v in table.items() if v.node is None}
        nested = anchored_body(fn, spec, catalog, values, leaves, _threshold(values), outline, timing)
        used = set(re.findall(r"\bin\d+\b", "\n".join(nested.statements)))
        body = [f"  (void)in{i};" for i in range(len(fn.params)) if f"in{i}" not in used] + unread
        parallel = nested.parallel
        body_text = _status_body(fn, sym, nested, body, clones)
        status = (nested.can_fail, bool(nested.buffers))
        code = "\n".join([*nested.statements, *outline.functions, *body])
        emitted = _with_panels(emitted, nested.panels, code, constants)
    else:
        for shape, outs in groups.items():
            lines, in_parallel = _group(
                fn, table, shape, outs, spec, values, catalog, outline, len(groups) > 1, timing
            )
            body += lines
            parallel |= in_parallel
        body_text = _body(fn, sym, groups, body, clones)
        status = (False, False)

    arrays = constant_arrays(sym, [c for c, _ in emitted], spec.name, [n for _, n in emitted])
    const_text, non_finite = arrays.texts, arrays.non_finite
    parts = [comment(f"---- {sym}: {function_origin(fn)} ----") + "\n", *const_text]
    parts += [*outline.functions, body_text]
    parts += [_wrapper(fn, sym, *status), ffi_entry.entry(fn, f"{sym}_wrapper_")]
    return FusedText("\n".join(parts), non_finite, parallel, tuple(arrays.blobs), status[1], tuple(sites))


def _check_node(node: Node, spec: BackendSpec) -> None:
    if node.op not in spec.ops:
        raise GraphError(
            f"backend {spec.name} has no C expression for {node.op}",
            node.loc,
            hint=f"move {node.op} out of the @{spec.name} region, or map it in the backend spec",
        )


def _ancestors(fn: Function, table: Mapping[str, _Value], outputs: Sequence[str]) -> set[str]:
    """Every value ``outputs`` depend on, themselves included."""
    needed: set[str] = set()
    todo = list(outputs)
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        value = table.get(name)
        if value is not None and value.node is not None:
            todo.extend(fn.nodes[value.node].inputs)
    return needed


# ---------------------------------------------------------------------- loop nests


def _group(
    fn: Function,
    table: Mapping[str, _Value],
    shape: tuple[int, ...],
    outs: Sequence[int],
    spec: BackendSpec,
    values: Mapping[str, object],
    catalog: Catalog,
    outline: Outliner,
    block: bool,
    timer: Timer | None = None,
) -> tuple[list[str], bool]:
    """The statements that write the outputs ``outs`` (all of ``shape``), and whether
    their outer loop runs on the thread pool (then ``outline`` holds their loop, and the
    statements call it); ``timer`` (a build with profiling) wraps them in their timing."""
    labels = ", ".join(f"out{o}" + ("" if _anonymous(fn.outputs[o]) else f" ({fn.outputs[o]})") for o in outs)
    if math.prod(shape) == 0:
        return [f"  {comment(f'{labels}: {list(shape)} has no elements; nothing to compute')}"], False
    members = _ancestors_of(fn, table, [fn.outputs[o] for o in outs])
    leaves = [v for v in members if v.node is None]
    loops = plan_loops(shape, [v.type.shape for v in leaves])
    depth: dict[str, int] = {v.name: loops.depth(v.type.shape) for v in leaves}
    levels: list[list[str]] = [[] for _ in range(len(loops.axes) + 1)]

    def operand(name: str) -> str:
        v = table[name]
        return v.c_name if v.node is not None else f"{v.c_name}[{loops.index(v.type.shape)}]"

    def loaded(name: str) -> str:  # in the compute type
        v = table[name]
        return operand(name) if v.node is not None else c_dtypes.load(operand(name), v.type.dtype)

    def stored(name: str) -> str:  # in the storage type
        v = table[name]
        return operand(name) if v.node is None else c_dtypes.store(operand(name), v.type.dtype)

    for v in members:
        if v.node is None:
            continue
        node = fn.nodes[v.node]
        depth[v.name] = max((depth[n] for n in node.inputs), default=0)
        args = c_dtypes.input_args([(loaded(n), table[n].type.dtype) for n in node.inputs])
        dtype = node.type.dtype
        binding = spec.ops[node.op]
        assert isinstance(binding, ExpressionBinding)  # needs_nests() took every other region
        attrs = c_attributes(resolve(catalog[node.op], [table[n].type for n in node.inputs], node.attrs))
        expression = render(
            binding.expression,
            {**values, "ctype": c_dtypes.compute_type(dtype), "dtype": dtype, **attrs, **args},
        )
        levels[depth[v.name]].append(
            f"const {c_dtypes.compute_type(dtype)} {v.c_name} = {c_dtypes.rounded(expression, dtype)};"
            f" {comment(origin(node))}"
        )
    index = loops.index(shape)
    levels[-1] += [f"out{o}[{index}] = {stored(fn.outputs[o])};" for o in outs]

    lines = [f"  {comment(_describe(loops, labels, leaves))}"]
    indent = "  "
    block = block and bool(levels[0])  # a block keeps its loop-invariant locals to itself
    if block:
        lines.append("  {")
        indent = "    "
    lines += [indent + s for s in levels[0]]
    parallel = bool(loops.axes) and 0 < _threshold(values) <= loops.size
    for k, (var, extent) in enumerate(zip(loops.variables, loops.extents)):
        simd = bool(values.get("vectorize")) and k == len(loops.axes) - 1
        lines += pragmas(simd)
        if parallel and k == 0:
            lines.append(outer_loop(indent, var))
        else:
            lines.append(f"{indent}for (int64_t {var} = 0; {var} < {extent}; ++{var}) {{")
        indent += "  "
        lines += [indent + s for s in levels[k + 1]]
    for _ in loops.axes:
        indent = indent[:-2]
        lines.append(f"{indent}}}")
    if block:
        lines.append("  }")
    if parallel:
        lines = outline(labels, lines, loops.extents[0])
    if timer is not None:
        lines = timer(f"loop {labels}", lines, [fn.nodes[v.node] for v in members if v.node is not None])
    return lines, parallel


def _ancestors_of(fn: Function, table: Mapping[str, _Value], outputs: Sequence[str]) -> list[_Value]:
    """The values ``outputs`` depend on: leaves in first-use order, then nodes in
    topological (source) order."""
    needed = _ancestors(fn, table, outputs)
    leaves = [table[n] for n in dict.fromkeys(_leaf_uses(fn, table, needed, outputs))]
    nodes = [table[n.name] for n in fn.nodes if n.name in needed]
    return leaves + nodes


def _leaf_uses(
    fn: Function, table: Mapping[str, _Value], needed: set[str], outputs: Sequence[str]
) -> Iterator[str]:
    for node in fn.nodes:
        if node.name in needed:
            yield from (n for n in node.inputs if table[n].node is None)
    yield from (n for n in outputs if table[n].node is None)


def _anonymous(name: str) -> bool:
    return name.startswith(ANON_PREFIX)


def _threshold(values: Mapping[str, object]) -> int:
    """The ``openmp_threshold`` option (the kind declares it an int); 0 when unset."""
    return max(0, int(values.get("openmp_threshold", 0)))  # type: ignore[call-overload]


def _pointers(fn: Function) -> dict[str, str]:
    """The C pointer type of each input and output array of ``fn``'s body."""
    pointers = {f"in{i}": f"const {C_TYPES[p.type.dtype]}*" for i, p in enumerate(fn.params)}
    pointers.update((f"out{o}", f"{C_TYPES[t.dtype]}*") for o, t in enumerate(fn.output_types))
    return pointers


def _describe(loops: Loops, labels: str, leaves: Sequence[_Value]) -> str:
    shape = list(loops.shape)
    if len(loops.axes) == 0:
        how = "a single element, no loop"
    elif len(loops.axes) == 1:
        how = f"one flat loop over {loops.size} elements"
    else:
        how = f"{len(loops.axes)} nested loops {list(loops.extents)}"
    broadcast = [
        f"{v.c_name} ({value_label(v.name)}: {v.type})" for v in leaves if loops.broadcast(v.type.shape)
    ]
    note = f"; broadcast: {', '.join(broadcast)}" if broadcast else ""
    return f"{labels}: {shape}, {how}{note}"


# ----------------------------------------------------------------- body, wrapper


def _body(fn: Function, sym: str, groups: Mapping, statements: Sequence[str], clones: bool) -> str:
    params = [f"const {C_TYPES[p.type.dtype]}* restrict in{i}" for i, p in enumerate(fn.params)]
    params += [f"{C_TYPES[t.dtype]}* restrict out{i}" for i, t in enumerate(fn.output_types)]
    note = [
        f"{sym}_: the body of {function_origin(fn)}, fused into {len(groups)} loop nest(s),",
        "one per output shape; every intermediate value is a scalar local, no buffer:",
    ]
    note += [f"  in{i}: {p.name}: {p.type}" for i, p in enumerate(fn.params)]
    note += [
        f"  out{i}: {value_label(name)}: {t}" for i, (name, t) in enumerate(zip(fn.outputs, fn.output_types))
    ]
    return "\n".join(
        [
            block_comment(note),
            *(["byoc_simd_clones"] if clones else []),
            item_list(f"static void {sym}_(", params, ") {"),
            *statements,
            "}",
            "",
        ]
    )


def _with_panels(
    emitted: list[tuple[Constant, str]],
    panels: Mapping[str, tuple[str, Panel]],
    code: str,
    constants: Sequence[Constant],
) -> list[tuple[Constant, str]]:
    """The constants to write (each with its C array): those ``code`` still reads as
    they are, and each one a nest reads packed (``panels``, by the value's name among
    ``constants``), in its layout."""
    if not panels:
        return emitted
    by_name = {c.name: c for c in constants}
    words = set(C_WORD.findall(code))
    kept = [(c, n) for c, n in emitted if n in words]
    for array, (value, panel) in panels.items():
        c = by_name[value]
        packed = panel.pack(c.values)
        kept.append(
            (
                Constant(
                    f"{c.name} in panels of {panel.width} columns",
                    TensorType(packed.shape, c.type.dtype),
                    packed,
                    c.loc,
                ),
                array,
            )
        )
    return kept


def _status_body(fn: Function, sym: str, nested: Body, head: Sequence[str], clones: bool) -> str:
    """The body of a region with anchors: buffers, the nests, and the status."""
    params = [f"const {C_TYPES[p.type.dtype]}* restrict in{i}" for i, p in enumerate(fn.params)]
    params += [f"{C_TYPES[t.dtype]}* restrict out{i}" for i, t in enumerate(fn.output_types)]
    status = nested.can_fail or bool(nested.buffers)
    note = [
        f"{sym}_: the body of {function_origin(fn)}, in {nested.nests} loop nest(s):",
        "one per anchor op, with the elementwise ops after it fused in, and",
        f"{len(nested.buffers)} intermediate buffer(s) for the values another nest reads"
        " (or a tiled nest reads converted or packed), sharing",
        "memory where their lifetimes do not overlap.",
    ]
    if status:
        fails = ["1 when an allocation fails"] * bool(nested.buffers) + [
            "2 when a gather index is out of range"
        ] * nested.can_fail
        note.append(f"Returns 0, or {' or '.join(fails)}.")
    note += [f"  in{i}: {p.name}: {p.type}" for i, p in enumerate(fn.params)]
    note += [
        f"  out{i}: {value_label(name)}: {t}" for i, (name, t) in enumerate(zip(fn.outputs, fn.output_types))
    ]
    lines = [block_comment(note), *(["byoc_simd_clones"] if clones else [])]
    lines.append(item_list(f"static {'int' if status else 'void'} {sym}_(", params, ") {"))
    if nested.can_fail:
        lines.append(f"  int status = 0; {comment('2 when a gather index is out of range')}")
    if nested.buffers:
        lines += layout(
            [(buf, t, f"holds {label}", slot) for buf, t, label, slot in nested.buffers], "return 1;"
        )
    lines += [*head, *nested.statements]
    release = [RELEASE] if nested.buffers else []
    if nested.can_fail:
        lines += ["done:", *release, "  return status;"]
    elif status:
        lines += [*release, "  return 0;"]
    lines += ["}", ""]
    return "\n".join(lines)


def _wrapper(fn: Function, sym: str, can_fail: bool = False, allocates: bool = False) -> str:
    """The wrapper's text: it checks that no output overlaps another argument
    (``byoc_outputs_overlap``) when two hold bytes. With ``can_fail`` or ``allocates``
    the body returns a status, which it raises."""
    params = [f"DLTensor* arg{i}" for i in range(len(fn.params))]
    params += [f"DLTensor* out{i}" for i in range(len(fn.outputs))]
    lines = [
        block_comment(
            [
                f"{sym}_wrapper_: runs {sym}_ on the data of the DLTensor arguments the entry checked;",
                f"{function_origin(fn)}. An output may not share memory with any other argument.",
            ]
        ),
        item_list(f"static int {sym}_wrapper_(", params, ") {"),
    ]
    for i, p in enumerate(fn.params):
        ctype = C_TYPES[p.type.dtype]
        lines.append(
            f"  const {ctype}* in{i} = (const {ctype}*)((const char*)arg{i}->data + arg{i}->byte_offset);"
        )
    for o, t in enumerate(fn.output_types):
        ctype = C_TYPES[t.dtype]
        lines.append(f"  {ctype}* o{o} = ({ctype}*)((char*)out{o}->data + out{o}->byte_offset);")
    sizes = [t.nbytes for t in (*(p.type for p in fn.params), *fn.output_types)]
    checks = any(sizes[len(fn.params) :]) and sum(1 for b in sizes if b) > 1
    if checks:
        data = [f"in{i}" for i in range(len(fn.params))] + [f"o{o}" for o in range(len(fn.outputs))]
        n = len(data)
        message = c_string(
            f"{sym}: an output shares memory with another argument; the fused kernel reads and "
            "writes through restrict pointers, so pass distinct arrays"
        )
        lines.append(item_list(f"  const void* data[{n}] = {{", data, "};"))
        lines.append(item_list(f"  static const size_t bytes[{n}] = {{", [str(b) for b in sizes], "};"))
        lines.append(f"  if (byoc_outputs_overlap(data, bytes, {len(fn.params)}, {n})) {{")
        lines.append(f'    return byoc_raise("ValueError", {message});')
        lines.append("  }")
    call = [f"in{i}" for i in range(len(fn.params))] + [f"o{o}" for o in range(len(fn.outputs))]
    if not (can_fail or allocates):
        lines += [item_list(f"  {sym}_(", call, ");"), "  return 0;", "}", ""]
        return "\n".join(lines)
    lines.append(item_list(f"  const int status = {sym}_(", call, ");"))
    if allocates:
        message = c_string(f"{sym}: cannot allocate the intermediate buffers")
        lines += ["  if (status == 1) {", f'    return byoc_raise("MemoryError", {message});', "  }"]
    if can_fail:
        message = c_string(f"{sym}: a gather index is out of range for its axis")
        lines += ["  if (status == 2) {", f'    return byoc_raise("ValueError", {message});', "  }"]
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)
