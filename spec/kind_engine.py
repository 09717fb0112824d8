"""The ``engine`` kind: C++ that runs a layer graph on a third-party-style engine
whose layers, each expanded from one of the spec's macros, come from the spec."""

from __future__ import annotations

import re
from typing import Any

from byoc.catalog import OpDef

from .backend import LayerDef
from .bindings import LayerBinding, frozen_map
from .codegen_kind import CodegenKind, Slot
from .draft import SpecDraft, c_name, known
from .kind_macros import MacroKind, MacroUse
from .yaml_doc import YamlDoc

HEADER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.(h|hh|hpp)\Z")


class EngineKind(MacroKind):
    """Ops map to ``layers`` by rank; each layer expands one macro at one rank."""

    __slots__ = ()
    name = "engine"
    doc = "C++ that runs a layer graph on a third-party-style engine whose layers come from the spec"
    language = "c++"
    generator = "engine"
    single_dtype = True
    templates = (
        Slot("prelude", "C++ text at the top of the engine header (includes)", ("ctype", "dtype")),
        Slot(
            "engine",
            "the engine's C++ code (its classes), placed after the layer kernels",
            ("ctype", "dtype", "layer_table", "header"),
            required=True,
        ),
        Slot(
            "layer_entry",
            "one entry of ${layer_table}, repeated for every layer",
            ("layer", "inputs", "rank", "ctype", "dtype"),
            required=True,
        ),
        Slot(
            "graph_line",
            "one line of the layer graph that the generated code passes to the engine",
            ("layer", "output", "inputs", "dims", "rank"),
            required=True,
        ),
        Slot(
            "invoke",
            "the body of a generated subgraph function: runs the engine on ${graph}",
            ("graph", "args", "num_args", "symbol", "header", "ctype", "dtype"),
            required=True,
        ),
    )
    structure_required = ("macros", "layers")
    structure_optional = ("header",)
    op_required = ("layers",)
    shape_rules = ("elementwise",)
    construct = "layers"
    macro_args = ("layer", "ctype", "dtype", "rank", "inputs")
    macro_body = ("ctype", "dtype")

    def load_structure(self, doc: YamlDoc, root: Any, draft: SpecDraft) -> None:
        CodegenKind.load_structure(self, doc, root, draft)  # the header before the macros
        draft.header = _header(doc, root)
        self.load_macros(doc, root, draft)
        draft.layers = self._layers(doc, root, draft)

    def load_binding(self, doc: YamlDoc, node: Any, op: str, opdef: OpDef, draft: SpecDraft) -> LayerBinding:
        what, onode = f"op {op}", node[op]
        by_rank, _ = self.load_ranks(doc, onode, what, draft, draft.layers)
        rnode = onode["layers"]
        for rank, lname in by_rank.items():
            layer = draft.layers[lname]
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
        return LayerBinding(op, frozen_map(by_rank), loc=doc.at(node, op))

    def macro_uses(self, doc: YamlDoc, draft: SpecDraft) -> list[MacroUse]:
        lnodes = doc.root["layers"]
        return [
            MacroUse(f"layer {n}", la.macro, la.vars, None, lnodes[n], "macro")
            for n, la in draft.layers.items()
        ]

    def _layers(self, doc: YamlDoc, root: Any, draft: SpecDraft) -> dict[str, LayerDef]:
        macros = draft.macros
        node = doc.mapping(root, "layers", "layers")
        if not node:
            raise doc.error("layers must define at least one layer", root, "layers", value=True)
        layers: dict[str, LayerDef] = {}
        for name in node:
            what = f"layer {name}"
            c_name(doc, node, name, "layer name")
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
            if rank not in draft.ranks:
                raise doc.error(
                    f"{what}: rank {rank} is not one of this backend's ranks",
                    lnode,
                    "rank",
                    value=True,
                    hint=f"ranks: {', '.join(map(str, draft.ranks))}",
                )
            lvars = self.load_vars(doc, lnode, what, draft) if "vars" in lnode else {}
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


def _header(doc: YamlDoc, root: Any) -> str:
    """The file name of the generated engine header."""
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
