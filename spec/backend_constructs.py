"""Validate the kind-specific parts of a backend spec: code templates, C macros and
engine layers. (:mod:`byoc.spec.backend_ops` checks the op mappings.)

Every template is checked for its placeholders (:mod:`byoc.spec.template`); every
error points at the exact key, value or placeholder that is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .backend import LayerDef, MacroDef, OpBinding, OptionDef, frozen_map
from .kinds import COMMON_PLACEHOLDERS, DIM_PLACEHOLDER, RESERVED_C_NAME, Kind, reserved_placeholders
from .template import PLACEHOLDER_NAME, Placeholder, TemplateSyntaxError, placeholders
from .yaml_doc import YamlDoc

HEADER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.(h|hh|hpp)\Z")


@dataclass
class Constructs:
    """The kind-specific parts of a spec, as they are validated; the loader copies them into a BackendSpec."""

    ops: dict[str, OpBinding] = field(default_factory=dict)
    macros: dict[str, MacroDef] = field(default_factory=dict)
    layers: dict[str, LayerDef] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)
    header: str | None = None
    macro_params: dict[str, Any] = field(default_factory=dict)
    """The YAML ``params`` mapping of each macro, to locate errors in its arguments."""


def check_template(
    doc: YamlDoc, node: Any, key: Any, what: str, names: Iterable[str], *, dims: bool = False
) -> tuple[Placeholder, ...]:
    """Check the placeholders of the template ``node[key]`` against ``names``."""
    text = node[key]
    allowed = set(names)
    try:
        found = tuple(placeholders(text))
    except TemplateSyntaxError as exc:
        raise doc.error_at(
            f"{what}: {exc.message}", doc.at_offset(node, key, exc.offset), hint=exc.hint
        ) from None
    for p in found:
        if p.name not in allowed and not (dims and DIM_PLACEHOLDER.match(p.name)):
            shown = ", ".join("${" + n + "}" for n in sorted(allowed)) or "none"
            raise doc.error_at(
                f"undefined placeholder ${{{p.name}}} in {what}",
                doc.at_offset(node, key, p.offset),
                hint=f"defined here: {shown}" + (", ${dim0}, ${dim1}, ..." if dims else ""),
            )
    return found


def load_structure(
    doc: YamlDoc, root, kind: Kind, ranks: tuple[int, ...], options: dict[str, OptionDef]
) -> Constructs:
    """Check the kind's templates, header, macros and layers; ops come later."""
    out = Constructs()
    names = set(COMMON_PLACEHOLDERS) | set(options)
    for slot in kind.templates:
        if slot.key in root:
            doc.typed(root, slot.key, str, slot.key)
            check_template(doc, root, slot.key, slot.key, names | set(slot.placeholders))
            out.templates[slot.key] = str(root[slot.key])
        else:
            out.templates[slot.key] = ""
    if kind.construct == "layers":
        out.header = _header(doc, root)
    if kind.construct is not None:
        out.macros, out.macro_params = _macros(doc, root, kind, names)
    if kind.construct == "layers":
        out.layers = _layers(doc, root, out.macros, ranks, kind, options)
    return out


# --------------------------------------------------------------------- structure


def _header(doc: YamlDoc, root) -> str:
    if "header" not in root:
        return f"{root['name']}_engine.h"
    header = doc.typed(root, "header", str, "header")
    if not HEADER_NAME.match(header):
        raise doc.error(
            f"header {header!r} is not a plain header file name",
            root,
            "header",
            value=True,
            hint="for example my_engine.h (letters, digits, _ . -; no directories)",
        )
    return str(header)


def _c_name(doc: YamlDoc, node, name, what: str) -> str:
    doc.identifier(node, name, name, what, at_value=False)
    if RESERVED_C_NAME.match(name):
        raise doc.error(
            f"{what} {name!r} is a reserved C identifier", node, name, hint="start it with a letter"
        )
    return str(name)


