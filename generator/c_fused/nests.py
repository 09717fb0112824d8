"""The body of a ``c_fused`` region that holds anchors: one loop nest per anchor, with
its elementwise consumers fused into it.

A region whose ops are all elementwise keeps the flat loops of
:mod:`byoc.generator.c_fused.function`. Any other region is planned here:

1. **Nests.** Walking the nodes in order, an *anchor* (a node of a reduction or
   movement rule, :mod:`byoc.generator.c_fused.anchors`) starts a nest over its output
   shape; a node of several outputs (split) is one anchor per output, :class:`Piece`. An expression node (elementwise, or channel-wise like ``bias_add`` and
   ``batch_norm``, whose parameters are indexed by their axis's counter) joins the
   latest nest among its producers when it has that nest's shape, and otherwise starts
   a nest of its own. So conv → batch_norm → relu, or dense → bias_add → relu, is ONE
   loop nest: the anchor's accumulator becomes ``t<k>``, the epilogue ops scalar
   locals computed from it, and only the last value is stored.
2. **Memory.** A value read by another nest (an anchor reads its inputs at other
   indices) or returned by the region is stored: into its output, else into an
   intermediate buffer ``tmp<k>`` in the calling thread's workspace
   (:mod:`byoc.generator.c.workspace`, allocated once and kept between calls). The
   body then returns a status, 1 when the workspace cannot be allocated (the wrapper
   raises MemoryError) and 2 when a gather index is out of range (ValueError).
3. **Loops.** An anchor's nest loops over every output axis of extent > 1 (row-major;
   softmax's axis innermost); a nest without an anchor merges axes as the flat loops
   do. Every statement is placed at the outermost loop whose counters it uses, so a
   softmax's maximum and sum are computed once per row, and a per-channel value once
   per channel. Accumulators are ``double``, as the reference computes in float64 (or
   the spec's ``type``: an integer product's ``uint32_t``), and
   each value is rounded to its dtype once, as the reference's result is.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from byoc.attr_values import AttrView, resolve
from byoc.catalog import Catalog
from byoc.ir import C_TYPES, DTYPE_BYTES, Function, Node, TensorType
from byoc.spec.backend import BackendSpec
from byoc.spec.bindings import ExpressionBinding
from byoc.spec.kind_c_fused import REDUCTION_RULES, CallBinding, ReductionBinding
from byoc.spec.template import placeholders, render

from ..c import dtypes as c_dtypes
from ..c.text import comment, origin, value_label
from .anchors import RULES, c_attributes, loop_order, operand_shapes
from .blocking import BlockedText, plan_blocking, widened
from .buffers import buffer_slots
from .calls import call_nest
from .dots import PANEL_POINTER_NOTE, ConstantPanels, dot_product, float_accumulators
from .index import Site, element
from .loops import Loops, plan_loops
from .outline import Outliner, Written
from .partials import pass_lines
from .placement import Placement
from .staging import (
    Panel,
    Staged,
    block_packed_inputs,
    conversion,
    double_copy,
    packed_inputs,
    panel_width,
    stageable,
    staged_read,
)
from .tiles import STAGED_WIDTHS, TiledText

Timer = Callable[[str, list[str], list[Node]], list[str]]
"""Wraps the statements of one nest (its label, statements and nodes) in their timing."""

FAIL = "{ status = 2; goto done; }"
"""The statement that reports a gather index out of range."""
LANES32 = ("float", "int32_t", "uint32_t")
"""Accumulator types of 32 bits: their register tiles are :attr:`~.tiles.TileSizes.floats`."""


@dataclass(frozen=True, slots=True)
class Piece:
    """One output of a node, the planner's unit: a node of one output is one piece; a
    node of several outputs (split) is one per output, each computed in its own nest."""

    node: Node
    """The node, with only this output (``node.name``, ``node.type``)."""
    index: int
    """The node's index in the function."""
    part: int
    """Which of the node's outputs this is."""
    parts: tuple[TensorType, ...]
    """The types of all the node's outputs."""
    c_name: str
    """``t<index>``, or ``t<index>_<part>`` for a node of several outputs."""


def pieces(fn: Function) -> list[Piece]:
    """The pieces of ``fn``'s nodes, in order."""
    out = []
    for k, node in enumerate(fn.nodes):
        several = len(node.outputs) > 1
        for j, (name, t) in enumerate(zip(node.outputs, node.types)):
            one = replace(node, outputs=(name,), types=(t,)) if several else node
            out.append(Piece(one, k, j, node.types, f"t{k}_{j}" if several else f"t{k}"))
    return out


