"""Where a spec's macros are used (:class:`MacroUse`: by an op, a layer or a pattern),
and the checks of the placeholders of macro arguments: against the macro (its inputs,
``broadcast``) and against each use (vars, attributes, ranks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from byoc.attr_values import ints_length
from byoc.catalog import AttrDef, OpDef

from .backend import MacroDef
from .macro_args import STRIDE_PLACEHOLDERS, attribute_of, attribute_placeholders, input_ref
from .names import DIM_PLACEHOLDER
from .patterns import Pattern
from .template import Placeholder

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc


@dataclass(frozen=True, slots=True)
class MacroUse:
    """One use of a macro: by ``user`` (an op or a layer), at ``ranks`` (None: any),
    located at ``node[key]``."""

    user: str
    macro: str
    vars: Mapping[str, str]
    ranks: tuple[int, ...] | None
    node: Any
    key: Any
    op: OpDef | None = None
    """The catalog op, when the user is one (c_source): its attributes are placeholders."""
    pattern: Pattern | None = None
    """The composite pattern, when the user is one: its nodes' attributes are
    placeholders (``${conv.groups}``)."""


def check_input_index(doc: YamlDoc, pnode: Any, param: str, ph: Placeholder, macro: MacroDef) -> None:
    """``${in<k>_...}`` needs a kernel of more than k inputs."""
    ref = input_ref(ph.name)
    if ref is None or macro.inputs is None or ref.index < macro.inputs:
        return
    names = ", ".join(f"in{k}" for k in range(macro.inputs))
    raise doc.error_at(
        f"${{{ph.name}}} in the argument of {param} in macro {macro.name}: the kernel takes "
        f"{macro.inputs} input(s), {names}",
        doc.at_offset(pnode, param, ph.offset),
        hint=f"inputs count from 0: use ${{in0_...}} to ${{in{macro.inputs - 1}_...}}",
    )


def check_stride(doc: YamlDoc, pnode: Any, param: str, ph: Placeholder, macro: MacroDef) -> None:
    """``${in<k>_stride<j>}`` and ``${in<k>_strides}`` only in a macro that declares
    ``broadcast: true``: another's kernel gets every input in the output's shape."""
    ref = input_ref(ph.name)
    if ref is None or ref.what not in STRIDE_PLACEHOLDERS or macro.broadcast:
        return
    raise doc.error_at(
        f"${{{ph.name}}} in the argument of {param} in macro {macro.name}: a broadcast stride, "
        "but the macro does not declare `broadcast: true`",
        doc.at_offset(pnode, param, ph.offset),
        hint=f"add `broadcast: true` to macro {macro.name} if its kernel takes inputs broadcast to the "
        "output's shape; without it every input of an elementwise op has the output's shape",
    )


def check_broadcasts(doc: YamlDoc, macro: MacroDef, users: list[MacroUse]) -> None:
    """``broadcast: true`` needs a user that can broadcast: an elementwise op, or a
    pattern with an elementwise node (no other op's inputs are broadcast)."""
    if not users or any(_elementwise(u) for u in users):
        return
    names = ", ".join(dict.fromkeys(u.user for u in users))
    raise doc.error(
        f"macro {macro.name} declares `broadcast: true`, but nothing it serves broadcasts ({names})",
        doc.root["macros"][macro.name],
        "broadcast",
        value=True,
        hint="only the inputs of an elementwise op are broadcast; remove `broadcast: true`",
    )


def _elementwise(use: MacroUse) -> bool:
    """Whether an op of ``use`` (its op, or a node of its pattern) broadcasts its inputs."""
    if use.op is not None:
        return use.op.rule.elementwise
    return use.pattern is not None and any(n.opdef.rule.elementwise for n in use.pattern.nodes)


def attribute_use(use: MacroUse, name: str) -> tuple[OpDef, AttrDef, int | None] | None:
    """The op, attribute and list index that ``${name}`` names for the op or pattern of
    ``use``; None when it names none."""
    if use.op is not None:  # ${strides0}, or as a pattern's node names it, ${conv.strides0}
        own = name.removeprefix(f"{use.op.name}.")
        found = attribute_of(use.op, own)
        return None if found is None else (use.op, *found)
    if use.pattern is not None:
        named = use.pattern.attribute(name)
        return None if named is None else (use.pattern.nodes[named[0]].opdef, named[1], named[2])
    return None


def _check_attribute(doc: YamlDoc, use: MacroUse, param: str, name: str) -> bool:
    """Whether ``${name}`` is an attribute of the op (or a node of the pattern) of
    ``use``; a value ``${<attr><j>}`` of an ints attribute must exist at every rank the
    use serves (a pattern's: the rank of its result, which its window ops share in the
    patterns this checks; a match where the value is missing is not taken)."""
    found = attribute_use(use, name)
    if found is None:
        return False
    op, adef, index = found
    if index is None or use.ranks is None:
        return True
    for rank in use.ranks:
        length = ints_length(op, adef.name, rank)
        if length is None:
            raise doc.error(
                f"{use.user} uses macro {use.macro}, whose argument {param} needs ${{{name}}}, "
                f"but how many values {adef.name} has does not follow from the rank",
                use.node,
                use.key,
                value=True,
                hint=f"pass the whole list, ${{{adef.name}}} (parenthesised, one macro argument)",
            )
        if index >= length:
            have = ", ".join(f"${{{adef.name}{j}}}" for j in range(length)) or "no values"
            raise doc.error(
                f"{use.user} uses macro {use.macro} at rank {rank}, but its argument {param} "
                f"needs ${{{name}}}",
                use.node,
                use.key,
                value=True,
                hint=f"at rank {rank} {adef.name} has {length} value(s): {have}; map this rank to another macro",
            )
    return True


def check_use(doc: YamlDoc, use: MacroUse, args: list[tuple[str, Placeholder]], builtin: set[str]) -> None:
    for param, ph in args:
        dim = DIM_PLACEHOLDER.match(ph.name)
        ref = input_ref(ph.name)
        if ref is not None and ref.what == "stride" and use.ranks is not None:
            _check_output_axis(doc, use, param, ph.name, ref.axis or 0, "stride")
        if ph.name in builtin or (ph.name in use.vars and not dim):
            continue
        if (use.op is not None or use.pattern is not None) and (
            input_ref(ph.name) is not None or _check_attribute(doc, use, param, ph.name)
        ):
            continue
        if dim and use.ranks is not None:
            _check_output_axis(doc, use, param, ph.name, int(dim.group(1)), "dim")
            continue
        if use.pattern is not None:
            _refuse_shared_attribute(doc, use, param, ph.name)
        attrs = (
            f"; the attribute placeholders of {use.op.name}: {attribute_placeholders(use.op)}"
            f" (or ${{{use.op.name}.<attribute>}}, as a pattern names its node)"
            if use.op
            else f"; a node's attribute is ${{<node>.<attribute>}} (nodes: {', '.join(use.pattern.handles)}), "
            "or ${<attribute>} when one node alone has it"
            if use.pattern
            else ""
        )
        raise doc.error(
            f"{use.user} uses macro {use.macro}, whose argument {param} needs ${{{ph.name}}}, "
            f"but {use.user} has no var {ph.name!r}"
            + (" and no such attribute" if use.op is not None or use.pattern is not None else ""),
            use.node,
            use.key,
            value=True,
            hint=f"add `vars: {{{ph.name}: ...}}` to {use.user}{attrs}",
        )


def _refuse_shared_attribute(doc: YamlDoc, use: MacroUse, param: str, name: str) -> None:
    """``${<attr>}`` alone in a pattern's macro, where several nodes have ``attr``."""
    assert use.pattern is not None
    nodes = use.pattern.nodes
    holders = use.pattern.holders(name)
    if len(holders) < 2:
        return
    named = {k: h for h, k in use.pattern.handles.items()}
    shown = [f"${{{named[k]}.{name}}}" if k in named else f"node {k} ({nodes[k].op})" for k in holders]
    raise doc.error(
        f"{use.user} uses macro {use.macro}, whose argument {param} needs ${{{name}}}, but "
        f"{len(holders)} nodes of the pattern have that attribute: {', '.join(shown)}",
        use.node,
        use.key,
        value=True,
        hint="name the node (bind it in `match`, `q = quantize_linear(...)`, and write ${q."
        f"{name}}}), or give the value in `vars`",
    )


def _check_output_axis(doc: YamlDoc, use: MacroUse, param: str, name: str, axis: int, noun: str) -> None:
    """A placeholder of the output's axis ``axis`` (``${dim<j>}``, ``${in<k>_stride<j>}``)
    needs a rank above ``axis`` at every rank ``use`` serves."""
    assert use.ranks is not None
    low = [r for r in use.ranks if axis >= r]
    if not low:
        return
    shown = ", ".join(f"${{{name.removesuffix(str(axis))}{k}}}" for k in range(low[0])) or f"no {noun}s"
    raise doc.error(
        f"{use.user} uses macro {use.macro} at rank {low[0]}, but its argument {param} needs ${{{name}}}",
        use.node,
        use.key,
        value=True,
        hint=f"a rank-{low[0]} tensor has {shown}; map this rank to another macro",
    )
