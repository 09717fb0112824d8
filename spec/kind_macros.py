"""The kinds whose specs define C macros that the generator expands into kernels.

Ops map to constructs by rank: straight to macros (c_source), or to engine layers
that each expand one macro (engine). This module loads the macros, the rank
mappings and the vars, and checks that every placeholder of every macro argument is
supplied wherever the macro is used: by byoc, by an option, by the vars of the op
or layer, and (c_source, :mod:`.macro_args`) by the op's inputs and attributes.
The uses of the macros and their checks are in :mod:`.macro_uses`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from byoc.catalog import OpDef
from byoc.shape_rules import SHAPE_RULES

from .backend import MacroDef
from .bindings import frozen_map
from .codegen_kind import CodegenKind
from .draft import SpecDraft, c_name, check_template, check_template_text, known
from .layouts import load_macro_layouts, load_mixed_layouts
from .macro_args import attribute_of, attribute_placeholders, const_input, input_ref
from .macro_files import MacroBody, check_all_taken, macro_arguments, macro_bodies_file, macro_body
from .macro_uses import MacroUse, attribute_use, check_broadcasts, check_input_index, check_stride, check_use
from .names import COMMON_PLACEHOLDERS, DIM_PLACEHOLDER
from .template import PLACEHOLDER_NAME, Placeholder

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc

DEFAULT_RANK_KEY = "default"
"""The key of an op's rank mapping that serves every other declared rank."""

FIXED_ARITY_RULES = tuple(n for n, r in SHAPE_RULES.items() if r.elementwise or r.max_inputs is not None)
"""The shape rules a macro kernel can implement: it takes a fixed number of input
pointers and learns their extents and the op's attributes itself, so every rule but
the variadic ones whose inputs differ in shape (an elementwise op of several arities
maps each arity to its own macro or layer)."""


