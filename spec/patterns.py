"""Composite patterns of a backend spec (``patterns:``): TVM's MergeComposite, as data.

A pattern is a small DAG of catalog ops that the backend runs as one kernel
(conv2d → bias_add → relu as one primitive with a post-op). The spec writes the DAG
as a graph body in byoc's own DSL, read by the DSL's grammar
(:func:`byoc.grammar.graph_parser.parse_body`), so that a pattern reads like the
graphs it matches::

    conv_bias_relu:
      doc: conv2d, bias and relu in one loop nest
      inputs: [x, w, bias]
      match: |
        c = conv(x, w)
        return relu(bias_add(c, bias))
      when: ["conv.groups == 1", "bias_add.axis == 1"]
      constants: [w, bias]
      macros: {4: CSOURCE_CONV2D_BIAS_RELU}

``inputs`` names the values the pattern reads, in the order the kernel takes them
(``${in0_...}``, ``${in1_...}``); every other name of ``match`` is a node. A node is
called, in conditions and placeholders, by the name it is bound to, or by its op when
the op occurs once in the pattern (``conv`` above). Conditions (:mod:`.conditions`)
read a node's attribute, as its kernel uses it (:mod:`byoc.attr_values`: defaults
resolved), or the shape, rank or dtype of a node's input or output
(``conv.in1.shape[2] <= 3``) or of a pattern input (``w.rank == 4``). ``constants``
lists the inputs that must be constants of the graph, and ``dtypes`` (default: the
backend's) the dtypes of the pattern's result.

This module loads and checks a pattern into a frozen :class:`Pattern`; the kind that
declares patterns loads what implements one (:meth:`CodegenKind.load_pattern_binding`),
and :mod:`byoc.generator.composite` matches patterns in graphs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from byoc.builder import OP
from byoc.catalog import AttrDef, Catalog, OpDef
from byoc.errors import ByocError, GraphError, Location, close_names
from byoc.ir import ANON_PREFIX, DTYPES

from . import lowerings
from .bindings import OpBinding, frozen_map
from .body_reader import BodyReader
from .conditions import WHEN_KEY, Condition, Facts, Scope, load_conditions, refusal
from .draft import known
from .lowerings import LoweringBinding
from .macro_args import attribute_of
from .pattern_families import family

if TYPE_CHECKING:
    from .codegen_kind import CodegenKind
    from .draft import SpecDraft
    from .yaml_doc import YamlDoc

PATTERN_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
REQUIRED_KEYS = ("inputs", "match")
OPTIONAL_KEYS = ("doc", WHEN_KEY, "constants", "dtypes", "optional", "variants")
_DOTTED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\Z")


@dataclass(frozen=True, slots=True)
class PatternNode:
    """One op of a pattern: it defines ``name`` (``%k`` for a nested call) from
    ``inputs``, each a pattern input or the name of an earlier node."""

    name: str
    op: str
    inputs: tuple[str, ...]
    opdef: OpDef = field(compare=False, repr=False)
    loc: Location | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Pattern:
    """A validated pattern; ``nodes`` are in topological order, the result last."""

    name: str
    doc: str
    inputs: tuple[str, ...]
    nodes: tuple[PatternNode, ...]
    handles: Mapping[str, int]
    """What conditions and placeholders call each node (its name, or its unique op) -> index."""
    when: tuple[Condition, ...]
    """Every condition, in spec order (:mod:`.conditions`)."""
    constants: frozenset[str]
    dtypes: tuple[str, ...]
    binding: OpBinding
    """What implements the pattern, in the kind's terms (c_source: macros by rank)."""
    loc: Location | None = field(default=None, compare=False, repr=False)
    written_as: str = ""
    """The key of ``patterns:`` that defines it: its name, or for a member of a family
    (:mod:`.pattern_families`), the name of the pattern that makes it."""
    written_in: tuple[str, ...] = ()
    """Where under ``patterns: <written_as>`` its own kind keys (``macros``) are written,
    when not there: ``("variants", <suffix>)`` for a suffix variant that gives them."""

    @property
    def size(self) -> int:
        return len(self.nodes)

    def refusal(self, facts: Facts) -> str | None:
        """Why the pattern's conditions refuse a match, whose ``facts`` hold its nodes
        in the pattern's order and its inputs by name; None when every one holds."""
        return refusal(self.when, facts)

    def attribute(self, name: str) -> tuple[int, AttrDef, int | None] | None:
        """What ``${<node>.<attr>}`` or ``${<node>.<attr><j>}`` names: (node index, the
        attribute, j or None); or ``${<attr>}``, ``${<attr><j>}`` alone, the attribute
        of the one node whose op has it (as an op's macro names its op's, so one macro
        serves the op and patterns of it); None when ``name`` names nothing of this
        pattern, or an attribute that several of its nodes have."""
        m = _DOTTED.match(name)
        if m is None:
            k = self.sole_holder(name)
            found = attribute_of(self.nodes[k].opdef, name) if k is not None else None
            return None if k is None or found is None else (k, found[0], found[1])
        if m.group(1) not in self.handles:
            return None
        k = self.handles[m.group(1)]
        found = attribute_of(self.nodes[k].opdef, m.group(2))
        return None if found is None else (k, found[0], found[1])

    def holders(self, name: str) -> list[int]:
        """The nodes whose op has the attribute that ``${name}`` names (``strides``,
        ``strides0``), in the pattern's order."""
        return [k for k, n in enumerate(self.nodes) if attribute_of(n.opdef, name) is not None]

    def sole_holder(self, name: str) -> int | None:
        """The node whose op alone in the pattern has the attribute ``${name}`` names,
        whose placeholders may then leave out the node: ``${strides0}``."""
        held = self.holders(name)
        return held[0] if len(held) == 1 else None

    def describe(self) -> str:
        parts = [" -> ".join(n.op for n in self.nodes)]
        parts += [f"when {c.text}" for c in self.when]
        if self.constants:
            parts.append(f"constant {', '.join(i for i in self.inputs if i in self.constants)}")
        return "; ".join([*parts, self.binding.describe()])


