"""The ``attrs:`` of a catalog op: its attribute declarations (type, default, choices),
and the check that it declares the attributes its shape rule reads.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from byoc.catalog import AttrDef, RuleError, ShapeRule, check_attr_value
from byoc.value_types import VALUE_TYPES

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc


OP_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
"""The form of an op's name and of an attribute's."""


def check_rule_attrs(doc: YamlDoc, node, what: str, rule: ShapeRule, attrs: tuple[AttrDef, ...]) -> None:
    """The op declares every attribute its shape rule reads, with the rule's type."""
    declared = {a.name: a for a in attrs}
    for name, type_name in rule.attrs.items():
        adef = declared.get(name)
        if adef is None:
            raise doc.error(
                f"{what}: the shape rule {rule.name} reads the attribute {name!r}, which the op does not declare",
                node,
                "shape",
                value=True,
                hint=f"declare it under attrs: {name}: {{type: {type_name}, default: ...}}",
            )
        if adef.type != type_name:
            attrs_node = node["attrs"]
            raise doc.error(
                f"{what}: attribute {name} must have type {type_name} (the shape rule {rule.name} reads it)",
                attrs_node[name],
                "type",
                value=True,
            )


def load_attrs(doc: YamlDoc, node, what: str) -> tuple[AttrDef, ...]:
    attrs_node = doc.mapping(node, "attrs", f"{what}: attrs")
    out = []
    for aname in attrs_node:
        if not isinstance(aname, str) or not OP_NAME.match(aname):
            raise doc.error(
                f"{what}: attribute name {aname!r} must be lower-case letters, digits and _",
                attrs_node,
                aname,
            )
        anode = doc.mapping(attrs_node, aname, f"{what}: attribute {aname}")
        doc.check_keys(anode, f"attribute {aname}", ("type",), ("default", "choices"))
        atype = doc.typed(anode, "type", str, f"attribute {aname}: type")
        if atype not in VALUE_TYPES:
            raise doc.error(
                f"attribute {aname}: unknown type {atype!r}",
                anode,
                "type",
                value=True,
                hint=f"known types: {', '.join(VALUE_TYPES)}",
            )
        choices = _load_choices(doc, anode, aname, atype) if "choices" in anode else ()
        default = None
        if "default" in anode:
            try:
                default = check_attr_value(AttrDef(aname, atype, choices=choices), anode["default"])
            except RuleError as exc:
                message = exc.message.removeprefix(f"attribute {aname} ")
                raise doc.error(
                    f"attribute {aname}: the default {message}", anode, "default", value=True
                ) from None
        out.append(AttrDef(aname, atype, default, choices))
    return tuple(out)


def _load_choices(doc: YamlDoc, anode, aname: str, atype: str) -> tuple:
    seq = doc.typed(anode, "choices", list, f"attribute {aname}: choices")
    if not seq:
        raise doc.error(f"attribute {aname}: choices must not be empty", anode, "choices", value=True)
    out = []
    for i, value in enumerate(seq):
        try:
            out.append(check_attr_value(AttrDef(aname, atype), value))
        except RuleError as exc:
            message = exc.message.removeprefix(f"attribute {aname} ")
            raise doc.error(f"attribute {aname}: choice {message}", seq, i) from None
    if len(set(out)) != len(out):
        raise doc.error(f"attribute {aname}: a choice is listed twice", anode, "choices", value=True)
    return tuple(out)
