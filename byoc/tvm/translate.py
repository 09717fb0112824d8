"""Relax expressions -> byoc IR, in memory: no DSL text, constants straight from their
arrays.

:class:`Translator` walks relax expressions from a result back to its leaves: a
``Var`` bound in the scope is its value, an unbound one a parameter, a relax constant
a byoc :class:`~byoc.ir.Constant`, a call of an op a node chosen by the rules of
``relax_ops.yaml`` (:mod:`byoc.tvm.rules`), and a call of a local function (a
``Composite`` of ``FuseOpsByPattern``) that function's body, inlined.

Which rule a call takes is the first that applies to it and whose node alone the
backend takes, as byoc's own partitioning says (:class:`Oracle`); the same choice is
made for a pattern's check and for the codegen, so what a check accepted is what
the codegen builds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from tvm import relax
from tvm.ir import Constant as Constant_
from tvm.ir import Op

from byoc.catalog import normalize_attrs
from byoc.errors import ByocError
from byoc.ir import CALL_OP, DTYPES, Constant, Function, Node, Param, Program, TensorType

from .rules import OUT_SHAPE, TRANSPOSE_OP, Rule, rules_for


class Unsupported(Exception):
    """A relax expression that byoc.tvm cannot translate (a dynamic shape, an op
    without a rule, a dtype byoc lacks): it stays in TVM."""


def tensor_type(ty) -> TensorType:
    """The byoc type of a relax tensor type of static shape."""
    if not isinstance(ty, relax.TensorType) or ty.shape is None or not hasattr(ty.shape, "values"):
        raise Unsupported(f"not a tensor of known shape: {ty}")
    dtype = str(ty.dtype)
    if dtype not in DTYPES:
        raise Unsupported(f"dtype {dtype} is not one of byoc's")
    try:
        shape = tuple(int(d) for d in ty.shape.values)
    except TypeError:
        raise Unsupported(f"a dynamic shape: {ty}") from None
    return TensorType(shape, dtype)


def _plain(value):
    """A relax attribute value as a byoc attribute value (ints, tuples of ints, str, bool)."""
    if value is None:
        return None
    if isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "__len__") and not isinstance(value, str):
        return tuple(int(v) for v in value)
    if hasattr(value, "value"):  # an IntImm or a FloatImm
        return value.value
    return str(value)


@dataclass(frozen=True, slots=True)
class Lowered:
    """A relax call as one catalog node: its inputs (a relax expression, or an array
    for a constant the rule reshaped), its attributes, its result's type."""

    rule: Rule
    inputs: tuple[object, ...]
    attrs: tuple[tuple[str, object], ...]
    type: TensorType


def lower(rule: Rule, call: relax.Call, resolve: Callable[[object], object]) -> Lowered:
    """``call`` by ``rule``, or Unsupported when the rule's conditions do not hold."""
    attrs = call.attrs
    for key, allowed in rule.require.items():
        if str(getattr(attrs, key)) not in allowed:
            raise Unsupported(f"{rule.relax}: {key} is {getattr(attrs, key)}, not {' or '.join(allowed)}")
    out = tensor_type(call.ty if rule.item is None else call.ty.fields[rule.item])
    args = [a for a in call.args if isinstance(a.ty, relax.TensorType)]
    inputs: list[object] = []
    for k, arg in enumerate(args):
        if k in rule.transposed:
            inputs.append(_transposed(resolve(arg)))
        elif k == rule.bias:
            inputs.append(_channel_bias(resolve(arg), out))
        else:
            inputs.append(arg)
    given = []
    for name, source in rule.attrs.items():
        value = out.shape if source == OUT_SHAPE else _plain(getattr(attrs, source))
        if value is not None:
            given.append((name, value))
    return Lowered(rule, tuple(inputs), tuple(given), out)


def _transposed(value) -> object:
    if not (isinstance(value, relax.Call) and isinstance(value.op, Op) and value.op.name == TRANSPOSE_OP):
        raise Unsupported(f"not a {TRANSPOSE_OP}")
    if value.attrs.axes is not None or len(tensor_type(value.ty).shape) != 2:
        raise Unsupported(f"a {TRANSPOSE_OP} that is not a 2-D transpose")
    return value.args[0]