# ---------------------------------------------------------------------- loading


def load_patterns(doc: YamlDoc, root: Any, catalog: Catalog, draft: SpecDraft, kind: CodegenKind) -> None:
    """Check the spec's ``patterns`` into ``draft.patterns``."""
    node = doc.mapping(root, "patterns", "patterns")
    from byoc.grammar.graph_statements import KEYWORDS

    for name in node:
        if not isinstance(name, str) or not PATTERN_NAME.match(name) or name in KEYWORDS:
            raise doc.error(
                f"pattern name {name!r} must be lower-case letters, digits and _, and not a keyword",
                node,
                name,
                hint=f"graphs write a composite as @backend.<pattern> {{ ... }}; keywords: {', '.join(KEYWORDS)}",
            )
        what = f"pattern {name}"
        pnode = doc.mapping(node, name, what)
        doc.check_keys(
            pnode, what, REQUIRED_KEYS + kind.pattern_required, OPTIONAL_KEYS + kind.pattern_optional
        )
        inputs = _inputs(doc, pnode, what)
        nodes = _read_match(doc, pnode, what, inputs, catalog)
        handles = handles_of(nodes, inputs)
        scope = Scope(
            tuple(n.opdef for n in nodes), tuple(len(n.inputs) for n in nodes), True, handles, inputs
        )
        conditions = load_conditions(doc, pnode, what, scope) if WHEN_KEY in pnode else ()
        constants = subset(doc, pnode, "constants", what, inputs, "an input of the pattern", "inputs")
        dtypes = subset(doc, pnode, "dtypes", what, draft.dtypes, "a dtype of the backend", "its dtypes")
        pdoc = doc.typed(pnode, "doc", str, f"{what}: doc") if "doc" in pnode else ""
        binding = kind.load_pattern_binding(doc, node, name, len(inputs), draft)
        pattern = Pattern(
            str(name),
            str(pdoc).strip(),
            inputs,
            nodes,
            frozen_map(handles),
            conditions,
            frozenset(constants),
            tuple(d for d in DTYPES if d in dtypes) if "dtypes" in pnode else draft.dtypes,
            binding,
            doc.at(node, name),
            str(name),
        )
        if isinstance(binding, LoweringBinding):
            _check_lowering(doc, pnode, what, pattern, draft, catalog)
        for member in family(doc, node, pattern, catalog, draft, kind):
            draft.patterns[member.name] = member


