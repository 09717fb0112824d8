"""Patterns that a backend computes by other catalog ops: ``lowering:``.

A pattern of a kind without kernels of its own for composites (``c_fused``) says how
the backend computes what it matches, as a graph body in byoc's DSL over the pattern's
inputs, with the matched nodes' attributes as placeholders::

    qdq_conv:
      inputs: [x, xs, xz, w, ws, wz, ys, yz]
      match: |
        c = conv(dequantize_linear(x, xs, xz), dequantize_linear(w, ws, wz))
        return quantize_linear(c, ys, yz)
      lowering: |
        p = conv_integer(x, w, xz, reshape(wz, newshape=[-1]), strides=${conv.strides}, ...)
        return quantize_linear(multiply(cast(p, to="float32"), ...), ys, yz)

Where partitioning takes a match (step 0), the matched nodes are replaced by the
lowering's, which then go to a backend as any other nodes do (the pattern's backend
maps each of them, which the spec loader checks), and constants among them are folded
at build as any others are. ``${<node>.<attr>}`` is the attribute's whole value as
the DSL writes it (``[1, 1]``), of the node a condition would name so.

A lowering must compute what the match computes, within the tolerance of the match's
result: it is the spec's claim, which byoc's tests check against the reference (a
QDQ convolution lowered to an integer product differs from the float computation by
the rounding of a float sum, so its quantized result by at most one step).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from byoc.catalog import AttrDef, Catalog, infer_types, normalize_attrs
from byoc.errors import ByocError, GraphError, Location, close_names
from byoc.ir import ANON_PREFIX, AttrValue, Node, TensorType

from .bindings import OpBinding
from .body_reader import BodyReader

if TYPE_CHECKING:
    from .patterns import Pattern
    from .yaml_doc import YamlDoc

PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
"""``${conv.strides}``: a matched node's attribute."""


