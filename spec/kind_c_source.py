"""The ``c_source`` kind: C99, one kernel per op, expanded from the spec's C macros."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from byoc.catalog import OpDef

from .bindings import MacroBinding, frozen_map
from .codegen_kind import Slot
from .draft import SpecDraft
from .kind_macros import DEFAULT_RANK_KEY, FIXED_ARITY_RULES, MacroKind
from .layouts import check_layout_ranks, load_layouts
from .macro_args import const_input
from .macro_uses import MacroUse
from .template import placeholder_names, placeholders

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc


class CSourceKind(MacroKind):
    """Ops map to macros by rank (``default`` for the other ranks), with ``vars``."""

    __slots__ = ()
    name = "c_source"
    doc = "C99 source: one kernel per op, expanded from the spec's C macros (the BYOC guide's C codegen)"
    language = "c"
    generator = "c_source.generate"
    templates = (
        Slot("prelude", "C text placed once, before the macros (includes, helpers)", ()),
        Slot(
            "state",
            "C members of each function's state struct, set up by init, read by kernels",
            ("symbol", "module_state"),
        ),
        Slot(
            "init",
            "C statements run once per function and loaded library on `state`; return non-zero to fail",
            ("symbol", "module_state"),
        ),
        Slot(
            "teardown",
            "C statements run on `state` when the library is unloaded, after a good init",
            ("symbol", "module_state"),
        ),
        Slot(
            "module_state",
            "C members of the module's state struct, shared by every function and kernel of the library",
            (),
        ),
        Slot(
            "module_init",
            "C statements run once per loaded library on `state`, before any function's init; "
            "return non-zero to fail",
            (),
        ),
        Slot(
            "module_teardown",
            "C statements run on `state` when the library is unloaded, after a good module_init, "
            "after every function's teardown",
            (),
        ),
    )
    structure_required = ("macros",)
    structure_optional = ("layouts", "status", "params", "bodies")  # status: every macro's default `status`
    op_required = ("macros",)
    op_optional = ("vars", "dtypes")
    pattern_required = ("macros",)
    pattern_optional = ("vars",)
    shape_rules = FIXED_ARITY_RULES  # macro arguments read the inputs' extents and the attributes
    construct = "macros"
    default_rank = True
    macro_args = ("symbol", "ctype", "dtype", "rank", "size", "shape", "state", "module_state", "out_layout")
    macro_inputs = True
    macro_layouts = True
    macro_status = True
    macro_broadcast = True  # a macro may take broadcast inputs (`broadcast: true`)
    macro_overwrites = True  # a macro may let its result take an input's buffer (`overwrites: in<k>`)
    macro_setup = ("state", "init", "teardown")
    macro_setup_args = ("symbol", "module_state")
    body_rendered = False  # the body is #define'd as the spec writes it
    support_files = True  # `support:` C files beside the spec, compiled once per spec
    dims = True
    op_args = True

    def load_structure(self, doc: YamlDoc, root: Any, draft: SpecDraft) -> None:
        if "layouts" in root:  # before the macros, which name them
            load_layouts(doc, root, draft)
        super().load_structure(doc, root, draft)

    def load_binding(self, doc: YamlDoc, node: Any, op: str, opdef: OpDef, draft: SpecDraft) -> MacroBinding:
        what, onode = f"op {op}", node[op]
        by_rank, default = self.load_ranks(doc, onode, what, draft, draft.macros)
        uses = [*by_rank.items(), *([(DEFAULT_RANK_KEY, default)] if default is not None else [])]
        for key, name in uses:
            inputs = draft.macros[name].inputs
            if opdef.max_inputs != inputs or opdef.min_inputs != inputs:
                raise doc.error(
                    f"{what}: macro {name} takes {inputs} inputs but {opdef.name} takes {opdef.arity_text()}",
                    onode["macros"],
                    key,
                    value=True,
                    hint="map the op to a macro with its number of inputs",
                )
        ovars = self.load_vars(doc, onode, what, draft, opdef) if "vars" in onode else {}
        dtypes = None
        if "dtypes" in onode:
            listed = doc.typed(onode, "dtypes", list, f"{what}: dtypes")
            for k, d in enumerate(listed):
                if d not in draft.dtypes:
                    raise doc.error(
                        f"{what}: dtype {d!r} is not one of the backend's dtypes",
                        listed,
                        k,
                        hint=f"the backend's dtypes: {', '.join(draft.dtypes)}",
                    )
            dtypes = tuple(str(d) for d in listed)
        draft.opdefs[op] = opdef
        return MacroBinding(
            op, frozen_map(by_rank), default, frozen_map(ovars), dtypes=dtypes, loc=doc.at(node, op)
        )

    def check_spec(self, doc: YamlDoc, draft: SpecDraft) -> None:
        """Besides the macro checks: ``${in<k>_const}`` only in macros that patterns with
        constant input k use, a layout of the result only at its rank, and ``${state}``
        (``${module_state}``) only where the spec declares a state (a module state)."""
        super().check_spec(doc, draft)
        uses = self.macro_uses(doc, draft)
        _check_constant_inputs(doc, draft, uses)
        check_layout_ranks(doc, draft, uses)
        function_state = draft.templates.get("state", "").strip() or any(
            m.setup.get("state", "").strip() for m in draft.macros.values()
        )
        if not function_state:
            _check_declared(doc, draft, "state", "state", "each function's state")
        if not draft.templates.get("module_state", "").strip():
            _check_declared(doc, draft, "module_state", "module state", "the module's state")

    def load_pattern_binding(
        self, doc: YamlDoc, node: Any, name: str, inputs: int, draft: SpecDraft
    ) -> MacroBinding:
        """A pattern's macros by rank (of its result), each taking the pattern's inputs."""
        what, pnode = f"pattern {name}", node[name]
        by_rank, default = self.load_ranks(doc, pnode, what, draft, draft.macros)
        for key, macro in [*by_rank.items(), *([(DEFAULT_RANK_KEY, default)] if default is not None else [])]:
            if draft.macros[macro].inputs != inputs:
                raise doc.error(
                    f"{what}: macro {macro} takes {draft.macros[macro].inputs} inputs but the pattern has {inputs}",
                    pnode["macros"],
                    key,
                    value=True,
                    hint="a pattern's kernel takes its `inputs:`, in order",
                )
        pvars = self.load_vars(doc, pnode, what, draft) if "vars" in pnode else {}
        return MacroBinding(name, frozen_map(by_rank), default, frozen_map(pvars), loc=doc.at(node, name))

    def macro_uses(self, doc: YamlDoc, draft: SpecDraft) -> list[MacroUse]:
        uses: list[MacroUse] = []
        users = [("ops", f"op {op}", op, b, draft.opdefs[op], None) for op, b in draft.ops.items()]
        users += [("patterns", f"pattern {n}", n, p.binding, None, p) for n, p in draft.patterns.items()]
        for key, user, name, b, opdef, pattern in users:
            assert isinstance(b, MacroBinding)
            rnode = doc.root[key][pattern.written_as if pattern is not None else name]
            for step in pattern.written_in if pattern is not None else ():  # a family's variant
                rnode = rnode[step]
            rnode = rnode["macros"]
            uses += [MacroUse(user, m, b.vars, (r,), rnode, r, opdef, pattern) for r, m in b.by_rank.items()]
            if b.default is not None:
                others = tuple(r for r in draft.ranks if r not in b.by_rank)
                uses.append(
                    MacroUse(user, b.default, b.vars, others, rnode, DEFAULT_RANK_KEY, opdef, pattern)
                )
        return uses


def _check_declared(doc: YamlDoc, draft: SpecDraft, name: str, noun: str, members: str) -> None:
    """A SpecError at the first ``${name}`` (``state``, ``module_state``) of a macro
    argument or a per-function or per-kernel template, when the spec declares no
    ``name:`` (the caller checks that)."""
    where: list[tuple[str, Any, Any]] = []
    for mname, macro in draft.macros.items():
        where += [
            (f"the argument of {p} in macro {mname}", *draft.macro_params[mname][p]) for p in macro.params
        ]
        mnode = doc.root["macros"][mname]
        where += [(f"the {slot} of macro {mname}", mnode, slot) for slot in macro.setup]
    where += [(slot, doc.root, slot) for slot in ("state", "init", "teardown") if draft.templates.get(slot)]
    for what, node, key in where:
        found = next((p for p in placeholders(str(node[key])) if p.name == name), None)
        if found is not None:
            raise doc.error_at(
                f"{what} uses ${{{name}}}, but the spec declares no {noun}",
                doc.at_offset(node, key, found.offset),
                hint=f"add a top-level `{name}:` with the C members of {members}",
            )


def _check_constant_inputs(doc: YamlDoc, draft: SpecDraft, uses: list[MacroUse]) -> None:
    """A macro whose ``state``, ``init`` or ``teardown`` reads ``${in<k>_const}`` (the C
    name of a constant's array) serves only patterns that list input k in ``constants``."""
    for use in uses:
        macro = draft.macros[use.macro]
        for slot, text in macro.setup.items():
            for name in placeholder_names(text):
                k = const_input(name)
                pattern = use.pattern
                if k is None or (pattern is not None and pattern.inputs[k] in pattern.constants):
                    continue
                given = (
                    f"input {pattern.inputs[k]} is not in its `constants:`"
                    if pattern
                    else "an op's inputs may be any value"
                )
                raise doc.error(
                    f"{use.user} uses macro {use.macro}, whose {slot} reads ${{{name}}}, but {given}",
                    use.node,
                    use.key,
                    value=True,
                    hint="only a pattern that lists the input in `constants:` can use the macro",
                )
