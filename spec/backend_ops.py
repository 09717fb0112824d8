"""Validate how a backend spec maps catalog ops to its constructs: macros by rank
(c_source), layers by rank (engine), tokens (examplejson), kernel names (json) and
C expressions (c_fused).

It also checks that every placeholder of every macro argument is supplied wherever
the macro is used: by byoc, by an option, or by the vars of the op or layer.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from byoc.catalog import Catalog, OpDef

from .backend import LayerDef, OpBinding, OptionDef, frozen_map
from .backend_constructs import Constructs, check_template, known, load_vars
from .kinds import COMMON_PLACEHOLDERS, DIM_PLACEHOLDER, Kind
from .template import Placeholder
from .yaml_doc import YamlDoc

TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
KERNEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
RESERVED_TOKENS = ("input",)
"""ExampleJSON keywords that cannot be op tokens."""
DEFAULT_RANK_KEY = "default"
"""The key of a c_source op's ``macros`` that serves every other declared rank."""


# --------------------------------------------------------------------------- ops


def load_ops(
    doc: YamlDoc, root, kind: Kind, catalog: Catalog, ranks, options, parts: Constructs
) -> dict[str, OpBinding]:
    node = doc.mapping(root, "ops", "ops")
    if not node:
        raise doc.error("ops must map at least one catalog op", root, "ops", value=True)
    out: dict[str, OpBinding] = {}
    seen: dict[str, str] = {}
    for op in node:
        if op not in catalog:
            close = difflib.get_close_matches(str(op), list(catalog), n=3)
            raise doc.error(
                f"unknown op {op!r}: it is not in the op catalog",
                node,
                op,
                hint=(f"did you mean {' or '.join(close)}? " if close else "")
                + known("catalog ops", catalog),
            )
        opdef = catalog[op]
        what = f"op {op}"
        if kind.shape_rules is not None and opdef.shape_rule not in kind.shape_rules:
            raise doc.error(
                f"the {kind.name} kind cannot implement {op} (shape rule {opdef.shape_rule})",
                node,
                op,
                hint=f"{kind.name} implements {', '.join(kind.shape_rules)} ops",
            )
        if not kind.attrs and opdef.attrs:
            raise doc.error(f"the {kind.name} kind cannot carry the attributes of {op}", node, op)
        onode = doc.mapping(node, op, what)
        doc.check_keys(onode, what, kind.op_required, kind.op_optional)
        loc = doc.at(node, op)
        if kind.construct == "macros":
            by_rank, default = _by_rank(
                doc, onode, "macros", what, ranks, parts.macros, "macro", allow_default=True
            )
            _check_macro_arity(doc, onode, opdef, by_rank, default, parts, what)
            ovars = load_vars(doc, onode, what, kind, options) if "vars" in onode else {}
            out[op] = OpBinding(op, frozen_map(by_rank), default, frozen_map(ovars), loc=loc)
        elif kind.construct == "layers":
            by_rank, _ = _by_rank(
                doc, onode, "layers", what, ranks, parts.layers, "layer", allow_default=False
            )
            _check_layer_arity(doc, onode, opdef, by_rank, parts.layers, what)
            out[op] = OpBinding(op, frozen_map(by_rank), loc=loc)
        elif kind.expressions is not None:
            expression = _expression(doc, node, op, opdef, kind, options)
            out[op] = OpBinding(op, expression=expression, loc=loc)
        else:
            key = "token" if "token" in kind.op_required else "kernel"
            value = _unique_name(doc, onode, key, what, seen, op)
            out[op] = OpBinding(
                op,
                token=value if key == "token" else None,
                kernel=value if key == "kernel" else None,
                loc=loc,
            )
    return out


