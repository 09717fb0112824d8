"""Families of patterns: one entry of a spec's ``patterns:`` that stands for several.

Two keys of a pattern make its family, and they combine:

- ``optional:`` maps a catalog op of one input to what the pattern with that op
  applied changes (``{name, after, doc, vars}``, each optional). The op applies to the
  pattern's result, or with ``after: <node>`` to that node's value, before what took
  it (``relu`` between a conv and the QuantizeLinear of its result). The variant is
  named ``<pattern>_<op>`` unless the entry gives ``name``.
- ``variants:`` maps a suffix to the keys a variant replaces (``constants``,
  ``macros``, ``vars``, ``doc``): conv with constant weights packed at init
  (``const: {constants: [w], macros: ...}``) beside the same conv whose weights each
  call reorders. The variant is named ``<pattern>_<suffix>``.

Each optional op applies to the pattern and to each of its variants (``conv_bias``,
``relu``, ``const``: ``conv_bias_relu_const``, ``conv_bias_relu``, ``conv_bias_const``
and ``conv_bias``, in that order). A variant with an optional op is larger than one
without, so partitioning tries it first; a suffix variant comes before its pattern,
so it takes the tie where its constants hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from byoc.catalog import Catalog, OpDef
from byoc.errors import Location, close_names
from byoc.ir import ANON_PREFIX

from .bindings import frozen_map
from .lowerings import LoweringBinding

if TYPE_CHECKING:
    from .codegen_kind import CodegenKind
    from .draft import SpecDraft
    from .patterns import Pattern
    from .yaml_doc import YamlDoc

OPTIONAL_KEYS = ("name", "after", "doc", "vars")
"""What an entry of ``optional:`` may say of the pattern with that op applied."""
VARIANT_KEYS = ("doc", "constants", "vars")
"""What an entry of ``variants:`` may replace, besides the kind's own pattern keys."""


@dataclass(frozen=True, slots=True)
class _Optional:
    op: str
    opdef: OpDef
    name: str
    after: int
    """The index of the node whose value the op takes."""
    doc: str
    vars: dict[str, str] | None
    loc: Location
    handle: str | None = None
    """What ``after`` says (a node's name, or its op), when given."""


def family(
    doc: YamlDoc, node: Any, base: Pattern, catalog: Catalog, draft: SpecDraft, kind: CodegenKind
) -> list[Pattern]:
    """The patterns ``base`` (``node[base.name]``) stands for, in the order partitioning
    should try those of the same size: those with an optional op, the suffix variants,
    then ``base``."""
    pnode = node[base.name]
    members = [*(_suffix_variants(doc, node, base, draft, kind) if "variants" in pnode else []), base]
    if "optional" not in pnode:
        return members
    made: list[Pattern] = []
    for opt in _optionals(doc, node, base, catalog, draft, kind):
        for member in members:
            name = opt.name + member.name[len(base.name) :]
            if name in node or name in draft.patterns or any(p.name == name for p in made):
                raise doc.error(
                    f"pattern {base.name}: optional: {opt.op} makes pattern {name}, which the spec defines too",
                    pnode["optional"],
                    opt.op,
                    hint="name the variant otherwise (`name:`), or drop one of the two",
                )
            made.append(_with_op(member, opt, name))
    return [*made, *members]


def _suffix_variants(
    doc: YamlDoc, node: Any, base: Pattern, draft: SpecDraft, kind: CodegenKind
) -> list[Pattern]:
    from .patterns import PATTERN_NAME, subset

    what = f"pattern {base.name}: variants"
    vnode = doc.mapping(node[base.name], "variants", what)
    if not vnode:
        raise doc.error(
            f"{what} lists no variant",
            node[base.name],
            "variants",
            value=True,
            hint="variants: {const: {constants: [w], macros: {...}}}",
        )
    found: list[Pattern] = []
    for suffix in vnode:
        name = f"{base.name}_{suffix}"
        if not isinstance(suffix, str) or not PATTERN_NAME.match(name):
            raise doc.error(
                f"{what}: suffix {suffix!r} must be lower-case letters, digits and _", vnode, suffix
            )
        if name in node or name in draft.patterns:
            raise doc.error(
                f"{what}: {suffix} makes pattern {name}, which the spec defines too",
                vnode,
                suffix,
                hint="pick another suffix, or drop one of the two",
            )
        entry = doc.mapping(vnode, suffix, f"{what}: {suffix}")
        own = tuple(k for k in (*kind.pattern_required, *kind.pattern_optional) if k != "vars")
        doc.check_keys(entry, f"{what}: {suffix}", (), (*VARIANT_KEYS, *own))
        gives_own = any(k in entry for k in own)  # its own macros: loaded, and located there
        binding = base.binding
        if gives_own:
            binding = kind.load_pattern_binding(doc, vnode, suffix, len(base.inputs), draft)
            if "vars" not in entry:
                binding = replace(binding, vars=base.binding.vars)  # type: ignore[call-arg]
        elif "vars" in entry:
            given = kind.load_vars(doc, entry, f"pattern {name}", draft)  # type: ignore[attr-defined]
            binding = replace(binding, vars=frozen_map({**binding.vars, **given}))  # type: ignore[attr-defined]
        binding = replace(binding, op=name)
        constants = base.constants
        if "constants" in entry:
            given = subset(
                doc, entry, "constants", f"{what}: {suffix}", base.inputs, "an input of the pattern", "inputs"
            )
            constants = frozenset(given)
        text = doc.typed(entry, "doc", str, f"pattern {name}: doc").strip() if "doc" in entry else ""
        if not text and "constants" in entry:
            listed = " and ".join(i for i in base.inputs if i in constants)
            text = f"{base.doc.rstrip('.')}, {listed} constant." if base.doc else f"{listed} constant"
        found.append(
            replace(
                base,
                name=name,
                doc=text or base.doc,
                constants=constants,
                binding=binding,
                loc=doc.at(vnode, suffix),
                written_in=("variants", suffix) if gives_own else (),
            )
        )
    return found