def _channel_bias(value, out: TensorType) -> np.ndarray:
    if not isinstance(value, Constant_):
        raise Unsupported("the bias is not a constant")
    array = value.value.numpy()
    shape = (1,) * (len(out.shape) - array.ndim) + array.shape
    if len(out.shape) < 2 or len(shape) != len(out.shape) or shape[1] != out.shape[1]:
        raise Unsupported("not one value per channel")
    if any(d != 1 for k, d in enumerate(shape) if k != 1):
        raise Unsupported("not one value per channel")
    return array.reshape(-1)


class Oracle:
    """Whether a backend takes byoc functions whole: byoc's own partitioning decides
    (``byoc.building.partition_over``: dtypes, ranks, broadcasting, conditions,
    composite patterns and what the machine computes), after byoc's validation."""

    def __init__(self, backend: str, spec_path: Sequence[str] | None = None) -> None:
        from byoc.api import backend_loader, load_catalog

        self.backend = backend
        self.spec_path = spec_path
        self.catalog = load_catalog(spec_path=spec_path)
        self.loader = backend_loader(spec_path, self.catalog)
        self.spec = self.loader(backend)
        self._nodes: dict[tuple, bool] = {}

    def partition(self, program: Program) -> Program:
        from byoc.building import partition_over
        from byoc.validate import validate_program

        validate_program(program, self.catalog)
        return partition_over(program, [self.backend], self.loader, self.catalog)

    def takes(self, fn: Function) -> bool:
        """Whether partitioning ``fn`` puts all of it into one region of the backend."""
        try:
            nodes = self.partition(Program((fn,))).functions[0].nodes
        except ByocError:
            return False
        return len(nodes) == 1 and nodes[0].callee is not None and nodes[0].callee.backend == self.backend

    def takes_node(self, lowered: Lowered, inputs: Sequence[object]) -> bool:
        """Whether the backend takes the node of ``lowered`` alone, its ``inputs``
        (resolved) stood in for by parameters of their types, or by the constants they
        are; cached by the node's types."""
        stand_ins = tuple(_stand_in(x) for x in inputs)
        key = (
            (lowered.rule, lowered.attrs, lowered.type)
            + tuple(x if isinstance(x, TensorType) else TensorType(x.shape, str(x.dtype)) for x in stand_ins)
            + tuple(isinstance(x, np.ndarray) for x in stand_ins)
        )
        if key not in self._nodes:
            t = Translator(self, {})
            alone = Lowered(lowered.rule, stand_ins, lowered.attrs, lowered.type)
            self._nodes[key] = self.takes(t.function([t.node(alone)], "check"))
        return self._nodes[key]