def _check_lowering(
    doc: YamlDoc, pnode: Any, what: str, pattern: Pattern, draft: SpecDraft, catalog: Catalog
) -> None:
    """A lowering stands for its pattern; a family's optional op applies after the
    lowering's value of the name its `after` gives (the result by default), so that
    name must be one the lowering binds; a suffix variant could change what the match
    computes but not the lowering, so a lowering pattern has none."""
    if "variants" in pnode:
        raise doc.error(
            f"{what}: a pattern with a lowering cannot have `variants`",
            pnode,
            "variants",
            hint="write each variant as a pattern with its own match and lowering",
        )
    bound = lowerings.check(doc, pnode, what, pattern, tuple(draft.ops), catalog)
    optional = pnode.get("optional") if isinstance(pnode.get("optional"), dict) else {}
    for op, entry in optional.items():
        after = entry.get("after") if isinstance(entry, dict) else None
        if isinstance(after, str) and after not in bound:
            raise doc.error(
                f"{what}: optional: {op}: the lowering binds no value {after!r}",
                entry,
                "after",
                value=True,
                hint=f"bind the lowering's value that stands for the pattern's {after} to the name {after}",
            )


def _inputs(doc: YamlDoc, pnode: Any, what: str) -> tuple[str, ...]:
    seq = doc.typed(pnode, "inputs", list, f"{what}: inputs")
    if not seq:
        raise doc.error(f"{what}: inputs must list at least one value", pnode, "inputs", value=True)
    seen: list[str] = []
    for i, name in enumerate(seq):
        doc.identifier(seq, i, name, f"{what}: input")
        if name in seen:
            raise doc.error(f"{what}: input {name} is listed twice", seq, i)
        seen.append(str(name))
    return tuple(seen)


def subset(doc: YamlDoc, pnode: Any, key: str, what: str, allowed, noun: str, plural: str) -> tuple[str, ...]:
    """The list ``pnode[key]``, each item one of ``allowed``."""
    if key not in pnode:
        return ()
    seq = doc.typed(pnode, key, list, f"{what}: {key}")
    for i, item in enumerate(seq):
        if item not in allowed:
            raise doc.error(f"{what}: {key}: {item!r} is not {noun}", seq, i, hint=known(plural, allowed))
    return tuple(str(item) for item in seq)


class _MatchReader(BodyReader):
    """Receives the statements of a pattern's ``match`` from the DSL's parser."""

    what = "a pattern"
    no_constant = "list the input in `constants:` instead"

    def __init__(self, catalog: Catalog) -> None:
        super().__init__()
        self.catalog = catalog
        self.nodes: list[PatternNode] = []

    def add_node(self, outputs, op, inputs, loc, *, attrs=(), locate=None, declared=None) -> None:
        output = self.one_output(outputs, loc)
        if attrs:
            raise GraphError(
                f"attribute {attrs[0][0]} in a pattern's match",
                attrs[0][2],
                hint="match ops without attributes; put a condition such as `node.attr == value` in `when:`",
            )
        opdef = self.catalog.get(op)
        if opdef is None:
            close = close_names(op, self.catalog)
            raise GraphError(
                f"unknown op {op!r}",
                loc if locate is None else locate(OP),
                hint=(f"did you mean {' or '.join(close)}? " if close else "")
                + "a pattern matches catalog ops",
            )
        if opdef.several_outputs:
            raise GraphError(f"{op} has several outputs; a pattern matches ops of one output", loc)
        self.nodes.append(PatternNode(output, op, tuple(inputs), opdef, loc))