def _macros(doc: YamlDoc, root, kind: Kind, names: set[str]) -> tuple[dict[str, MacroDef], dict[str, Any]]:
    node = doc.mapping(root, "macros", "macros")
    if not node:
        raise doc.error("macros must define at least one macro", root, "macros", value=True)
    macros: dict[str, MacroDef] = {}
    param_nodes: dict[str, Any] = {}
    for name in node:
        what = f"macro {name}"
        _c_name(doc, node, name, "macro name")
        mnode = doc.mapping(node, name, what)
        required = ("inputs", "params", "body") if kind.macro_inputs else ("params", "body")
        doc.check_keys(mnode, what, required, ("doc",))
        inputs = None
        if kind.macro_inputs:
            inputs = int(doc.typed(mnode, "inputs", int, f"{what}: inputs"))
            if inputs < 1:
                raise doc.error(f"{what}: inputs must be at least 1", mnode, "inputs", value=True)
        params = doc.mapping(mnode, "params", f"{what}: params")
        body = doc.typed(mnode, "body", str, f"{what}: body")
        if not body.strip():
            raise doc.error(f"{what}: the body is empty", mnode, "body", value=True)
        check_template(doc, mnode, "body", f"the body of {what}", names | set(kind.macro_body))
        _check_body_lines(doc, mnode, what)
        for param in params:
            _c_name(doc, params, param, f"{what}: parameter")
            if param == name:
                raise doc.error(f"{what}: a parameter cannot share the macro's name", params, param)
            doc.typed(params, param, str, f"{what}: the argument of {param}")
            if not re.search(rf"(?<![A-Za-z0-9_]){re.escape(param)}(?![A-Za-z0-9_])", body):
                raise doc.error(
                    f"{what}: parameter {param} is not used in the body",
                    params,
                    param,
                    hint="remove the parameter, or use it in the body",
                )
        mdoc = doc.typed(mnode, "doc", str, f"{what}: doc") if "doc" in mnode else ""
        args = frozen_map({str(p): str(a) for p, a in params.items()})
        macros[name] = MacroDef(str(name), args, str(body), str(mdoc).strip(), inputs, doc.at(node, name))
        param_nodes[name] = params
    return macros, param_nodes


def _check_body_lines(doc: YamlDoc, mnode, what: str) -> None:
    body = mnode["body"]
    offset = 0
    for line in body.split("\n"):
        stripped = line.strip()
        if stripped.startswith("#"):
            raise doc.error_at(
                f"{what}: a macro body cannot hold a preprocessor directive",
                doc.at_offset(mnode, "body", offset + line.index("#")),
                hint="put #include and other directives in `prelude`",
            )
        if stripped.endswith("\\"):
            raise doc.error_at(
                f"{what}: do not end body lines with a backslash",
                doc.at_offset(mnode, "body", offset + line.rindex("\\")),
                hint="byoc adds the line continuations of the #define itself",
            )
        offset += len(line) + 1


def load_vars(doc: YamlDoc, node, what: str, kind: Kind, options: dict[str, OptionDef]) -> dict[str, str]:
    vnode = doc.mapping(node, "vars", f"{what}: vars")
    reserved = reserved_placeholders(kind) | set(options)
    out: dict[str, str] = {}
    for name in vnode:
        if not isinstance(name, str) or not PLACEHOLDER_NAME.match(name):
            raise doc.error(f"{what}: var name {name!r} is not an identifier", vnode, name)
        if name in reserved or DIM_PLACEHOLDER.match(name):
            raise doc.error(
                f"{what}: var {name!r} would hide a placeholder of the same name",
                vnode,
                name,
                hint="byoc or an option already supplies ${" + name + "}; pick another name",
            )
        value = vnode[name]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise doc.error(f"{what}: var {name} must be a string, got {value!r}", vnode, name, value=True)
        out[name] = str(value)
    return out


def _layers(
    doc: YamlDoc, root, macros: dict[str, MacroDef], ranks: tuple[int, ...], kind: Kind, options
) -> dict[str, LayerDef]:
    node = doc.mapping(root, "layers", "layers")
    if not node:
        raise doc.error("layers must define at least one layer", root, "layers", value=True)
    layers: dict[str, LayerDef] = {}
    for name in node:
        what = f"layer {name}"
        _c_name(doc, node, name, "layer name")
        if name in macros:
            raise doc.error(
                f"duplicate name {name!r}: a macro has it too", node, name, hint="C has one namespace"
            )
        lnode = doc.mapping(node, name, what)
        doc.check_keys(lnode, what, ("macro", "inputs", "rank"), ("vars", "doc"))
        macro = doc.typed(lnode, "macro", str, f"{what}: macro")
        if macro not in macros:
            raise doc.error(
                f"{what}: undefined macro {macro!r}",
                lnode,
                "macro",
                value=True,
                hint=known("macros", macros),
            )
        inputs = doc.typed(lnode, "inputs", int, f"{what}: inputs")
        if inputs < 1:
            raise doc.error(f"{what}: inputs must be at least 1", lnode, "inputs", value=True)
        rank = doc.typed(lnode, "rank", int, f"{what}: rank")
        if rank not in ranks:
            raise doc.error(
                f"{what}: rank {rank} is not one of this backend's ranks",
                lnode,
                "rank",
                value=True,
                hint=f"ranks: {', '.join(map(str, ranks))}",
            )
        lvars = load_vars(doc, lnode, what, kind, options) if "vars" in lnode else {}
        ldoc = doc.typed(lnode, "doc", str, f"{what}: doc") if "doc" in lnode else ""
        layers[name] = LayerDef(
            str(name),
            str(macro),
            int(inputs),
            int(rank),
            frozen_map(lvars),
            str(ldoc).strip(),
            doc.at(node, name),
        )
    return layers


def known(noun: str, names: Iterable[str]) -> str:
    listed = list(names)
    return f"{noun}: {', '.join(listed)}" if listed else f"no {noun} are defined"