@dataclass(frozen=True, slots=True)
class LoweringBinding(OpBinding):
    """A pattern computed by other catalog ops: ``text``, a graph body over the
    pattern's inputs (the spec's ``lowering:``)."""

    text: str = ""
    optional: tuple[tuple[str, str | None], ...] = ()
    """A family member's optional ops (:mod:`.pattern_families`), in order: each op and
    the name of the lowering's value it takes (the pattern's node of that name), or
    None for the lowering's result."""

    def mapping_text(self) -> str:
        text = "lowered to " + " ".join(self.text.split())
        for op, after in self.optional:
            text += f"; then {op} of {after}" if after else f"; then {op} of its result"
        return text


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement of a lowering: ``outputs = op(inputs, attrs)``."""

    output: str
    op: str
    inputs: tuple[str, ...]
    attrs: tuple[tuple[str, AttrValue], ...]
    loc: Location | None = field(default=None, compare=False)


class _Reader(BodyReader):
    """Receives the statements of a lowering from the DSL's parser, in order (nested
    calls get names of their own)."""

    what = "a lowering"
    no_constant = "a constant it needs is an input of the pattern"

    def __init__(self) -> None:
        super().__init__()
        self.statements: list[Statement] = []

    def add_node(self, outputs, op, inputs, loc, *, attrs=(), locate=None, declared=None) -> None:
        output = self.one_output(outputs, loc)
        self.statements.append(Statement(output, op, tuple(inputs), tuple((k, v) for k, v, _ in attrs), loc))


def attribute_text(value: AttrValue) -> str:
    """An attribute value as the DSL writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(attribute_text(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def render(text: str, value_of: Callable[[str], str | None]) -> tuple[str, list[tuple[int, str]]]:
    """``text`` with each ``${name}`` replaced by ``value_of(name)``; and the offsets and
    names of those ``value_of`` does not know."""
    unknown: list[tuple[int, str]] = []

    def one(m: re.Match[str]) -> str:
        found = value_of(m.group(1))
        if found is None:
            unknown.append((m.start(), m.group(1)))
            return "0"
        return found

    return PLACEHOLDER.sub(one, text), unknown


def read(text: str, catalog: Catalog) -> tuple[list[Statement], str, Location | None]:
    """The statements of a rendered lowering, its result's name and where it is returned."""
    from byoc.grammar.graph_parser import parse_body

    reader = _Reader()
    results = parse_body(text, reader, catalog)
    if len(results) != 1:
        raise GraphError("a lowering returns one value", results[1][1])
    return reader.statements, results[0][0], results[0][1]


def node_attribute(pattern: Pattern, name: str) -> tuple[int, AttrDef] | None:
    """What ``${name}`` of a lowering names: (the pattern node, its attribute); None
    when nothing of the pattern, or an element (``strides0``) rather than a whole value."""
    found = pattern.attribute(name)
    if found is None or found[2] is not None:
        return None
    return found[0], found[1]


def _example(adef: AttrDef) -> AttrValue:
    """A value of ``adef``'s type, for reading a lowering before any match: its default,
    else its first choice, else a value of its type."""
    if adef.default is not None:
        return adef.default
    if adef.choices:
        return adef.choices[0]
    examples: dict[str, AttrValue] = {"int": 1, "float": 1.0, "bool": False, "str": "x", "ints": [1]}
    return examples.get(adef.type, 1)


def lowered(
    pattern: Pattern,
    binding: LoweringBinding,
    matched: Sequence[Node],
    inputs: Sequence[str],
    types: Mapping[str, TensorType],
    catalog: Catalog,
    fresh: Callable[[str], str],
) -> list[Node]:
    """The nodes that replace a match of ``pattern``: ``matched`` holds its graph
    nodes in the pattern's order (the result last), ``inputs`` the graph value of each
    pattern input. Intermediate values are named by ``fresh(base)``, ``base`` the
    pattern's name and the lowering's own name of the value (or its op, for a nested
    call): ``qdq_conv_p_0``, what the generated code's comments then show; the result
    keeps the name of the matched result. Raises ByocError (RuleError's message) where the
    lowering does not type on this match."""

    def value_of(name: str) -> str | None:
        found = node_attribute(pattern, name)
        if found is None:
            return None
        k, adef = found
        return attribute_text(matched[k].attr(adef.name))

    text, unknown = render(binding.text, value_of)
    assert not unknown, "the spec loader checked every placeholder"
    statements, result, _ = read(text, catalog)
    root = matched[-1]
    names = dict(zip(pattern.inputs, inputs))
    known = dict(types)
    nodes: list[Node] = []

    def add(op: str, ins: tuple[str, ...], given, own: str, last: bool) -> str:
        opdef = catalog[op]
        out = root.name if last else fresh(f"{pattern.name}_{own}")
        attrs = normalize_attrs(opdef, given)
        (out_type,) = infer_types(opdef, [known[n] for n in ins], attrs)
        known[out] = out_type
        nodes.append(Node((out,), op, ins, (out_type,), attrs, None, root.loc))
        return out

    for st in statements:
        after = [
            op for op, target in binding.optional if target == (None if st.output == result else st.output)
        ]
        own = st.op if st.output.startswith(ANON_PREFIX) else st.output
        ins = tuple(names[n] for n in st.inputs)
        value = add(st.op, ins, st.attrs, own, st.output == result and not after)
        for k, op in enumerate(after):  # a family's optional ops, on this value
            value = add(op, (value,), (), op, st.output == result and k == len(after) - 1)
        names[st.output] = value
    if known[root.name] != root.type:
        raise GraphError(f"the lowering gives {known[root.name]}, not the match's {root.type}")
    return nodes


def check(
    doc: YamlDoc, pnode: Any, what: str, pattern: Pattern, ops: Sequence[str], catalog: Catalog
) -> set[str]:
    """Check pattern ``pnode``'s ``lowering``: placeholders that name an attribute of a
    node of the pattern, statements of ops the backend maps (``ops``) over the
    pattern's inputs and earlier names, one value returned. Errors are located in the
    lowering's text. Returns the names its statements bind."""
    from byoc.grammar.graph_parser import BODY_HEADER

    text = str(pnode["lowering"])

    def at(offset: int) -> Location:
        return doc.at_offset(pnode, "lowering", offset)

    def placeholder_value(name: str) -> str | None:
        found = node_attribute(pattern, name)
        return attribute_text(_example(found[1])) if found is not None else None

    rendered, unknown = render(text, placeholder_value)
    if unknown:
        offset, name = unknown[0]
        raise doc.error_at(
            f"{what}: lowering: ${{{name}}} names no attribute of a node of the pattern",
            at(offset),
            hint="write ${<node>.<attribute>} (${conv.strides}), the whole value of a matched node's attribute",
        )

    def locate(loc: Location | None) -> Location:
        """Where in the lowering's text ``loc`` (of the rendered text) is: the statement's
        line and column, but the lowering itself where a placeholder moved the columns."""
        if loc is None or rendered != text:
            return doc.at(pnode, "lowering", value=True)
        lines = text.split("\n")
        column = loc.column - 1 - (len(BODY_HEADER) if loc.line == 1 else 0)
        line = min(loc.line, len(lines))
        return at(sum(len(s) + 1 for s in lines[: line - 1]) + min(max(column, 0), len(lines[line - 1])))

    try:
        statements, result, result_loc = read(rendered, catalog)
    except ByocError as exc:
        raise doc.error_at(f"{what}: lowering: {exc.message}", locate(exc.location), hint=exc.hint) from None
    defined = set(pattern.inputs)
    for st in statements:
        if st.op not in catalog:
            close = close_names(st.op, catalog)
            raise doc.error_at(
                f"{what}: lowering: unknown op {st.op!r}",
                locate(st.loc),
                hint=f"did you mean {' or '.join(close)}?" if close else "a lowering computes by catalog ops",
            )
        if st.op not in ops:
            raise doc.error_at(
                f"{what}: lowering: the backend does not map {st.op}",
                locate(st.loc),
                hint="a lowering computes by ops the backend maps, so that its nodes stay on it",
            )
        for name in st.inputs:
            if name not in defined:
                raise doc.error_at(
                    f"{what}: lowering: undefined name {name!r}",
                    locate(st.loc),
                    hint=f"the pattern's inputs are {', '.join(pattern.inputs)}",
                )
        if st.output in defined:
            raise doc.error_at(
                f"{what}: lowering: {st.output} is "
                + ("an input of the pattern" if st.output in pattern.inputs else "defined twice"),
                locate(st.loc),
                hint="every value of a lowering binds a name of its own",
            )
        defined.add(st.output)
    if result not in {st.output for st in statements}:
        raise doc.error_at(
            f"{what}: lowering: it returns {result!r}, which no op of it computes",
            locate(result_loc),
            hint="return the value of the lowering's last op",
        )
    return {st.output for st in statements}