def _expression(doc: YamlDoc, node, op: str, opdef: OpDef, kind: Kind, options) -> str:
    """The C expression of ``op``: the spec's ``c``, checked, else the catalog's."""
    what = f"op {op}"
    if opdef.max_inputs is None:
        raise doc.error(
            f"the {kind.name} kind cannot implement {op}: it takes {opdef.arity_text()} inputs",
            node,
            op,
            hint=f"a {kind.name} expression names each input, ${{x0}}, ${{x1}}, ...; it needs a fixed arity",
        )
    onode = node[op]
    if "c" not in onode:
        if opdef.c is None:
            raise doc.error(
                f"{what}: the op catalog gives {op} no C expression",
                node,
                op,
                hint='give one here: `c: "..."` over ${x0}, ${x1}, ...',
            )
        return opdef.c
    text = doc.typed(onode, "c", str, f"{what}: c")
    inputs = [f"x{i}" for i in range(opdef.max_inputs)]
    names = set(COMMON_PLACEHOLDERS) | set(options) | set(kind.expressions or ()) | set(inputs)
    if not text.strip():
        raise doc.error(f"{what}: the C expression is empty", onode, "c", value=True)
    body = text.strip()
    for bad, why in ((";", "a C expression, not a statement"), ("\n", "one line")):
        if bad in body:
            raise doc.error_at(
                f"{what}: the C expression must be {why}",
                doc.at_offset(onode, "c", text.index(body) + body.index(bad)),
                hint='for example c: "${x0} + ${x1}"; put helper functions in `prelude`',
            )
    check_template(doc, onode, "c", f"the C expression of {what}", names)
    return str(body)


def _by_rank(
    doc: YamlDoc, onode, key: str, what: str, ranks, defined: dict, noun: str, *, allow_default: bool
) -> tuple[dict[int, str], str | None]:
    rnode = doc.mapping(onode, key, f"{what}: {key}")
    if not rnode:
        raise doc.error(f"{what}: {key} must map at least one rank", onode, key, value=True)
    by_rank: dict[int, str] = {}
    default = None
    for rank in rnode:
        is_default = allow_default and rank == DEFAULT_RANK_KEY
        if not is_default and (isinstance(rank, bool) or not isinstance(rank, int)):
            keys = "a rank (an integer)" + (f" or `{DEFAULT_RANK_KEY}`" if allow_default else "")
            raise doc.error(f"{what}: {key} keys must be {keys}, got {rank!r}", rnode, rank)
        if not is_default and rank not in ranks:
            raise doc.error(
                f"{what}: rank {rank} is not one of this backend's ranks",
                rnode,
                rank,
                hint=f"ranks: {', '.join(map(str, ranks))}; add it to `ranks:` first",
            )
        name = doc.typed(rnode, rank, str, f"{what}: the {noun} for rank {rank}")
        if name not in defined:
            raise doc.error(
                f"{what}: undefined {noun} {name!r}",
                rnode,
                rank,
                value=True,
                hint=known(f"{noun}s", defined),
            )
        if is_default:
            default = str(name)
        else:
            by_rank[int(rank)] = str(name)
    return by_rank, default


def _check_macro_arity(
    doc: YamlDoc,
    onode,
    opdef: OpDef,
    by_rank: dict[int, str],
    default: str | None,
    parts: Constructs,
    what: str,
) -> None:
    rnode = onode["macros"]
    uses = [(rank, name) for rank, name in by_rank.items()]
    if default is not None:
        uses.append((DEFAULT_RANK_KEY, default))
    for key, name in uses:
        inputs = parts.macros[name].inputs
        if opdef.max_inputs != inputs or opdef.min_inputs != inputs:
            raise doc.error(
                f"{what}: macro {name} takes {inputs} inputs but {opdef.name} takes {opdef.arity_text()}",
                rnode,
                key,
                value=True,
                hint="map the op to a macro with its number of inputs",
            )


def _check_layer_arity(
    doc: YamlDoc, onode, opdef, by_rank: dict[int, str], layers: dict[str, LayerDef], what: str
) -> None:
    rnode = onode["layers"]
    for rank, lname in by_rank.items():
        layer = layers[lname]
        if layer.rank != rank:
            raise doc.error(
                f"{what}: layer {lname} has rank {layer.rank}, not {rank}", rnode, rank, value=True
            )
        if opdef.max_inputs != layer.inputs or opdef.min_inputs != layer.inputs:
            raise doc.error(
                f"{what}: layer {lname} takes {layer.inputs} inputs but {opdef.name} takes {opdef.arity_text()}",
                rnode,
                rank,
                value=True,
            )


