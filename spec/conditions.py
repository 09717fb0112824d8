"""Conditions of a backend spec (``when:``), on an op's mapping or on a pattern.

A condition compares one thing a node has with a value, and a node it refuses is not
one the backend implements (partitioning gives it to the next backend)::

    ops:
      conv:
        macros: {4: MY_CONV}
        when: ["groups == 1", "in1.shape[2] <= 11", "out.dtype == \\"float32\\""]
    patterns:
      conv_relu:
        inputs: [x, w]
        match: "return relu(conv(x, w))"
        when: ["conv.groups == 1", "conv.in1.shape[-1] <= 3", "w.rank == 4"]

What a condition reads (its *subject*):

- on an op's mapping: ``<attr>``, an attribute of the op; ``in<k>.<property>``, of the
  op's input k (from 0); ``out.<property>``, of its (first) output;
- on a pattern: ``<node>.<attr>``, ``<node>.in<k>.<property>`` and
  ``<node>.out.<property>`` of a node (called by its name, or by its op when that
  occurs once), and ``<input>.<property>`` of an input named in ``inputs:``;
- a property is ``shape`` (the list of extents), ``shape[j]`` (one extent; ``-1`` is
  the last axis), ``rank`` or ``dtype`` (a string such as ``"float32"``).

Operators: ``==``, ``!=``, ``in`` and ``not in`` (a JSON list) with JSON values, and
``<``, ``<=``, ``>``, ``>=`` with a number, for the subjects that are numbers (extents,
ranks, int and float attributes). Attributes are compared as the kernel uses them
(:func:`byoc.attr_values.resolve`: defaults resolved, a negative axis counted from
the front).

The text is parsed by a regular expression and checked when the spec loads: an
unknown name, property, input, operator or a value of the wrong type is a
:class:`~byoc.errors.SpecError` located in the condition, with a hint. Nothing of a
spec is evaluated as Python. An extent the tensor lacks (``in1.shape[2]`` of a vector;
``in2`` of an op given two inputs) makes the condition false at partitioning, with
that as the reason: one mapping serves several ranks, so the spec cannot know.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from byoc.attr_values import resolve
from byoc.catalog import Catalog, OpDef
from byoc.ir import DTYPES, AttrValue, Node, TensorType
from byoc.value_types import VALUE_TYPES, value_text

from .draft import known

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc

WHEN_KEY = "when"
"""The key of an op's mapping and of a pattern that holds its conditions."""
OUTPUT = "out"
"""The subject of a node's (first) output."""
TENSOR_PROPERTIES = ("shape", "rank", "dtype")
LISTED = ("in", "not in")
NEGATED = ("!=", "not in")
ORDERED: Mapping[str, Callable[[Any, Any], bool]] = MappingProxyType(
    {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
)
DTYPE = "dtype"
"""The value type of a dtype subject (the others are :data:`~byoc.value_types.VALUE_TYPES`')."""

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_CONDITION = re.compile(
    rf"\s*(?P<subject>{_NAME}(?:\.{_NAME})*)\s*(?:\[(?P<index>[^\]]*)\])?\s*"
    r"(?P<op>==|!=|<=|>=|<|>|not\s+in\b|in\b)\s*(?P<value>.*?)\s*\Z",
    re.S,
)
_INPUT_PORT = re.compile(r"in(0|[1-9][0-9]*)\Z")
_INDEX = re.compile(r"\s*-?[0-9]+\s*\Z")


# ------------------------------------------------------------------ what conditions read


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What conditions read of one graph node: its attributes as its kernel uses them,
    and the types of its inputs and outputs."""

    attrs: Mapping[str, AttrValue]
    inputs: tuple[TensorType, ...]
    outputs: tuple[TensorType, ...]

    @classmethod
    def of(cls, node: Node, types: Mapping[str, TensorType], catalog: Catalog) -> NodeFacts:
        inputs = tuple(types[name] for name in node.inputs)
        opdef = catalog.get(node.op)
        attrs = dict(node.attrs) if opdef is None else resolve(opdef, inputs, node.attrs)
        return cls(attrs, inputs, node.types)


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything one use of conditions reads: an op mapping's one node, or a pattern's
    match (its nodes in the pattern's order, and its inputs by name)."""

    nodes: tuple[NodeFacts, ...]
    inputs: Mapping[str, TensorType] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class Absent:
    """A subject the node lacks (an axis beyond the rank, an input it was not given)."""

    why: str


@dataclass(frozen=True, slots=True)
class Subject:
    """What a condition reads: attribute ``name`` of node ``node`` (``tensor`` None), or
    property ``name`` (shape, rank or dtype; ``index``: one axis of the shape) of a
    tensor: ``in<k>`` or ``out`` of node ``node``, or (``node`` None) the pattern input
    ``tensor``."""

    text: str
    node: int | None
    tensor: str | None
    name: str
    type: str
    """The value type: a name of :data:`~byoc.value_types.VALUE_TYPES`, or :data:`DTYPE`."""
    index: int | None = None

    def read(self, facts: Facts) -> object:
        """The subject's value in ``facts``, or :class:`Absent`."""
        if self.tensor is None:
            return facts.nodes[self.node or 0].attrs[self.name]
        owner = self.text.rsplit(".", 1)[0]
        if self.node is None:
            t = facts.inputs[self.tensor]
        else:
            node = facts.nodes[self.node]
            ports = node.outputs if self.tensor == OUTPUT else node.inputs
            k = 0 if self.tensor == OUTPUT else int(self.tensor[2:])
            if k >= len(ports):
                return Absent(f"the node has {len(node.inputs)} input(s), no {owner}")
            t = ports[k]
        if self.name == DTYPE:
            return t.dtype
        if self.name == "rank":
            return t.rank
        if self.index is None:
            return t.shape
        if not -t.rank <= self.index < t.rank:
            return Absent(f"{owner} is {t}, which has no axis {self.index}")
        return t.shape[self.index]


@dataclass(frozen=True, slots=True)
class Condition:
    """``<subject> <operator> <values>``: ``values`` holds the one value of ``==``,
    ``!=`` and the orderings, and the list of ``in`` and ``not in``; ``text`` is the
    condition as messages show it."""

    subject: Subject
    operator: str
    values: tuple[object, ...]
    text: str

    @property
    def node(self) -> int | None:
        """The pattern node the condition reads (0 for an op's), None for a pattern input."""
        return self.subject.node

    @property
    def attr(self) -> str | None:
        """The attribute the condition reads, None when it reads a tensor."""
        return self.subject.name if self.subject.tensor is None else None

    def holds(self, value: object) -> bool:
        """Whether the condition holds for the subject's ``value``."""
        compare = ORDERED.get(self.operator)
        if compare is not None:
            return compare(value, self.values[0])
        return (value in self.values) != (self.operator in NEGATED)

    def refusal(self, facts: Facts) -> str | None:
        """Why the condition refuses ``facts`` (``when: in1.shape[2] <= 11 is false
        (in1.shape[2] = 13)``), or None when it holds."""
        value = self.subject.read(facts)
        if isinstance(value, Absent):
            return f"{WHEN_KEY}: {self.text} is false ({value.why})"
        if self.holds(value):
            return None
        return f"{WHEN_KEY}: {self.text} is false ({self.subject.text} = {_shown(value)})"


def refusal(conditions: Sequence[Condition], facts: Facts) -> str | None:
    """Why the first of ``conditions`` that does not hold refuses ``facts``, or None."""
    return next((why for c in conditions if (why := c.refusal(facts)) is not None), None)


def _shown(value: object) -> str:
    return json.dumps(value) if isinstance(value, str) else value_text(value)


# ------------------------------------------------------------------ loading


@dataclass(frozen=True, slots=True)
class Scope:
    """The names conditions may read: the op of each node and how many inputs it takes
    (None: any number), and for a pattern the nodes' names (``handles``) and its inputs.
    An op's mapping has one node, called by no name."""

    ops: tuple[OpDef, ...]
    arities: tuple[int | None, ...]
    pattern: bool = False
    handles: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    inputs: tuple[str, ...] = ()

    @classmethod
    def of_op(cls, opdef: OpDef) -> Scope:
        return cls((opdef,), (opdef.max_inputs,))

    def syntax(self) -> str:
        """How a condition is written here, for hints."""
        if self.pattern:
            subjects = (
                "<node>.<attribute>, <node>.in<k>.<property>, <node>.out.<property> or <input>.<property>"
            )
            examples = 'conv.groups == 1, conv.in1.shape[2] <= 3, x.dtype == "float32"'
        else:
            subjects = "<attribute>, in<k>.<property> or out.<property>"
            examples = 'groups == 1, in1.shape[2] <= 11, in1.rank == 1, out.dtype == "float32"'
        return (
            f"write {subjects} (a property: shape, shape[j], rank, dtype), then ==, !=, in, "
            f"not in, <, <=, > or >=, and a JSON value: {examples}"
        )


def load_conditions(doc: YamlDoc, node: Any, what: str, scope: Scope) -> tuple[Condition, ...]:
    """The conditions of ``node["when"]``, a list of strings, checked against ``scope``."""
    seq = doc.typed(node, WHEN_KEY, list, f"{what}: {WHEN_KEY}")
    return tuple(_condition(doc, seq, i, what, scope) for i in range(len(seq)))


def _condition(doc: YamlDoc, seq: Any, i: int, what: str, scope: Scope) -> Condition:
    text = doc.typed(seq, i, str, f"{what}: a condition")
    m = _CONDITION.match(text)
    if m is None:
        raise doc.error(f"{what}: cannot read the condition {text!r}", seq, i, hint=scope.syntax())

    def fail(message: str, group: str, hint: str | None = None, at: int | None = None) -> Exception:
        offset = m.start(group) if at is None else at
        return doc.error_at(f"{what}: {message}", doc.at_offset(seq, i, offset), hint=hint)

    subject = _subject(m, scope, fail)
    op = " ".join(m.group("op").split())
    if op in ORDERED and subject.type not in ("int", "float"):
        raise fail(
            f"{subject.text} is {_type_name(subject)}; {op} compares numbers",
            "op",
            hint="use ==, !=, in or not in",
        )
    values = _values(m.group("value"), op, subject, fail)
    shown = ", ".join(map(_shown, values))
    return Condition(subject, op, values, f"{subject.text} {op} {f'[{shown}]' if op in LISTED else shown}")


def _subject(m: re.Match, scope: Scope, fail) -> Subject:
    """What the subject of ``m`` names in ``scope`` (see the module docstring)."""
    parts = m.group("subject").split(".")
    starts = [m.start("subject") + sum(len(p) + 1 for p in parts[:j]) for j in range(len(parts))]
    if scope.pattern:
        if parts[0] in scope.inputs:
            if len(parts) != 2:
                raise fail(
                    f"{parts[0]} is an input of the pattern: a condition reads its shape, rank or dtype",
                    "subject",
                    hint=f'{parts[0]}.shape[0] == 1, {parts[0]}.rank == 4, {parts[0]}.dtype == "float32"',
                )
            return _tensor(m, scope, None, parts[0], parts[1], starts[0], fail)
        if parts[0] not in scope.handles:
            raise fail(
                f"condition on {parts[0]!r}, which names no node of the pattern",
                "subject",
                hint=known("nodes (a bound name, or an op that occurs once)", scope.handles)
                + "; "
                + known("inputs", scope.inputs),
            )
        node, parts, starts = scope.handles[parts[0]], parts[1:], starts[1:]
    else:
        node = 0
    if len(parts) == 1:
        return _attribute(m, scope, node, parts[0], starts[0], fail)
    if len(parts) == 2:
        return _tensor(m, scope, node, parts[0], parts[1], starts[0], fail)
    raise fail(f"cannot read {m.group('subject')!r}", "subject", hint=scope.syntax())


def _attribute(m: re.Match, scope: Scope, node: int, name: str, start: int, fail) -> Subject:
    opdef = scope.ops[node]
    adef = next((a for a in opdef.attrs if a.name == name), None)
    if adef is None:
        raise fail(
            f"{opdef.name} has no attribute {name!r}",
            "subject",
            at=start,
            hint=known(f"attributes of {opdef.name}", [a.name for a in opdef.attrs])
            + f"; a tensor is in<k> or {OUTPUT}: {scope.syntax()}",
        )
    if m.group("index") is not None:
        raise fail(f"only a shape takes an index, not {name}", "index", hint=scope.syntax())
    return Subject(m.group("subject"), node, None, name, adef.type)


def _tensor(m: re.Match, scope: Scope, node: int | None, tensor: str, prop: str, start: int, fail) -> Subject:
    """Property ``prop`` of ``tensor``: a port of pattern node ``node``, or (``node``
    None) a pattern input."""
    if node is not None:
        port = _INPUT_PORT.match(tensor)
        arity = scope.arities[node]
        if tensor != OUTPUT and (port is None or (arity is not None and int(port.group(1)) >= arity)):
            name = scope.ops[node].name
            ports = "in0, in1, ..." if arity is None else ", ".join(f"in{k}" for k in range(arity))
            raise fail(
                f"{name} has no input {tensor!r}"
                if port is None
                else f"{name} has {arity} input(s), no {tensor}",
                "subject",
                at=start,
                hint=f"its inputs: {ports or 'none'} (from 0); its output: {OUTPUT}; an attribute stands "
                f"alone ({'<node>.' if scope.pattern else ''}<attribute>); {scope.syntax()}",
            )
    prop_at = start + len(tensor) + 1
    if prop not in TENSOR_PROPERTIES:
        raise fail(
            f"a tensor has no property {prop!r}",
            "subject",
            at=prop_at,
            hint=f"its properties: {', '.join(TENSOR_PROPERTIES)} (shape[j]: one extent)",
        )
    text = m.group("subject")
    index = m.group("index")
    if index is None:
        vtype = "ints" if prop == "shape" else "int" if prop == "rank" else DTYPE
        return Subject(text, node, tensor, prop, vtype)
    if prop != "shape" or not _INDEX.match(index):
        raise fail(
            f"{text}[{index}]: "
            + ("the axis must be an integer" if prop == "shape" else f"{prop} takes no index"),
            "index",
            hint="shape[0] is the first extent, shape[-1] the last",
        )
    j = int(index)
    return Subject(f"{text}[{j}]", node, tensor, prop, "int", j)


def _values(raw: str, op: str, subject: Subject, fail) -> tuple[object, ...]:
    """The checked values of a condition: one, or (``in``, ``not in``) a list."""
    listed = op in LISTED
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = _NOT_JSON
    if parsed is _NOT_JSON or (listed and not isinstance(parsed, list)):
        raise fail(
            f"{raw!r} is not " + ("a JSON list of values" if listed else "a JSON value"),
            "value",
            hint=f"{subject.text} is {_type_name(subject)}: " + _examples(subject, listed),
        )
    values = []
    for v in parsed if listed else [parsed]:
        try:
            values.append(_checked(subject, v))
        except ValueError as exc:
            raise fail(
                f"the value of {subject.text} {exc}", "value", hint=_examples(subject, listed)
            ) from None
    return tuple(values)


def _checked(subject: Subject, value: object) -> object:
    """``value`` as a value of ``subject``'s type; raises ValueError."""
    if subject.type == DTYPE:
        if value not in DTYPES:
            raise ValueError(f"must be a dtype, got {value!r}")
        return str(value)
    checked = VALUE_TYPES[subject.type].check(value)
    extents = checked if isinstance(checked, tuple) else (checked,)
    if subject.tensor is not None and any(v < 0 for v in extents):  # an extent or a rank
        raise ValueError(f"must not be negative, got {value!r}")
    return checked


def _type_name(subject: Subject) -> str:
    if subject.tensor is None:
        return f"an attribute of type {subject.type}"
    return {"ints": "a list of extents", "int": "an integer", DTYPE: "a dtype name"}[subject.type]


def _examples(subject: Subject, listed: bool) -> str:
    if subject.type == DTYPE:
        return f'in ["float32", "float64"]; dtypes: {", ".join(DTYPES)}' if listed else '== "float32"'
    if listed:
        return "in [1, 2]"
    return {"ints": "== [1, 1]", "str": '== "name"', "bool": "== true"}.get(subject.type, "== 1, <= 11")


_NOT_JSON = object()