@dataclass
class Nest:
    """The pieces computed in one loop nest (indices into :func:`pieces`): an anchor
    (``head``) or none, then the expression nodes fused after it, in source order."""

    shape: tuple[int, ...]
    head: int | None
    members: list[int] = field(default_factory=list)
    closed: bool = False
    """A support function's nest (:mod:`.calls`): no op joins it."""


@dataclass(frozen=True, slots=True)
class Body:
    """The statements of an anchored body, and what its function and module need."""

    statements: list[str]
    buffers: list[tuple[str, TensorType, str, int]]
    """Each intermediate buffer: C name, type, the value it holds, and its slot in the
    workspace (buffers of one slot share memory: their lifetimes do not overlap)."""
    can_fail: bool
    parallel: bool
    nests: int
    panels: Mapping[str, tuple[str, Panel]] = field(default_factory=dict)
    """The constants the nests read packed in panels: C array -> (constant, layout)."""


def needs_nests(fn: Function, catalog: Catalog) -> bool:
    """Whether ``fn`` holds an op that is not elementwise (its rule broadcasts nothing
    the flat loops can index): then its body is planned here."""
    return any(not catalog[node.op].rule.elementwise for node in fn.nodes)


def is_anchor(node: Node, spec: BackendSpec) -> bool:
    return not isinstance(spec.ops[node.op], ExpressionBinding)


def plan_nests(
    units: Sequence[Piece], outputs: Sequence[str], spec: BackendSpec
) -> tuple[list[Nest], dict[str, int]]:
    """The nests of a function's pieces ``units`` (see the module doc, step 1), and the
    nest of each value."""
    nests: list[Nest] = []
    nest_of: dict[str, int] = {}
    live = _live(units, outputs)
    for k, piece in enumerate(units):
        node = piece.node
        if node.name not in live:
            continue  # dead code: a value nothing returns needs no loop
        producers = [nest_of[n] for n in node.inputs if n in nest_of]
        latest = max(producers, default=None)
        anchor = is_anchor(node, spec)
        if anchor or latest is None or nests[latest].shape != node.type.shape or nests[latest].closed:
            closed = isinstance(spec.ops[node.op], CallBinding)
            nests.append(Nest(node.type.shape, k if anchor else None, closed=closed))
            latest = len(nests) - 1
        nests[latest].members.append(k)
        nest_of[node.name] = latest
    return nests, nest_of


def _live(units: Sequence[Piece], outputs: Sequence[str]) -> set[str]:
    """The values the outputs depend on."""
    producer = {piece.node.name: piece.node for piece in units}
    live: set[str] = set()
    todo = list(outputs)
    while todo:
        name = todo.pop()
        if name not in live:
            live.add(name)
            todo.extend(producer[name].inputs if name in producer else ())
    return live


def anchored_body(
    fn: Function,
    spec: BackendSpec,
    catalog: Catalog,
    values: Mapping[str, object],
    leaves: Mapping[str, str],
    threshold: int,
    outline: Outliner,
    timer: Timer | None = None,
) -> Body:
    """The statements of ``fn``'s body; ``leaves`` maps each parameter and constant to
    its C array; the parallel nests go to ``outline``; ``timer`` (a build with
    profiling) wraps each nest's statements in its timing."""
    units = pieces(fn)
    nests, nest_of = plan_nests(units, fn.outputs, spec)
    stored: dict[str, list[str]] = {}
    for o, name in enumerate(fn.outputs):
        stored.setdefault(name, []).append(f"out{o}")
    for node in (piece.node for piece in units):
        if node.name not in nest_of:
            continue
        for name in node.inputs:
            if name in nest_of and (is_anchor(node, spec) or nest_of[name] != nest_of[node.name]):
                stored.setdefault(name, [])
    buffers = []
    for piece in units:
        name = piece.node.name
        if name in stored and not stored[name]:
            buf = "tmp" + piece.c_name[1:]
            stored[name].append(buf)
            buffers.append((buf, piece.node.type, name))
            outline.pointers[buf] = f"{C_TYPES[piece.node.type.dtype]}*"
    arrays = {**leaves, **{name: places[0] for name, places in stored.items() if places}}

    statements: list[str] = []
    can_fail = parallel = False
    writer = _NestWriter(fn, units, spec, catalog, values, arrays, stored, threshold, outline, timer)
    written = [writer.nest(n, nest) for n, nest in enumerate(nests)]
    # a serial nest whose code another one repeats (a transformer's layers): one function
    seen: Counter[str] = Counter()
    for w in written:
        if w.shared:
            w.key = outline.key(w.lines)
            seen[w.key[0]] += 1
    for w in written:
        statements += writer.finish(w, w.shared and seen[w.key[0]] > 1)
        can_fail |= w.fails
        parallel |= w.parallel
    copies = [o for o, name in enumerate(fn.outputs) if name not in nest_of]
    for o in copies:  # an output that is a parameter or constant
        statements += writer.copy(o, fn.outputs[o], fn.output_types[o])
    # An empty value's nest writes nothing, so its buffer may go unread: it takes no space.
    named = set(re.findall(r"\btmp\w+", "\n".join(statements)))
    buffers = [b for b in buffers if b[0] in named]
    slots = buffer_slots(units, nests, nest_of, {name: t for _, t, name in buffers}, writer.staged)
    placed = [(buf, t, value_label(name), slots[name]) for buf, t, name in buffers]
    placed += [
        (st.buffer, st.type, st.description(value_label(st.value)), slots[st.key]) for st in writer.staged
    ]
    return Body(statements, placed, can_fail, parallel, len(nests) + len(copies), writer.panels.arrays)