def _optionals(
    doc: YamlDoc, node: Any, base: Pattern, catalog: Catalog, draft: SpecDraft, kind: CodegenKind
) -> list[_Optional]:
    from .patterns import PATTERN_NAME

    what = f"pattern {base.name}: optional"
    onode = doc.mapping(node[base.name], "optional", what)
    if not onode:
        raise doc.error(
            f"{what} lists no op", node[base.name], "optional", value=True, hint="optional: {relu: {}}"
        )
    found: list[_Optional] = []
    for op in onode:
        opdef = catalog.get(op) if isinstance(op, str) else None
        if opdef is None:
            close = close_names(str(op), catalog)
            raise doc.error(
                f"{what}: unknown op {op!r}",
                onode,
                op,
                hint=(f"did you mean {' or '.join(close)}? " if close else "")
                + "an optional op is a catalog op",
            )
        if not opdef.min_inputs <= 1 <= opdef.max_inputs or opdef.several_outputs:
            raise doc.error(
                f"{what}: {op} does not take one input, so it cannot follow the pattern's result",
                onode,
                op,
                hint="an optional op applies to the result alone: relu, sigmoid, tanh, ...",
            )
        entry = onode[op]
        if entry is None:
            entry = {}
        elif not isinstance(entry, dict):
            raise doc.error(
                f"{what}: {op} must map to what its pattern changes ({', '.join(OPTIONAL_KEYS)}), or to {{}}",
                onode,
                op,
                value=True,
            )
        else:
            doc.check_keys(entry, f"{what}: {op}", (), OPTIONAL_KEYS)
        name = f"{base.name}_{op}"
        if "name" in entry:
            name = doc.typed(entry, "name", str, f"{what}: {op}: name")
            if not PATTERN_NAME.match(name):
                raise doc.error(
                    f"{what}: {op}: pattern name {name!r} must be lower-case letters, digits and _",
                    entry,
                    "name",
                    value=True,
                )
        after, handle = len(base.nodes) - 1, None
        if "after" in entry:
            handle = doc.typed(entry, "after", str, f"{what}: {op}: after")
            if handle not in base.handles:
                raise doc.error(
                    f"{what}: {op}: after {handle!r} names no node of the pattern",
                    entry,
                    "after",
                    value=True,
                    hint=f"a node's name, or its op where the pattern has one: {', '.join(sorted(base.handles))}",
                )
            after = base.handles[handle]
        given = kind.load_vars(doc, entry, f"pattern {name}", draft) if "vars" in entry else None  # type: ignore[attr-defined]
        text = doc.typed(entry, "doc", str, f"pattern {name}: doc").strip() if "doc" in entry else ""
        found.append(_Optional(str(op), opdef, name, after, text, given, doc.at(onode, op), handle))
    return found


def _with_op(member: Pattern, opt: _Optional, name: str) -> Pattern:
    """``member`` with ``opt``'s op taking the value of its node ``opt.after``, in place
    of that node for every node that took it."""
    from .patterns import PatternNode, handles_of

    target = member.nodes[opt.after].name
    added_name = f"{ANON_PREFIX}{opt.op}"
    nodes = []
    for n in member.nodes:
        nodes.append(replace(n, inputs=tuple(added_name if i == target else i for i in n.inputs)))
        if n.name == target:
            nodes.append(PatternNode(added_name, opt.op, (target,), opt.opdef, opt.loc))
    binding = member.binding
    if opt.vars is not None:
        binding = replace(binding, vars=frozen_map({**binding.vars, **opt.vars}))  # type: ignore[attr-defined]
    last = opt.after == len(member.nodes) - 1
    if isinstance(binding, LoweringBinding):  # the op on the lowering's value of the name `after` gives
        binding = replace(binding, optional=(*binding.optional, (opt.op, None if last else opt.handle)))
    shown = "" if last else f" after {member.nodes[opt.after].op}"
    return replace(
        member,
        name=name,
        doc=opt.doc
        or (f"{member.doc.rstrip('.')}, then {opt.op}{shown}." if member.doc else f"then {opt.op}"),
        nodes=tuple(nodes),
        handles=frozen_map(handles_of(tuple(nodes), member.inputs)),
        binding=replace(binding, op=name),
        loc=opt.loc,
    )


__all__: Sequence[str] = ("family", "OPTIONAL_KEYS", "VARIANT_KEYS")
