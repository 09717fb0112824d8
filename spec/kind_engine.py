"""The ``engine`` kind: C++ that runs a layer graph on a third-party-style engine
whose layers, each expanded from one of the spec's macros, come from the spec.

A layer serves one rank (``rank: 2``, the guide's style: its kernel may be written
for that rank, and its macro arguments may use ``${rank}``) or several
(``ranks: [0, 1, ...]``: a rank-generic kernel, e.g. one flat loop over the element
count; the engine checks each layer line's rank against the set). An op maps ranks
to layers, and ``default`` to the layer of every other rank of the backend.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from byoc.catalog import OpDef

from .backend import LayerDef
from .bindings import LayerBinding, frozen_map
from .codegen_kind import CodegenKind, Slot
from .draft import SpecDraft, c_name, known
from .kind_macros import DEFAULT_RANK_KEY, FIXED_ARITY_RULES, MacroKind
from .macro_uses import MacroUse
from .template import placeholders

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc

HEADER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.(h|hh|hpp)\Z")


class EngineKind(MacroKind):
    """Ops map to ``layers`` by rank (``default`` for the other ranks); each layer
    expands one macro and serves one rank or several."""

    __slots__ = ()
    name = "engine"
    doc = "C++ that runs a layer graph on a third-party-style engine whose layers come from the spec"
    language = "c++"
    generator = "engine.generate"
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
            ("layer", "inputs", "rank", "ranks", "ctype", "dtype"),
            required=True,
        ),
        Slot(
            "graph_line",
            "one line of the layer graph that the generated code passes to the engine",
            ("layer", "output", "inputs", "dims", "rank", "in_dims", "attrs"),
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
    structure_optional = ("header", "params", "bodies")
    op_required = ("layers",)
    shape_rules = FIXED_ARITY_RULES  # layers read input extents and attributes from their line
    construct = "layers"
    default_rank = True
    macro_args = ("layer", "ctype", "dtype", "rank", "inputs")
    macro_body = ("ctype", "dtype")

    def load_structure(self, doc: YamlDoc, root: Any, draft: SpecDraft) -> None:
        CodegenKind.load_structure(self, doc, root, draft)  # the header before the macros
        draft.header = _header(doc, root)
        self.load_macros(doc, root, draft)
        draft.layers = self._layers(doc, root, draft)

    def load_binding(self, doc: YamlDoc, node: Any, op: str, opdef: OpDef, draft: SpecDraft) -> LayerBinding:
        what, onode = f"op {op}", node[op]
        by_rank, default = self.load_ranks(doc, onode, what, draft, draft.layers)
        rnode = onode["layers"]
        uses: list[tuple[Any, str, tuple[int, ...]]] = [(r, name, (r,)) for r, name in by_rank.items()]
        if default is not None:
            others = tuple(r for r in draft.ranks if r not in by_rank)
            uses.append((DEFAULT_RANK_KEY, default, others))
        for key, lname, ranks in uses:
            layer = draft.layers[lname]
            missing = [r for r in ranks if r not in layer.ranks]
            if missing:
                served = "rank" + ("s " if len(layer.ranks) > 1 else " ") + _listed(layer.ranks)
                raise doc.error(
                    f"{what}: layer {lname} serves {served}, not {missing[0]}",
                    rnode,
                    key,
                    value=True,
                    hint=f"map rank {missing[0]} to a layer of that rank, or add it to the ranks of {lname}",
                )
            if opdef.max_inputs != layer.inputs or opdef.min_inputs != layer.inputs:
                raise doc.error(
                    f"{what}: layer {lname} takes {layer.inputs} inputs but {opdef.name} takes {opdef.arity_text()}",
                    rnode,
                    key,
                    value=True,
                )
        return LayerBinding(op, frozen_map(by_rank), default, loc=doc.at(node, op))

    def macro_uses(self, doc: YamlDoc, draft: SpecDraft) -> list[MacroUse]:
        lnodes = doc.root["layers"]
        return [
            MacroUse(f"layer {n}", la.macro, la.vars, la.ranks, lnodes[n], "macro")
            for n, la in draft.layers.items()
        ]

    def check_spec(self, doc: YamlDoc, draft: SpecDraft) -> None:
        """Besides the macro checks: ``${rank}`` names one rank, so neither the macro
        arguments of a layer of several ranks nor ``layer_entry`` (when such a layer
        exists) may use it; ``${ranks}`` serves every layer."""
        super().check_spec(doc, draft)
        several = [la for la in draft.layers.values() if len(la.ranks) > 1]
        if not several:
            return
        first = several[0]
        entry = draft.templates["layer_entry"]
        for p in placeholders(entry):
            if p.name == "rank":
                raise doc.error_at(
                    f"layer_entry uses ${{rank}}, but layer {first.name} serves several ranks ({_listed(first.ranks)})",
                    doc.at_offset(doc.root, "layer_entry", p.offset),
                    hint="use ${ranks}, the comma-separated ranks of each layer",
                )
        for layer in several:
            macro = draft.macros[layer.macro]
            for param, arg in macro.params.items():
                if any(p.name == "rank" for p in placeholders(arg)):
                    lnode = doc.root["layers"][layer.name]
                    raise doc.error(
                        f"layer {layer.name} serves several ranks, but the argument of {param} "
                        f"in its macro {macro.name} uses ${{rank}}",
                        lnode,
                        "ranks",
                        value=True,
                        hint="a kernel of several ranks learns the rank at run time (from its dims); "
                        "drop ${rank} from the macro, or give the layer one rank",
                    )

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
            doc.check_keys(lnode, what, ("macro", "inputs"), ("rank", "ranks", "vars", "doc"))
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
            ranks = _layer_ranks(doc, lnode, what, draft.ranks)
            lvars = self.load_vars(doc, lnode, what, draft) if "vars" in lnode else {}
            ldoc = doc.typed(lnode, "doc", str, f"{what}: doc") if "doc" in lnode else ""
            layers[name] = LayerDef(
                str(name),
                str(macro),
                int(inputs),
                ranks,
                frozen_map(lvars),
                str(ldoc).strip(),
                doc.at(node, name),
            )
        return layers


def _layer_ranks(doc: YamlDoc, lnode: Any, what: str, backend_ranks: tuple[int, ...]) -> tuple[int, ...]:
    """The ranks a layer serves: ``rank: N`` (one) or ``ranks: [...]`` (several), each
    one of the backend's ranks."""
    if ("rank" in lnode) == ("ranks" in lnode):
        raise doc.error(
            f"{what} needs exactly one of `rank` and `ranks`",
            lnode,
            "ranks" if "ranks" in lnode else None,
            hint="`rank: 2` for a kernel of one rank, `ranks: [0, 1, 2]` for a kernel of several",
        )
    declared = f"the backend's ranks: {_listed(backend_ranks)}"
    if "rank" in lnode:
        seq, items = lnode, ["rank"]
        doc.typed(lnode, "rank", int, f"{what}: rank")
    else:
        seq = doc.typed(lnode, "ranks", list, f"{what}: ranks")
        items = list(range(len(seq)))
        if not seq:
            raise doc.error(
                f"{what}: ranks must list at least one rank", lnode, "ranks", value=True, hint=declared
            )
    seen: set[int] = set()
    for item in items:
        rank = seq[item]
        if isinstance(rank, bool) or not isinstance(rank, int):
            raise doc.error(f"{what}: a rank must be an integer, got {rank!r}", seq, item, hint=declared)
        if rank not in backend_ranks:
            raise doc.error(
                f"{what}: rank {rank} is not one of this backend's ranks",
                seq,
                item,
                value=True,
                hint=declared,
            )
        if rank in seen:
            raise doc.error(f"{what}: rank {rank} is listed twice", seq, item, hint="list each rank once")
        seen.add(int(rank))
    return tuple(sorted(seen))


def _listed(ranks: tuple[int, ...]) -> str:
    return ", ".join(map(str, ranks))


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
