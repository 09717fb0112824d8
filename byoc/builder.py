"""Build a validated :class:`~byoc.ir.Function` from statements in any order.

Both front ends feed a :class:`FunctionBuilder` with parameters, constants and node
statements as they read them. While the text defines each name before using it, the
builder types the statements in source order as they come, a batch at a time, and
``finish`` types the rest; at the first use before a definition it stops, and
``finish`` orders the nodes topologically instead (reporting cycles,
:mod:`.body_order`) and types them all. Types come from the op catalog, declared
shapes are checked, and the first problem found raises a located
:class:`~byoc.errors.GraphError`. Use-before-definition is legal text; only a real
cycle is an error.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter

from .body_order import canonical_order, clipped, dependency_order
from .catalog import Catalog, RuleError, infer_types, normalize_attrs
from .errors import GraphError, Location, did_you_mean
from .ir import (
    ANON_PREFIX,
    CALL_OP,
    Attrs,
    AttrValue,
    Constant,
    Function,
    Node,
    Param,
    TensorType,
    WeightsSource,
    first_uses,
    shape_problem,
)

Locator = Callable[[int], Location]
"""Where a part of a statement is: ``locate(i)`` for input ``i``, ``locate(OP)`` for
the op name, ``locate(DECLARED)`` for a declared type. Front ends compute locations
lazily, on error only, so that well-formed text pays nothing for them."""

LineLocator = Callable[[Location, int], Location]
"""A builder-wide :data:`Locator` for statements that bring none of their own:
``locator(loc, i)`` finds part ``i`` of the statement that starts at ``loc``, by
re-reading the source there. It keeps nothing per statement (no closure, no copy of
the line), which matters when a text has 100k of them."""

OP = -1
DECLARED = -2

TYPING_BATCH = 64
"""Statements are typed in batches of this many as they are added, while their
objects are still in the CPU's caches, rather than in one pass after the last: at
100k lines a second pass over them all read them back from memory."""
_NEVER = 1 << 62


class Statement:
    """A node as read from text: names only, types not yet known."""

    __slots__ = ("outputs", "op", "inputs", "attrs", "loc", "locate", "declared", "region")

    def __init__(self, outputs, op, inputs, attrs, loc, locate, declared, region):
        self.outputs: tuple[str, ...] = outputs
        self.op: str = op
        self.inputs: tuple[str, ...] = inputs
        self.attrs: Sequence[tuple[str, AttrValue, Location | None]] = attrs
        self.loc: Location = loc
        self.locate: Locator | None = locate
        self.declared: TensorType | None = declared
        self.region: FunctionBuilder | None = region


@dataclass(frozen=True, slots=True)
class Naming:
    """How a front end's values are called in messages: ExampleJSON says ``id 7``
    for the value the IR names ``v7``."""

    noun: str = "name"
    show: Callable[[str], str] = lambda name: name


USER_OPS = "An op of your own ops.yaml needs its directory on the spec path (--spec-path)."
"""The second half of an unknown op's hint: the op may be a user's, whose directory was not given."""


class FunctionBuilder:
    """Collects one function's statements; ``finish`` validates and orders them.

    A region body is a nested builder, closed with :meth:`close_region` and added to
    the enclosing one with :meth:`add_region`: names it uses but does not define are
    captured from the enclosing function and become its parameters.
    """

    def __init__(
        self,
        catalog: Catalog,
        name: str | None,
        loc: Location | None = None,
        *,
        source: str | None = None,
        backend: str | None = None,
        naming: Naming | None = None,
        locator: LineLocator | None = None,
        composite: str | None = None,
    ) -> None:
        self.catalog = catalog
        self.name = name
        self.loc = loc
        self.source = source
        self.backend = backend
        self.composite = composite
        self.naming = naming or Naming()
        self.locator = locator
        self.params: list[Param] = []
        self.constants: list[Constant] = []
        self._constant_of: dict[str, Constant] = {}
        """Each of ``constants`` by its name (a rule's check_constant reads them)."""
        self.statements: list[Statement] = []
        self._nodes: list[Node] = []
        """The typed nodes of the first statements, in source order (see TYPING_BATCH)."""
        self._type_at = TYPING_BATCH
        """The statement count at which add_node types the next batch; never, once a
        statement could not be typed in source order."""
        self.defined: dict[str, int] = {}
        """Every name defined so far, numbered in definition order; ``_locs[n]`` says where."""
        self._locs: list[Location | None] = []
        self._types: list[TensorType | None] = []
        """The type of every defined name by definition number; None until known."""
        self.kinds: dict[str, str] = {}
        """The kind of every defined name that is not a node (parameter, constant, ...)."""
        self._anon = 0
        self._infer_cache: dict[tuple, tuple[Attrs, tuple[TensorType, ...]]] = {}
        """(op, input types, given attrs, output count) -> (normalized attrs, output
        types), a tuple that every such node shares. Sharing it saves a tuple per node,
        one the young collections would scan: 1.5-2.5% of a 100k-line parse in paired
        rounds."""
        self.captures: list[tuple[str, Location]] = []
        self.bindings: tuple[str, ...] = ()
        self._function: Function | None = None

    # ------------------------------------------------------------------ errors

    def error(self, message: str, loc: Location | None, hint: str | None = None) -> GraphError:
        return GraphError(message, loc or self.loc, hint=hint, source=self.source)

    def where(self, st: Statement, index: int) -> Location:
        """Where part ``index`` (an input number, OP or DECLARED) of ``st`` is."""
        if st.locate is not None:
            return st.locate(index)
        if self.locator is not None:
            return self.locator(st.loc, index)
        return st.loc

    def _define(self, name: str, loc: Location | None, kind: str, type_: TensorType | None = None) -> None:
        if name in self.defined:
            first = self._locs[self.defined[name]]
            where = f" (first defined at {first})" if first else ""
            noun = self.naming.noun
            raise self.error(
                f"duplicate {noun} {self.naming.show(name)!r}: already defined as a {self.kinds.get(name, 'node')}{where}",
                loc,
                hint=f"every parameter, constant and node needs its own {noun}",
            )
        self.defined[name] = len(self._locs)
        self._locs.append(loc)
        self._types.append(type_)
        if kind != "node":
            self.kinds[name] = kind

    # --------------------------------------------------------------- statements

    def anonymous(self) -> str:
        """A fresh name for a nested call; never a valid identifier in the DSL."""
        self._anon += 1
        return f"{ANON_PREFIX}{self._anon}"

    def add_param(self, name: str, type_: TensorType, loc: Location | None) -> None:
        self._define(name, loc, "parameter", type_)
        self.params.append(Param(name, type_, loc))

    def add_constant(
        self,
        name: str,
        type_: TensorType,
        values: tuple,
        loc: Location | None,
        source: WeightsSource | None = None,
    ) -> None:
        self._define(name, loc, "constant", type_)
        self.constants.append(Constant(name, type_, values, loc, source))
        self._constant_of[name] = self.constants[-1]

    def add_node(
        self,
        outputs: tuple[str, ...],
        op: str,
        inputs: tuple[str, ...],
        loc: Location,
        *,
        attrs: Sequence[tuple[str, AttrValue, Location | None]] = (),
        locate: Locator | None = None,
        declared: TensorType | None = None,
    ) -> None:
        for out in outputs:
            self._define(out, loc, "node")
        st = Statement(outputs, op, inputs, attrs, loc, locate, declared, None)
        statements = self.statements
        statements.append(st)
        if len(statements) >= self._type_at:
            self._type_batch()

    def add_region(self, outputs: tuple[str, ...], body: FunctionBuilder, loc: Location) -> None:
        """Bind ``outputs`` to the results of a finished-reading region body."""
        body.bindings = outputs
        for out in outputs:
            self._define(out, loc, "region output")
        inputs = tuple(n for n, _ in body.captures)
        locs = [where for _, where in body.captures]
        self.statements.append(Statement(outputs, CALL_OP, inputs, (), loc, locs.__getitem__, None, body))
        self._type_at = _NEVER  # typed in finish: its shadowing check needs every outer name

    def close_region(
        self,
        results: Sequence[tuple[str, Location]],
        params: Sequence[tuple[str, Location]] | None = None,
    ) -> None:
        """Record a region body's returned names and compute what it captures: its
        parameters, in order of first use, or in the order ``params`` lists them."""
        self._results = list(results)
        uses = [(name, st, i) for st in self.statements for i, name in enumerate(st.inputs)]
        uses += [(name, loc, None) for name, loc in results]
        self.captures = [
            (name, where if k is None else self.where(where, k))
            for name, where, k in first_uses(uses, self.defined, itemgetter(0))
        ]
        if params is not None:
            self.captures = self._listed_captures(params)

    def _listed_captures(self, params: Sequence[tuple[str, Location]]) -> list[tuple[str, Location]]:
        """The captures in the order of a region's parameter list, which must name each
        of them once and nothing else."""
        used = dict(self.captures)
        listed: dict[str, Location] = {}
        for name, loc in params:
            if name in listed:
                raise self.error(
                    f"{name!r} is listed twice in the region's parameters", loc, hint="list it once"
                )
            if name not in used:
                where = "is defined in the region" if name in self.defined else "is not used by the region"
                raise self.error(
                    f"region parameter {name!r} {where}",
                    loc,
                    hint="list the names from outside that the region's body uses, each once",
                )
            listed[name] = loc
        missing = [name for name in used if name not in listed]
        if missing:
            raise self.error(
                f"the region uses {', '.join(map(repr, missing))} from outside but its parameter list "
                "does not name it",
                self.loc,
                hint=f"add {', '.join(missing)} to the list, or leave the list out for the order of first use",
            )
        return [(name, used[name]) for name in listed]

    # ------------------------------------------------------------------ finish

    def finish(self, outputs: Sequence[tuple[str, Location]]) -> Function:
        """Order, type and check everything; return the validated Function."""
        for name, loc in outputs:
            if name not in self.defined:
                raise self.undefined_error(name, loc)
        if self._type_pending():  # every statement in source order, most typed in batches already
            nodes = self._nodes
        else:  # a name is used before its definition (or not at all): sort, or report the cycle
            types: dict[str, TensorType] = {p.name: p.type for p in self.params}
            types.update((c.name, c.type) for c in self.constants)
            ordered, outputs = canonical_order(self, dependency_order(self, types), outputs)
            nodes = []
            for st in ordered:
                node = self._typed_node(st, tuple(map(types.__getitem__, st.inputs)))
                assert node is not None  # sorted: every input is typed by now
                types.update(zip(node.outputs, node.types))
                nodes.append(node)
        return Function(
            self.name,
            tuple(self.params),
            tuple(self.constants),
            tuple(nodes),
            tuple(name for name, _ in outputs),
            self.backend,
            self.loc,
            self.composite,
        )

    def _finish_region(self, param_types: Sequence[TensorType], outer: dict[str, int]) -> Function:
        if self._function is not None:  # already typed, before the outer body was reordered
            return self._function
        for name, index in self.defined.items():
            if name in outer and name not in self.bindings and not name.startswith(ANON_PREFIX):
                raise self.error(
                    f"{name!r} in this region shadows {name!r} of the enclosing graph",
                    self._locs[index],
                    hint="rename it; a region may only redefine the names it binds",
                )
        for (name, loc), type_ in zip(self.captures, param_types):
            self.params.append(Param(name, type_, loc))
            self._define(name, loc, "parameter", type_)
        self._function = self.finish(self._results)
        return self._function

    def show(self, name: str) -> str:
        """How messages call value ``name``."""
        return "(nested call)" if name.startswith(ANON_PREFIX) else self.naming.show(name)

    def undefined_error(self, name: str, loc: Location | None) -> GraphError:
        close = difflib.get_close_matches(name, [n for n in self.defined if not n.startswith(ANON_PREFIX)], 1)
        show = self.naming.show
        hint = (
            f"did you mean {show(close[0])!r}?"
            if close
            else "define it as a parameter, constant or node first"
        )
        return self.error(f"undefined {self.naming.noun} {show(name)!r}", loc, hint=hint)

    def _type_batch(self) -> None:
        """Type the statements read since the last batch. A type error stops the
        batches, and ``finish`` raises it when it types that statement again: the
        errors of reading the text (a duplicate name further down, say) still come
        first, as they would if every statement were typed in ``finish``."""
        try:
            self._type_pending()
        except GraphError:
            self._type_at = _NEVER

    def _type_pending(self) -> bool:
        """Type the statements added since the last batch, in source order, recording
        their output types; False (and no more batches) at the first that uses a name
        not typed yet.

        This is the common case, and one pass: the list of types by definition
        number doubles as the record of what is typed so far, so no ordering pass
        and no second table keyed by name are needed.
        """
        defined, types, nodes = self.defined, self._types, self._nodes
        for st in self.statements[len(nodes) :]:
            try:
                input_types = tuple([types[defined[name]] for name in st.inputs])
            except KeyError:  # undefined: the ordering pass reports it, located
                node = None
            else:
                node = self._typed_node(st, input_types)  # type: ignore[arg-type]
            if node is None:  # an input is defined further down, or not at all
                self._type_at = _NEVER
                return False
            for name, t in zip(node.outputs, node.types):
                types[defined[name]] = t
            nodes.append(node)
        self._type_at = len(self.statements) + TYPING_BATCH
        return True

    def _typed_node(self, st: Statement, input_types: tuple[TensorType | None, ...]) -> Node | None:
        """The typed node of ``st``, or None if an input's type is not known yet (a None
        in ``input_types``). Checking that only on a cache miss keeps TensorType's
        Python-level ``__eq__`` off the common path: no cached key holds a None."""
        if st.region is not None:
            if None in input_types:
                return None
            callee = st.region._finish_region(input_types, self.defined)
            out_types = callee.output_types
            return Node(st.outputs, CALL_OP, st.inputs, out_types, (), callee, st.loc)
        # The attribute values' types are part of the key: 1, 1.0 and True are equal in Python.
        key = (
            st.op,
            input_types,
            tuple([(k, type(v), v) for k, v, _ in st.attrs]) if st.attrs else (),
            len(st.outputs),
        )
        cached = self._infer_cache.get(key)
        if cached is None:
            if None in input_types:
                return None
            cached = self._infer_cache[key] = self._infer(st, input_types)  # type: ignore[arg-type]
        attrs, out_types = cached
        if self.catalog[st.op].rule.check_constant is not None:
            self._check_constants(st)
        declared = st.declared
        if declared is not None and declared is not out_types[0] and declared != out_types[0]:
            out = out_types[0]
            raise self.error(
                f"shape mismatch: {st.op} gives {out} here, but the text declares {declared}",
                self.where(st, DECLARED),
                hint=f"declare shape: {' '.join(map(str, out.shape))}",
            )
        return Node(st.outputs, st.op, st.inputs, out_types, attrs, None, st.loc)

    def _check_constants(self, st: Statement) -> None:
        """The op's check of the values of its inputs that are constants of this
        function (quantize_linear's scale), reported at the node."""
        check = self.catalog[st.op].rule.check_constant
        for index, name in enumerate(st.inputs):
            c = self._constant_of.get(name)
            problem = check(index, c.values) if c is not None else None
            if problem is not None:
                raise self.error(f"{st.op}: {problem.message}", self.where(st, OP), hint=problem.hint)

    def _infer(
        self, st: Statement, input_types: tuple[TensorType, ...]
    ) -> tuple[Attrs, tuple[TensorType, ...]]:
        op = self.catalog.get(st.op)
        if op is None:
            hint = did_you_mean(st.op, self.catalog) or f"known ops: {', '.join(self.catalog)}. "
            hint += USER_OPS
            raise self.error(f"unknown op {st.op!r}", self.where(st, OP), hint=hint)
        if op.several_outputs and st.outputs[0].startswith(ANON_PREFIX):
            raise self.error(
                f"{st.op} has several outputs, so it cannot be used inside an expression",
                self.where(st, OP),
                hint=f"bind its outputs first, `a, b = {st.op}(...)`, then use the names",
            )
        attrs = self._attrs(op, st) if st.attrs or op.attrs else ()
        try:
            out_types = infer_types(op, input_types, attrs, len(st.outputs))
        except RuleError as exc:
            args = ", ".join(clipped([f"{self.show(n)}: {t}" for n, t in zip(st.inputs, input_types)]))
            where = self._attr_loc(st, exc.key) or self.where(st, OP)
            raise self.error(f"{st.op}({args}): {exc.message}", where, hint=exc.hint) from None
        for out in out_types:
            problem = shape_problem(out.shape)
            if problem is not None:  # e.g. concatenating tensors near the limit
                raise self.error(f"{st.op} gives {out}, which is too large: {problem}", st.loc)
        return attrs, out_types

    def _attrs(self, op, st: Statement) -> Attrs:
        try:
            return normalize_attrs(op, [(k, v) for k, v, _ in st.attrs])
        except RuleError as exc:
            raise self.error(exc.message, self._attr_loc(st, exc.key) or st.loc, hint=exc.hint) from None

    @staticmethod
    def _attr_loc(st: Statement, key: str | None) -> Location | None:
        """Where the text gives attribute ``key`` (its last mention), if it does."""
        return next((at for k, _, at in reversed(st.attrs) if k == key), None)