def _read_match(
    doc: YamlDoc, pnode: Any, what: str, inputs: tuple[str, ...], catalog: Catalog
) -> tuple[PatternNode, ...]:
    from byoc.grammar.graph_parser import BODY_HEADER, parse_body

    text = doc.typed(pnode, "match", str, f"{what}: match")

    def at(loc: Location | None) -> Location:
        if loc is None:
            return doc.at(pnode, "match", value=True)
        lines = text.split("\n")
        column = loc.column - 1 - (len(BODY_HEADER) if loc.line == 1 else 0)
        line = min(loc.line, len(lines))
        offset = sum(len(s) + 1 for s in lines[: line - 1]) + min(max(column, 0), len(lines[line - 1]))
        return doc.at_offset(pnode, "match", offset)

    reader = _MatchReader(catalog)
    try:
        results = parse_body(str(text), reader, catalog)
    except ByocError as exc:
        raise doc.error_at(f"{what}: match: {exc.message}", at(exc.location), hint=exc.hint) from None
    if len(results) != 1:
        raise doc.error_at(f"{what}: a pattern returns one value", at(results[1][1]))
    result, result_loc = results[0]
    nodes = reader.nodes
    by_name: dict[str, PatternNode] = {}
    for n in nodes:
        if n.name in by_name or n.name in inputs:
            raise doc.error_at(
                f"{what}: {n.name} is defined twice"
                if n.name in by_name
                else f"{what}: {n.name} is an input",
                at(n.loc),
                hint="every node of a pattern binds a name of its own",
            )
        by_name[n.name] = n
        for name in n.inputs:
            if name not in by_name and name not in inputs and not any(m.name == name for m in nodes):
                raise doc.error_at(
                    f"{what}: undefined name {name!r} in match",
                    at(n.loc),
                    hint=f"list it in `inputs:` ({', '.join(inputs)}), or bind it in match",
                )
    if result not in by_name:
        raise doc.error_at(
            f"{what}: the pattern returns {result!r}, which no op of it defines",
            at(result_loc),
            hint="return the value of the pattern's last op",
        )
    ordered = _topological(doc, what, by_name, result, at)
    unused_node = next((n for n in nodes if n not in ordered), None)
    if unused_node is not None:
        raise doc.error_at(
            f"{what}: {_shown(unused_node)} does not lead to the pattern's result",
            at(unused_node.loc),
            hint="a pattern is the ops its result is computed from; remove this one",
        )
    used = {name for n in ordered for name in n.inputs}
    seq = pnode["inputs"]
    for i, name in enumerate(inputs):
        if name not in used:
            raise doc.error(
                f"{what}: input {name} is not used in match",
                seq,
                i,
                hint="remove it from `inputs:`, or use it in match",
            )
    return tuple(ordered)


def _topological(
    doc: YamlDoc, what: str, by_name: dict[str, PatternNode], result: str, at
) -> list[PatternNode]:
    """The nodes ``result`` depends on, in dependency order; a cycle is an error."""
    order: list[PatternNode] = []
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        node = by_name.get(name)
        if node is None or state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = path[path.index(name) :] + [name]
            shown = [f"{by_name[n].op}(...)" if n.startswith(ANON_PREFIX) else n for n in cycle]
            raise doc.error_at(
                f"{what}: cycle in match: " + " -> ".join(shown),
                at(node.loc),
                hint="a pattern is a DAG: a node cannot depend on its own result",
            )
        state[name] = 1
        for dep in node.inputs:
            visit(dep, [*path, name])
        state[name] = 2
        order.append(node)

    visit(result, [])
    return order


def _shown(node: PatternNode) -> str:
    return f"the nested {node.op}(...)" if node.name.startswith(ANON_PREFIX) else f"node {node.name}"


def handles_of(nodes: tuple[PatternNode, ...], inputs: tuple[str, ...]) -> dict[str, int]:
    handles = {n.name: k for k, n in enumerate(nodes) if not n.name.startswith(ANON_PREFIX)}
    for k, n in enumerate(nodes):
        if sum(m.op == n.op for m in nodes) == 1 and n.op not in handles and n.op not in inputs:
            handles[n.op] = k
    return handles