class MacroKind(CodegenKind):
    """A kind whose spec defines ``macros`` and maps each op, by rank, to one of its
    ``construct`` (macros or layers)."""

    __slots__ = ()
    construct: ClassVar[str]
    """The key of an op's rank mapping, and the top-level key of what it names."""
    default_rank: ClassVar[bool] = False
    """Whether an op's rank mapping may have a ``default`` entry."""
    macro_args: ClassVar[tuple[str, ...]] = ()
    """Placeholders of macro arguments (besides ``${dim<k>}`` when :attr:`dims`)."""
    macro_body: ClassVar[tuple[str, ...]] = ()
    body_rendered: ClassVar[bool] = True
    """Whether the generator renders a macro's body as a template (engine). c_source
    writes it as is, so a placeholder there would reach the C compiler: refused."""
    """Placeholders of macro bodies."""
    macro_inputs: ClassVar[bool] = False
    """True when each macro declares how many inputs its kernel takes (ops use macros directly)."""
    macro_setup: ClassVar[tuple[str, ...]] = ()
    """Optional per-kernel templates of a macro (c_source: ``state``, ``init``,
    ``teardown``), whose placeholders are :attr:`macro_setup_args` and the common ones."""
    macro_setup_args: ClassVar[tuple[str, ...]] = ("symbol",)
    """Placeholders of :attr:`macro_setup`: ``${symbol}`` is the kernel's name."""
    macro_layouts: ClassVar[bool] = False
    """Whether a macro may say which of the spec's ``layouts:`` its kernel's ports take
    (:mod:`.layouts`)."""
    macro_status: ClassVar[bool] = False
    """Whether a macro may say that its kernel returns an ``int`` status (``status: true``),
    and the spec, at the top level, what a macro that does not say has (default false)."""
    macro_broadcast: ClassVar[bool] = False
    """Whether a macro may say that its kernel takes inputs broadcast to the output's
    shape (``broadcast: true``), reading them through ``${in<k>_stride<j>}``; the kind's
    specs then say so per macro, and partitioning asks the macro that runs a node."""
    macro_overwrites: ClassVar[bool] = False
    """Whether a macro may say that its kernel's result may overwrite one of its inputs
    (``overwrites: in<k>``), so that the function's memory plan may give both one buffer."""
    dims: ClassVar[bool] = False
    """Whether macro arguments may use ``${dim0}``, ``${dim1}``, ... (the output's extents)."""
    op_args: ClassVar[bool] = False
    """Whether macro arguments may use the inputs' extents (``${in0_dim0}``, ...) and the
    attributes of the op using the macro (``${groups}``, ``${strides0}``, ...)."""

    def placeholders(self) -> set[str]:
        return super().placeholders() | set(self.macro_args) | set(self.macro_body)

    def reserves(self, name: str) -> bool:
        if super().reserves(name):
            return True
        return (self.dims and DIM_PLACEHOLDER.match(name) is not None) or (
            self.op_args and input_ref(name) is not None
        )

    def load_structure(self, doc: YamlDoc, root: Any, draft: SpecDraft) -> None:
        super().load_structure(doc, root, draft)
        self.load_macros(doc, root, draft)

    def check_spec(self, doc: YamlDoc, draft: SpecDraft) -> None:
        """Every placeholder of every macro argument must be supplied wherever the macro is used."""
        uses = self.macro_uses(doc, draft)
        builtin = set(COMMON_PLACEHOLDERS) | set(draft.options) | set(self.macro_args)
        all_vars = set().union(*(u.vars for u in uses))
        more = (
            ", ${in0_dim0}, ${in0_shape}, ... and the attributes of the ops using it"
            " (${<attr>}, or ${<op>.<attr>} as a pattern names its node)"
            if self.op_args
            else ""
        )
        args: dict[str, list[tuple[str, Placeholder]]] = {}
        for mname, macro in draft.macros.items():
            users = [u for u in uses if u.macro == mname]
            unused = self.op_args and not users

            def accept(name: str, users=users, unused=unused) -> bool:
                # A macro no op uses is never expanded: its vars and attributes are
                # whatever the op mapped to it later will supply (a trimmed copy of a spec).
                return unused or (
                    self.op_args
                    and (input_ref(name) is not None or any(attribute_use(u, name) for u in users))
                )

            args[mname] = []
            for param in macro.params:
                pnode, key = draft.macro_params[mname][param]
                for ph in check_template(
                    doc,
                    pnode,
                    key,
                    f"the argument of {param} in macro {mname}",
                    builtin | all_vars,
                    dims=self.dims,
                    accept=accept,
                    more=more,
                ):
                    check_input_index(doc, pnode, key, ph, macro)
                    check_stride(doc, pnode, key, ph, macro)
                    args[mname].append((param, ph))
            if macro.broadcast:
                check_broadcasts(doc, macro, users)
        for use in uses:
            check_use(doc, use, args[use.macro], builtin)

    def macro_uses(self, doc: YamlDoc, draft: SpecDraft) -> list[MacroUse]:
        """Every use of a macro in the spec, with the vars it has."""
        raise NotImplementedError

    # ------------------------------------------------------------------ macros

    def load_macros(self, doc: YamlDoc, root: Any, draft: SpecDraft) -> None:
        names = set(COMMON_PLACEHOLDERS) | set(draft.options)
        default_status = False  # what a macro without its own `status` has: the spec's top-level one
        if self.macro_status and "status" in root:
            default_status = bool(doc.typed(root, "status", bool, "status"))
        node = doc.mapping(root, "macros", "macros")
        if not node:
            raise doc.error("macros must define at least one macro", root, "macros", value=True)
        shared = self._shared_params(doc, root)
        bodies_file = macro_bodies_file(doc, root)
        bodies: list[tuple[str, MacroBody]] = []
        for name in node:
            what = f"macro {name}"
            c_name(doc, node, name, "macro name")
            mnode = doc.mapping(node, name, what)
            own_body = () if bodies_file is not None else ("body",)
            required = ("inputs", *own_body) if self.macro_inputs else own_body
            layouts = ("layouts", "mixed_layouts") if self.macro_layouts else ()
            status_key = ("status",) if self.macro_status else ()
            broadcast_key = ("broadcast",) if self.macro_broadcast else ()
            overwrites_key = ("overwrites",) if self.macro_overwrites else ()
            doc.check_keys(
                mnode,
                what,
                required,
                ("params", "doc", *self.macro_setup, *layouts, *status_key, *broadcast_key, *overwrites_key)
                + (("body",) if bodies_file is not None else ()),
            )
            inputs = None
            if self.macro_inputs:
                inputs = int(doc.typed(mnode, "inputs", int, f"{what}: inputs"))
                if inputs < 1:
                    raise doc.error(f"{what}: inputs must be at least 1", mnode, "inputs", value=True)
            body = macro_body(doc, mnode, str(name), what, bodies_file, doc.at(node, name))
            params = macro_arguments(doc, mnode, str(name), what, body, shared)
            bodies.append((str(name), body))
            if self.body_rendered:
                check_template_text(
                    body.text, body.error, f"the body of {what}", names | set(self.macro_body)
                )
            else:
                _refuse_placeholders(body, what)
            _check_body_lines(body, what)
            for param, (pnode, key) in params.items():  # C names already (macro_arguments)
                if param == name:
                    raise doc.error(f"{what}: a parameter cannot share the macro's name", pnode, key)
                doc.typed(pnode, key, str, f"{what}: the argument of {param}")
                if not re.search(rf"(?<![A-Za-z0-9_]){re.escape(param)}(?![A-Za-z0-9_])", body.text):
                    raise doc.error(
                        f"{what}: parameter {param} is not used in the body",
                        pnode,
                        key,
                        hint="remove the parameter, or use it in the body",
                    )
            mdoc = doc.typed(mnode, "doc", str, f"{what}: doc") if "doc" in mnode else body.doc
            args = frozen_map({p: str(pnode[key]) for p, (pnode, key) in params.items()})
            setup = {}
            for key in (k for k in self.macro_setup if k in mnode):
                setup[key] = str(doc.typed(mnode, key, str, f"{what}: {key}"))
                check_template(
                    doc,
                    mnode,
                    key,
                    f"the {key} of {what}",
                    names | set(self.macro_setup_args),
                    accept=_constant_input(inputs),
                    more=", ${in<k>_const} (a pattern's constant input k)" if inputs else "",
                )
            ports = frozen_map()
            if "layouts" in mnode and inputs is not None:
                ports = load_macro_layouts(doc, mnode, what, inputs, params, draft)
            mixed = load_mixed_layouts(doc, mnode, what, ports) if "mixed_layouts" in mnode else True
            status = (
                bool(doc.typed(mnode, "status", bool, f"{what}: status"))
                if "status" in mnode
                else default_status
            )
            broadcast = "broadcast" in mnode and bool(
                doc.typed(mnode, "broadcast", bool, f"{what}: broadcast")
            )
            overwrites = _overwritten_input(doc, mnode, what, inputs) if "overwrites" in mnode else None
            draft.macros[name] = MacroDef(
                str(name),
                args,
                body.text,
                str(mdoc).strip(),
                inputs,
                doc.at(node, name),
                frozen_map(setup),
                ports,
                mixed,
                status,
                broadcast,
                overwrites,
                body.line,
                body.file,
            )
            draft.macro_params[name] = params
        check_all_taken(bodies)
        taken = {
            key for where in draft.macro_params.values() for pnode, key in where.values() if pnode is shared
        }
        for param in shared:
            if param not in taken:
                raise doc.error(
                    f"params: no macro takes {param}",
                    shared,
                    param,
                    hint="a shared argument serves the macros whose parameter of that name their params leave out",
                )

    def _shared_params(self, doc: YamlDoc, root: Any) -> Any:
        """The spec's shared ``params:``: the argument of a macro parameter by its name,
        for every macro that takes the parameter and whose own ``params`` leave it out."""
        if "params" not in root:
            return {}
        shared = doc.mapping(root, "params", "params")
        for param in shared:
            c_name(doc, shared, param, "params: parameter")
            doc.typed(shared, param, str, f"params: the argument of {param}")
        return shared

    def load_vars(
        self, doc: YamlDoc, node: Any, what: str, draft: SpecDraft, op: OpDef | None = None
    ) -> dict[str, str]:
        """The ``vars`` of an op or a layer: its own values of macro-argument placeholders."""
        vnode = doc.mapping(node, "vars", f"{what}: vars")
        reserved = self.placeholders() | set(draft.options)
        out: dict[str, str] = {}
        for name in vnode:
            if not isinstance(name, str) or not PLACEHOLDER_NAME.match(name):
                raise doc.error(f"{what}: var name {name!r} is not an identifier", vnode, name)
            if name in reserved or self.reserves(name):
                raise doc.error(
                    f"{what}: var {name!r} would hide a placeholder of the same name",
                    vnode,
                    name,
                    hint="byoc or an option already supplies ${" + name + "}; pick another name",
                )
            if self.op_args and op is not None and attribute_of(op, name) is not None:
                raise doc.error(
                    f"{what}: var {name!r} would hide the attribute placeholder ${{{name}}} of {op.name}",
                    vnode,
                    name,
                    hint=f"the attribute placeholders of {op.name}: {attribute_placeholders(op)}; pick another name",
                )
            value = vnode[name]
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise doc.error(
                    f"{what}: var {name} must be a string, got {value!r}", vnode, name, value=True
                )
            out[name] = str(value)
        return out

    # -------------------------------------------------------------- rank mapping

    def load_ranks(
        self, doc: YamlDoc, onode: Any, what: str, draft: SpecDraft, defined: Mapping[str, Any]
    ) -> tuple[dict[int, str], str | None]:
        """An op's mapping from ranks (and ``default``, when allowed) to ``defined`` names."""
        key, noun = self.construct, self.construct.removesuffix("s")
        rnode = doc.mapping(onode, key, f"{what}: {key}")
        if not rnode:
            raise doc.error(f"{what}: {key} must map at least one rank", onode, key, value=True)
        by_rank: dict[int, str] = {}
        default = None
        for rank in rnode:
            is_default = self.default_rank and rank == DEFAULT_RANK_KEY
            if not is_default and (isinstance(rank, bool) or not isinstance(rank, int)):
                keys = "a rank (an integer)" + (f" or `{DEFAULT_RANK_KEY}`" if self.default_rank else "")
                raise doc.error(f"{what}: {key} keys must be {keys}, got {rank!r}", rnode, rank)
            if not is_default and rank not in draft.ranks:
                raise doc.error(
                    f"{what}: rank {rank} is not one of this backend's ranks",
                    rnode,
                    rank,
                    hint=f"ranks: {', '.join(map(str, draft.ranks))}; add it to `ranks:` first",
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


def _constant_input(inputs: int | None) -> Callable[[str], bool]:
    """Accepts ``${in<k>_const}`` for k below the macro's ``inputs``, in its setup templates."""

    def accept(name: str) -> bool:
        k = const_input(name)
        return k is not None and inputs is not None and k < inputs

    return accept


def _check_body_lines(body: MacroBody, what: str) -> None:
    offset = 0
    for line in body.text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("#"):
            raise body.error(
                offset + line.index("#"),
                f"{what}: a macro body cannot hold a preprocessor directive",
                "put #include and other directives in `prelude` or a support header",
            )
        if stripped.endswith("\\"):
            raise body.error(
                offset + line.rindex("\\"),
                f"{what}: do not end body lines with a backslash",
                "byoc adds the line continuations of the #define itself",
            )
        offset += len(line) + 1


def _refuse_placeholders(body: MacroBody, what: str) -> None:
    """A body written into the C file as is may hold no ``${name}``: the compiler
    would get it verbatim. Values reach the body through the macro's parameters."""
    found = check_template_text(body.text, body.error, f"the body of {what}", (), accept=lambda name: True)
    if found:
        p = found[0]
        raise body.error(
            p.offset,
            f"undefined placeholder ${{{p.name}}} in the body of {what}: the body is C, copied as is",
            f'pass the value as a parameter, params: {{p_X_: "${{{p.name}}}"}}, and write p_X_ in the body',
        )


def _overwritten_input(doc: YamlDoc, mnode: Any, what: str, inputs: int | None) -> int:
    """A macro's ``overwrites: in<k>``: the input whose buffer its kernel's result may take."""
    port = doc.typed(mnode, "overwrites", str, f"{what}: overwrites")
    ports = [f"in{k}" for k in range(inputs or 0)]
    if port not in ports:
        raise doc.error(
            f"{what}: overwrites: {port!r} is not an input of its kernel",
            mnode,
            "overwrites",
            value=True,
            hint=f"name one of {', '.join(ports)}: the input whose elements the kernel reads before it "
            "writes the result's there",
        )
    return ports.index(port)