def _stand_in(x) -> np.ndarray | TensorType:
    """A node input as a node checked alone takes it: a constant's values, else its type."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, Constant_):
        return x.value.numpy().astype(str(x.ty.dtype), copy=False)
    return tensor_type(x.ty)


class Translator:
    """Builds one byoc function from relax expressions; ``scope`` maps relax variables
    to their values (a function's bindings, or a pattern match's)."""

    def __init__(self, oracle: Oracle, scope: Mapping[object, object]) -> None:
        self.oracle = oracle
        self.scope = dict(scope)
        self.params: list[Param] = []
        self.constants: list[Constant] = []
        self.nodes: list[Node] = []
        self.names: dict[object, str] = {}

    def resolve(self, expr):
        while isinstance(expr, relax.Var) and expr in self.scope:
            expr = self.scope[expr]
        return expr

    def param(self, var: relax.Var) -> str:
        name = self.names[var] = self.fresh_param(tensor_type(var.ty))
        return name

    def constant(self, array: np.ndarray, dtype: str | None = None) -> str:
        name = f"c{len(self.constants)}"
        dtype = dtype or str(array.dtype)
        if dtype not in DTYPES:
            raise Unsupported(f"a constant of dtype {dtype}")
        self.constants.append(Constant(name, TensorType(tuple(array.shape), dtype), array))
        return name

    def value(self, expr) -> str:
        """The byoc name of a relax expression's value, translating what it needs."""
        expr = self.resolve(expr)
        if expr in self.names:
            return self.names[expr]
        if isinstance(expr, relax.Var):
            name = self.param(expr)
        elif isinstance(expr, Constant_):
            name = self.constant(expr.value.numpy(), str(expr.ty.dtype))
        elif isinstance(expr, relax.Call) and isinstance(expr.op, Op):
            name = self.node(self.choose(expr))
        elif isinstance(expr, relax.TupleGetItem):
            call = self.resolve(expr.tuple_value)
            if not (isinstance(call, relax.Call) and isinstance(call.op, Op)):
                raise Unsupported("an item of a tuple that no op returns")
            name = self.node(self.choose(call, expr.index))
        elif isinstance(expr, relax.Call) and isinstance(self.resolve(expr.op), relax.Function):
            name = self.inline(self.resolve(expr.op), expr.args)
        else:
            raise Unsupported(f"cannot translate {type(expr).__name__}")
        self.names[expr] = name
        return name

    def inline(self, fn: relax.Function, args: Sequence[object]) -> str:
        """The result of a local function (a composite) called with ``args``."""
        self.scope.update(zip(fn.params, args))
        return self.value(self.bind(fn.body))

    def bind(self, body):
        """A function body's result, its bindings added to the scope."""
        if isinstance(body, relax.SeqExpr):
            for block in body.blocks:
                self.scope.update((b.var, b.value) for b in block.bindings)
            return body.body
        return body

    def choose(self, call: relax.Call, item: int | None = None) -> Lowered:
        """The first rule that applies to ``call`` (to item ``item`` of its tuple
        result) and whose node the backend takes; else the first that applies (a
        composite may take what a single node cannot)."""
        applying = []
        for rule in rules_for(call.op.name, item):
            try:
                applying.append(lower(rule, call, self.resolve))
            except Unsupported:
                continue
        if not applying:
            what = call.op.name if item is None else f"item {item} of {call.op.name}"
            raise Unsupported(f"no rule of byoc/tvm/relax_ops.yaml translates this {what}")
        for lowered in applying:
            if self.oracle.takes_node(lowered, [self.resolve(x) for x in lowered.inputs]):
                return lowered
        return applying[0]

    def node(self, lowered: Lowered) -> str:
        inputs = []
        for x in lowered.inputs:
            if isinstance(x, np.ndarray):
                inputs.append(self.constant(x))
            elif isinstance(x, TensorType):  # a stand-in input of a node checked alone
                inputs.append(self.fresh_param(x))
            else:
                inputs.append(self.value(x))
        opdef = self.oracle.catalog[lowered.rule.op]
        try:
            attrs = normalize_attrs(opdef, lowered.attrs)
        except ByocError as exc:
            raise Unsupported(str(exc)) from None
        name = f"v{len(self.nodes)}"
        self.nodes.append(Node((name,), lowered.rule.op, tuple(inputs), (lowered.type,), attrs))
        return name

    def fresh_param(self, t: TensorType) -> str:
        name = f"p{len(self.params)}"
        self.params.append(Param(name, t))
        return name

    def function(self, outputs: Sequence[str], name: str) -> Function:
        return Function(name, tuple(self.params), tuple(self.constants), tuple(self.nodes), tuple(outputs))


def outputs_of(body) -> list[object]:
    """The result expressions of a function body: one, or each of a tuple's."""
    return list(body.fields) if isinstance(body, relax.Tuple) else [body]


def region(host: Function, symbol: str, backend: str) -> Function:
    """``host`` (a function of ops only) as one explicit region of ``backend`` named
    ``symbol``, called from a host function with the same parameters."""
    callee = Function(symbol, host.params, host.constants, host.nodes, host.outputs, backend)
    return _host_calling(host, callee)


def _host_calling(host: Function, callee: Function) -> Function:
    outs = tuple(f"out{k}" for k in range(len(callee.outputs)))
    call = Node(outs, CALL_OP, tuple(p.name for p in callee.params), callee.output_types, callee=callee)
    return Function(host.name, host.params, (), (call,), outs)


def as_one_region(host: Function, parted: Function, symbol: str, backend: str) -> Function:
    """``parted`` (``host`` partitioned by byoc, composites matched) when it is one
    region of ``backend`` taking every parameter of ``host``: that region named
    ``symbol``, its parameters in ``host``'s order. Otherwise ``host`` whole as an
    explicit region (whose lowering then says what the backend lacks)."""
    calls = [n for n in parted.nodes if n.callee is not None]
    if len(parted.nodes) == 1 and len(calls) == 1 and calls[0].callee.backend == backend:
        callee = calls[0].callee
        by_name = {p.name: p for p in callee.params}
        if set(by_name) == {p.name for p in host.params} and list(calls[0].outputs) == list(parted.outputs):
            ordered = tuple(by_name[p.name] for p in host.params)
            return _host_calling(
                host,
                Function(
                    symbol, ordered, callee.constants, callee.nodes, callee.outputs, backend, composite=None
                ),
            )
    return region(host, symbol, backend)
