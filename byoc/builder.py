"""Build a validated :class:`~byoc.ir.Function` from statements in any order.

Both front ends feed a :class:`FunctionBuilder` with parameters, constants and node
statements as they read them. ``finish`` then resolves names, orders the nodes
topologically (reporting cycles), infers every type from the op catalog and checks
declared shapes, raising a located :class:`~byoc.errors.GraphError` for the first
problem. Use-before-definition is legal text; only a real cycle is an error.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter

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


class _Statement:
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
        self.statements: list[_Statement] = []
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

    def where(self, st: _Statement, index: int) -> Location:
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
        self.statements.append(_Statement(outputs, op, inputs, attrs, loc, locate, declared, None))

    def add_region(self, outputs: tuple[str, ...], body: FunctionBuilder, loc: Location) -> None:
        """Bind ``outputs`` to the results of a finished-reading region body."""
        body.bindings = outputs
        for out in outputs:
            self._define(out, loc, "region output")
        inputs = tuple(n for n, _ in body.captures)
        locs = [where for _, where in body.captures]
        self.statements.append(_Statement(outputs, CALL_OP, inputs, (), loc, locs.__getitem__, None, body))

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
                raise self._undefined(name, loc)
        nodes = self._typed_in_source_order()
        if nodes is None:  # a name is used before its definition: sort, or report the cycle
            types: dict[str, TensorType] = {p.name: p.type for p in self.params}
            types.update((c.name, c.type) for c in self.constants)
            ordered, outputs = self._canonical(self._toposort(types), outputs)
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

    def _show(self, name: str) -> str:
        return "(nested call)" if name.startswith(ANON_PREFIX) else self.naming.show(name)

    def _undefined(self, name: str, loc: Location | None) -> GraphError:
        close = difflib.get_close_matches(name, [n for n in self.defined if not n.startswith(ANON_PREFIX)], 1)
        show = self.naming.show
        hint = (
            f"did you mean {show(close[0])!r}?"
            if close
            else "define it as a parameter, constant or node first"
        )
        return self.error(f"undefined {self.naming.noun} {show(name)!r}", loc, hint=hint)

    def _toposort(self, known: dict[str, TensorType]) -> list[_Statement]:
        """Statements in dependency order, for a body that uses names before defining
        them (source order is typed directly by ``_type_in_order``)."""
        statements = self.statements
        for st in statements:  # an undefined name is reported before any cycle
            for i, name in enumerate(st.inputs):
                if name not in self.defined:
                    raise self._undefined(name, self.where(st, i))
        # Depth-first search; a grey node met again closes a cycle.
        producer = {out: st for st in statements for out in st.outputs}
        state: dict[int, int] = {}
        order: list[_Statement] = []
        for root in statements:
            if id(root) in state:
                continue
            stack: list[tuple[_Statement, int]] = [(root, 0)]
            state[id(root)] = 1
            while stack:
                st, i = stack[-1]
                if i == len(st.inputs):
                    stack.pop()
                    state[id(st)] = 2
                    order.append(st)
                    continue
                stack[-1] = (st, i + 1)
                name = st.inputs[i]
                if name not in producer:
                    if name not in known:
                        raise self._undefined(name, self.where(st, i))
                    continue
                dep = producer[name]
                mark = state.get(id(dep))
                if mark == 1:
                    path = [s.outputs[0] for s, _ in stack]
                    cycle = path[path.index(dep.outputs[0]) :] + [dep.outputs[0]]
                    raise self.error(
                        "cycle: " + " -> ".join(_clipped([self._show(n) for n in cycle])),
                        self.where(st, i),
                        hint="a node cannot depend on its own output, directly or indirectly",
                    )
                if mark is None:
                    state[id(dep)] = 1
                    stack.append((dep, 0))
        return order

    def _canonical(
        self, order: list[_Statement], outputs: Sequence[tuple[str, Location]]
    ) -> tuple[list[_Statement], list[tuple[str, Location]]]:
        """Put a reordered body in the order that printing and re-parsing it gives.

        A nested call's anonymous nodes are read just before the statement that holds
        them; keep them there, and renumber anonymous names in the new order, so that
        ``parse(print(f)) == f`` also holds when the text used names before defining them.
        """
        nested = {n for st in self.statements for n in st.inputs if n.startswith(ANON_PREFIX)}
        groups: dict[int, list[_Statement]] = {}
        pending: list[_Statement] = []
        for st in self.statements:
            pending.append(st)
            if st.outputs[0] not in nested:  # a statement, not a nested call inside one
                groups[id(st)], pending = pending, []
        order = [s for st in order if id(st) in groups for s in groups[id(st)]]
        rename = {
            out: f"{ANON_PREFIX}{k}"
            for k, out in enumerate((o for st in order for o in st.outputs if o.startswith(ANON_PREFIX)), 1)
        }
        for st in order:
            st.outputs = tuple(rename.get(n, n) for n in st.outputs)
            st.inputs = tuple(rename.get(n, n) for n in st.inputs)
        return order, [(rename.get(n, n), loc) for n, loc in outputs]

    def _typed_in_source_order(self) -> list[Node] | None:
        """Every statement's typed node, in source order; None at the first statement
        that uses a name not typed yet (defined further down, or not at all), after
        which ``finish`` sorts.

        This is the common case, and one pass: the list of types by definition
        number doubles as the record of what is typed so far, so no ordering pass
        and no second table keyed by name are needed.
        """
        defined, types = self.defined, self._types
        nodes: list[Node] = []
        for st in self.statements:
            try:
                input_types = tuple([types[defined[name]] for name in st.inputs])
            except KeyError:  # undefined: the ordering pass reports it, located
                return None
            node = self._typed_node(st, input_types)  # type: ignore[arg-type]
            if node is None:  # an input is defined further down
                return None
            for name, t in zip(node.outputs, node.types):
                types[defined[name]] = t
            nodes.append(node)
        return nodes

    def _typed_node(self, st: _Statement, input_types: tuple[TensorType | None, ...]) -> Node | None:
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

    def _check_constants(self, st: _Statement) -> None:
        """The op's check of the values of its inputs that are constants of this
        function (quantize_linear's scale), reported at the node."""
        check = self.catalog[st.op].rule.check_constant
        for index, name in enumerate(st.inputs):
            c = self._constant_of.get(name)
            problem = check(index, c.values) if c is not None else None
            if problem is not None:
                raise self.error(f"{st.op}: {problem.message}", self.where(st, OP), hint=problem.hint)

    def _infer(
        self, st: _Statement, input_types: tuple[TensorType, ...]
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
            args = ", ".join(_clipped([f"{self._show(n)}: {t}" for n, t in zip(st.inputs, input_types)]))
            where = self._attr_loc(st, exc.key) or self.where(st, OP)
            raise self.error(f"{st.op}({args}): {exc.message}", where, hint=exc.hint) from None
        for out in out_types:
            problem = shape_problem(out.shape)
            if problem is not None:  # e.g. concatenating tensors near the limit
                raise self.error(f"{st.op} gives {out}, which is too large: {problem}", st.loc)
        return attrs, out_types

    def _attrs(self, op, st: _Statement) -> Attrs:
        try:
            return normalize_attrs(op, [(k, v) for k, v, _ in st.attrs])
        except RuleError as exc:
            raise self.error(exc.message, self._attr_loc(st, exc.key) or st.loc, hint=exc.hint) from None

    @staticmethod
    def _attr_loc(st: _Statement, key: str | None) -> Location | None:
        """Where the text gives attribute ``key`` (its last mention), if it does."""
        return next((at for k, _, at in reversed(st.attrs) if k == key), None)


def _clipped(items: list[str], keep: int = 6) -> list[str]:
    """``items``, or its first and last ``keep`` around a count of the rest, so that an
    error about a 10k-node cycle or a 10k-input call stays one readable line."""
    if len(items) <= 2 * keep + 1:
        return items
    return [*items[:keep], f"... ({len(items) - 2 * keep:,} more)", *items[-keep:]]