def _unique_name(doc: YamlDoc, onode, key: str, what: str, seen: dict[str, str], op: str) -> str:
    value = doc.typed(onode, key, str, f"{what}: {key}")
    pattern = TOKEN if key == "token" else KERNEL
    if not pattern.match(value) or value in RESERVED_TOKENS and key == "token":
        shape = "an identifier other than `input`" if key == "token" else "dotted identifiers such as nn.relu"
        raise doc.error(f"{what}: {key} {value!r} is not valid", onode, key, value=True, hint=f"use {shape}")
    if value in seen:
        raise doc.error(
            f"duplicate {key} {value!r}: op {seen[value]} already uses it",
            onode,
            key,
            value=True,
            hint=f"each op needs its own {key}",
        )
    seen[value] = op
    return str(value)


# ------------------------------------------------------------ macro arguments


@dataclass(frozen=True, slots=True)
class _Use:
    """One use of a macro: by ``user`` (an op or a layer), at ``ranks``, located at node[key]."""

    user: str
    macro: str
    vars: Mapping[str, str]
    ranks: tuple[int, ...] | None
    node: Any
    key: Any


def check_macro_args(
    doc: YamlDoc, kind: Kind, options: dict[str, OptionDef], parts: Constructs, ranks
) -> None:
    """Every placeholder of every macro argument must be supplied wherever the macro is used."""
    uses: list[_Use] = []
    if kind.construct == "layers":
        lnodes = doc.root["layers"]
        uses = [
            _Use(f"layer {n}", la.macro, la.vars, None, lnodes[n], "macro") for n, la in parts.layers.items()
        ]
    else:
        for op, b in parts.ops.items():
            rnode = doc.root["ops"][op]["macros"]
            uses += [_Use(f"op {op}", m, b.vars, (r,), rnode, r) for r, m in b.by_rank.items()]
            if b.default is not None:
                others = tuple(r for r in ranks if r not in b.by_rank)
                uses.append(_Use(f"op {op}", b.default, b.vars, others, rnode, DEFAULT_RANK_KEY))
    builtin = set(COMMON_PLACEHOLDERS) | set(options) | set(kind.macro_args)
    all_vars = set().union(*(u.vars for u in uses))
    args: dict[str, list[tuple[str, Placeholder]]] = {}
    for mname, macro in parts.macros.items():
        pnode = parts.macro_params[mname]
        args[mname] = [
            (param, ph)
            for param in macro.params
            for ph in check_template(
                doc,
                pnode,
                param,
                f"the argument of {param} in macro {mname}",
                builtin | all_vars,
                dims=kind.construct == "macros",
            )
        ]
    for use in uses:
        _check_use(doc, use, args[use.macro], builtin)


def _check_use(doc: YamlDoc, use: _Use, args: list[tuple[str, Placeholder]], builtin: set[str]) -> None:
    for param, ph in args:
        dim = DIM_PLACEHOLDER.match(ph.name)
        if ph.name in builtin or (ph.name in use.vars and not dim):
            continue
        if dim and use.ranks is not None:
            low = [r for r in use.ranks if int(dim.group(1)) >= r]
            if not low:
                continue
            have = ", ".join(f"${{dim{k}}}" for k in range(low[0])) or "no dims"
            raise doc.error(
                f"{use.user} uses macro {use.macro} at rank {low[0]}, but its argument {param} needs ${{{ph.name}}}",
                use.node,
                use.key,
                value=True,
                hint=f"a rank-{low[0]} tensor has {have}; map this rank to another macro",
            )
        raise doc.error(
            f"{use.user} uses macro {use.macro}, whose argument {param} needs ${{{ph.name}}}, "
            f"but {use.user} has no var {ph.name!r}",
            use.node,
            use.key,
            value=True,
            hint=f"add `vars: {{{ph.name}: ...}}` to {use.user}",
        )