class _NestWriter:
    """Writes the loop nests of one function."""

    def __init__(
        self, fn: Function, units, spec, catalog, values, arrays, stored, threshold, outline, timer=None
    ) -> None:
        self.timer: Timer | None = timer
        self.units: Sequence[Piece] = units
        self.spec: BackendSpec = spec
        self.catalog: Catalog = catalog
        self.values: Mapping[str, object] = values
        self.arrays: Mapping[str, str] = arrays
        self.stored: Mapping[str, list[str]] = stored
        self.threshold: int = threshold
        self.outline: Outliner = outline
        self.heavy: int = max(0, int(values.get("openmp_reduction_threshold", 0)))  # type: ignore[call-overload]
        """Option openmp_reduction_threshold: a reduction nest of at least this many
        points (outputs times the points of each one's reduction) runs on the thread pool."""
        self.types = fn.types()
        self.c_name = {piece.node.name: piece.c_name for piece in units}
        self.staged: list[Staged] = []
        """The inputs of tiled nests converted to double or packed before them (staging.py)."""
        self.panels = ConstantPanels({c.name for c in fn.constants})
        """The constants that nests read packed."""

    # ------------------------------------------------------------ one nest

    def nest(self, n: int, nest: Nest) -> Written:
        units, head = self.units, nest.head
        names = [units[k].node.name for k in nest.members]
        label = f"nest {n}: " + ", ".join(f"{units[k].c_name} {units[k].node.op}" for k in nest.members)
        if math.prod(nest.shape) == 0:
            empty = [f"  {comment(f'{label}: {list(nest.shape)} has no elements; nothing to compute')}"]
            return Written(label, [], empty, False, False, [])
        if nest.closed:  # a support function's op (calls.py)
            node = units[head].node  # type: ignore[index]
            ins = [(self.types[name], self.arrays[name]) for name in node.inputs]
            rule = self.catalog[node.op].shape_rule
            return call_nest(node, rule, self.spec.ops[node.op], ins, self.stored[node.name], self, label)
        in_nest = set(names)
        if head is not None:
            node = units[head].node
            attrs = self._attrs(node)
            order = loop_order(self.catalog[node.op].shape_rule, node.type, attrs)
            loops = Loops(nest.shape, tuple((a,) for a in order if nest.shape[a] != 1))
        else:
            views = [
                view
                for k in nest.members
                for name, view in zip(units[k].node.inputs, self._views(units[k].node))
                if name not in in_nest
            ]
            loops = plan_loops(nest.shape, views)
        placed = Placement(loops)
        fails = False
        for k in nest.members:
            if k == head:
                fails |= self._anchor(units[k], loops, placed, n)
            else:
                self._expression(units[k].node, loops, placed, in_nest)
        for name in names:
            for dest in self.stored.get(name, ()):
                value = c_dtypes.store(self.c_name[name], self.types[name].dtype)
                placed.store(f"{dest}[{loops.index(nest.shape)}] = {value};")
        heavy = 0 < self.heavy <= loops.size * placed.points if placed.points else False
        parallel = not fails and bool(loops.axes) and (0 < self.threshold <= loops.size or heavy)
        parallel = parallel and placed.outer_count() > 1  # one block: nothing to share
        simd = bool(self.values.get("vectorize")) and head is None
        how = f"{len(loops.axes)} nested loop(s) {list(loops.extents)}" if loops.axes else "no loop"
        lines = placed.lines(f"{label}: {list(nest.shape)}, {how}", parallel, simd)
        if parallel:
            lines = self.outline(label, lines, placed.outer_count())
        first = [line for st in self.staged if st.nest == n for line in conversion(st, value_label(st.value))]
        nodes = [units[k].node for k in nest.members]
        return Written(label, first, lines, fails, parallel, nodes)

    def finish(self, written: Written, repeated: bool) -> list[str]:
        """The statements of a nest: its steps before it, then the nest, or, when another
        nest ``repeated`` its code, the call of their shared function (:mod:`.outline`);
        all in its timing (an empty nest's comment is not timed)."""
        nest = self.outline(written.label, written.lines, None, written.key) if repeated else written.lines
        lines = written.first + nest
        if self.timer is None or not written.nodes:
            return lines
        return self.timer(written.label, lines, written.nodes)

    def copy(self, o: int, name: str, t: TensorType) -> list[str]:
        loops = plan_loops(t.shape, [t.shape])
        placed = Placement(loops)
        index = loops.index(t.shape)
        placed.store(f"out{o}[{index}] = {self.arrays[name]}[{index}];")
        label = f"out{o}: a copy of {value_label(name)}"
        lines = placed.lines(label, False, False)
        return lines if self.timer is None else self.timer(label, lines, [])

    # ------------------------------------------------------------ statements

    def _attrs(self, node: Node) -> AttrView:
        return resolve(self.catalog[node.op], [self.types[n] for n in node.inputs], node.attrs)

    def _views(self, node: Node) -> tuple[tuple[int, ...], ...]:
        rule = self.catalog[node.op].shape_rule
        return operand_shapes(rule, [self.types[n] for n in node.inputs], self._attrs(node))

    def _template_values(self, node: Node) -> dict[str, object]:
        return {
            **self.values,
            "ctype": c_dtypes.compute_type(node.type.dtype),
            "dtype": node.type.dtype,
            **c_attributes(self._attrs(node)),
        }

    def _expression(self, node: Node, loops: Loops, placed: Placement, in_nest: set[str]) -> None:
        binding = self.spec.ops[node.op]
        assert isinstance(binding, ExpressionBinding)
        inputs = []
        for name, view in zip(node.inputs, self._views(node)):
            dtype = self.types[name].dtype
            if name in in_nest:
                inputs.append((self.c_name[name], dtype))
            else:
                inputs.append((c_dtypes.load(f"{self.arrays[name]}[{loops.index(view)}]", dtype), dtype))
        text = render(binding.expression, {**self._template_values(node), **c_dtypes.input_args(inputs)})
        c, dtype = self.c_name[node.name], node.type.dtype
        placed.add(
            f"const {c_dtypes.compute_type(dtype)} {c} = {c_dtypes.rounded(text, dtype)};",
            comment(origin(node)),
            defines=c,
        )

    def _anchor(self, piece: Piece, loops: Loops, placed: Placement, n: int) -> bool:
        """Place the statements of anchor ``piece`` in nest ``n``; whether it can fail."""
        node, c = piece.node, piece.c_name
        var = [loops.variables[p] for p in range(len(loops.axes))]
        axis_var = ["0"] * node.type.rank
        for p, group in enumerate(loops.axes):
            axis_var[group[0]] = var[p]
        rule = self.catalog[node.op].shape_rule
        site = Site(
            node.type,
            tuple(self.types[n] for n in node.inputs),
            self._attrs(node),
            tuple(axis_var),
            tuple(self.arrays[n] for n in node.inputs),
            C_TYPES[node.type.dtype],
            c,
            FAIL,
            piece.part,
            piece.parts,
        )
        anchor = RULES[rule](site)
        dtype = node.type.dtype
        ctype = c_dtypes.compute_type(dtype)
        note = comment(origin(node))
        if rule not in REDUCTION_RULES:
            for step in anchor.steps:
                placed.add(step, "", defines=_defined(step))
            placed.add(f"const {ctype} {c} = {c_dtypes.load(anchor.value, dtype)};", note, defines=c)
            return anchor.can_fail
        binding = self.spec.ops[node.op]
        assert isinstance(binding, ReductionBinding)
        placed.points = math.prod(lv.extent for lv in anchor.levels)
        base = {**self._template_values(node), **{f"x{j}_dtype": t.dtype for j, t in enumerate(site.ins)}}
        accs = {a.name: f"{c}_{a.name}" for a in binding.accumulators}
        loaded = [c_dtypes.load(r, t.dtype) for r, t in zip(anchor.reads, site.ins)]
        floats = float_accumulators(self.values, binding, dtype)
        acc_type = "float" if floats else binding.acc_type
        update_of = {a.name: a.float_update if floats else a.update for a in binding.accumulators}
        plan = None
        packs: dict[int, Staged] = {}
        if self.values.get("block_reductions") and len(_passes(binding)) == 1:
            if dot_product(binding):  # the weights' reads repeat for every block of rows
                chunk = panel_width(placed.points)
                packs = packed_inputs(c, node.inputs, site, anchor, var, loops.extents, n, chunk)
                packed = tuple(packs[j].read if j in packs else r for j, r in enumerate(anchor.reads))
                if packs:
                    plan = plan_blocking(var, loops.extents, replace(anchor, reads=packed), chunk)
            if plan is None:
                packs = {}
                sizes = [DTYPE_BYTES[t.dtype] for t in site.ins]
                plan = plan_blocking(var, loops.extents, anchor, itemsizes=sizes)
        if plan is not None:
            if floats:  # the block's width first (as below): the panels of the block's reads take it
                plan = widened(plan, loops.extents, STAGED_WIDTHS)
                packs.update(block_packed_inputs(c, node.inputs, site, anchor, plan, (var, loops.extents), n))
            blocked = BlockedText(plan, var, loops.extents, acc_type)
            reads = [packs[j].read if j in packs else r for j, r in enumerate(loaded)]
            for j, staged_input in packs.items():
                constant = self.panels.array(staged_input, self.arrays)
                if constant is not None:  # packed when the module is generated
                    alias = f"{c}_x{j}_panels"
                    placed.add(
                        f"const {C_TYPES[site.ins[j].dtype]}* restrict {alias} = {constant};",
                        comment(PANEL_POINTER_NOTE),
                        defines=alias,
                    )
                    reads[j] = staged_read(staged_input.read, staged_input.buffer, alias)
                    continue
                self.staged.append(staged_input)
                self.outline.pointers[staged_input.buffer] = "float*"
            if TiledText.tiles(plan):
                for j in stageable(list(update_of.values()), site.ins):
                    if plan.lane_reads[j]:
                        continue  # see staging.py: a lane-dependent input stays as it is
                    copy = double_copy(c, j, site, node.inputs, n)
                    self.staged.append(copy)
                    self.outline.pointers[copy.buffer] = "double*"
                    reads[j] = staged_read(anchor.reads[j], site.arrays[j], copy.buffer)
            staged = any(st.nest == n and st.panel is None for st in self.staged)
            lanes32 = floats or acc_type in LANES32  # 16 accumulators to an AVX-512 register
            if staged or lanes32:  # each input vector feeds more outputs (tiles.STAGED_WIDTHS)
                plan = widened(plan, loops.extents, STAGED_WIDTHS)
                blocked = BlockedText(plan, var, loops.extents, acc_type)

            def updates(elements: Mapping[str, str]) -> list[str]:
                args = {**base, **{a.name: elements[accs[a.name]] for a in binding.accumulators}}
                args.update((f"x{j}", r) for j, r in enumerate(reads))
                return [
                    f"{elements[accs[a.name]]} = {render(update_of[a.name], args)};"
                    for a in binding.accumulators
                ]

            inits = {accs[a.name]: render(a.init, base) for a in binding.accumulators}
            tiled = TiledText(blocked, c, anchor.levels, staged, lanes32)
            placed.blocked = (blocked, tiled.reduction(inits, updates))
            accs = {name: blocked.element(acc) for name, acc in accs.items()}
        passes = _passes(binding) if plan is None else []
        for group in passes:
            lines = pass_lines(group, accs, base, update_of, loaded, anchor.levels, acc_type, len(passes) > 1)
            placed.add("\n".join(lines), "", defines=tuple(accs[a.name] for a in group))
        result_args = {**base, **accs, "window": str(anchor.window)}
        result_args.update(
            (f"x{j}", c_dtypes.load(element(site.arrays[j], axis_var, t.shape), t.dtype))
            for j, t in enumerate(site.ins)
        )
        result = c_dtypes.rounded(render(binding.result, result_args), dtype)
        placed.add(f"const {ctype} {c} = {result};", note, defines=c)
        return False


def _passes(binding: ReductionBinding) -> list[list]:
    """The accumulators in loops over the reduction space: one loop for all, but an
    accumulator whose update reads an earlier one's final value starts a new loop."""
    groups: list[list] = []
    for a in binding.accumulators:
        used = {p.name for p in placeholders(a.update)}
        if not groups or used & {b.name for g in groups for b in g}:
            groups.append([])
        groups[-1].append(a)
    return groups


def _defined(step: str) -> tuple[str, ...]:
    match = re.match(r"const int64_t (\w+) =", step)
    return (match.group(1),) if match else ()
