"""The ``c_fused`` kind: C99 with each region fused into one loop per output shape,
from the ops' C expressions."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from byoc.catalog import OpDef

from .bindings import ExpressionBinding
from .codegen_kind import CodegenKind, Slot
from .draft import SpecDraft, check_template
from .names import COMMON_PLACEHOLDERS, INPUT_PLACEHOLDER
from .yaml_doc import YamlDoc


class CFusedKind(CodegenKind):
    """Ops map to C expression templates over ``${x0}``, ``${x1}``, ...: the op's ``c``
    in the spec, else the catalog's."""

    __slots__ = ()
    name = "c_fused"
    doc = "C99 source: each region fused into one loop per output shape, from the ops' C expressions"
    language = "c"
    generator = "c_fused"
    templates = (Slot("prelude", "C text placed once, after the includes (helpers for op expressions)", ()),)
    op_optional = ("c",)
    shape_rules = ("elementwise",)
    attrs = False
    options: Mapping[str, str] = MappingProxyType(
        {"target_clones": "bool", "vectorize": "bool", "openmp_threshold": "int"}
    )
    can_broadcast = True
    expression_placeholders = ("ctype", "dtype")
    """The placeholders of an expression besides the inputs', the common ones and options."""
    reserved_more = ", x0, x1, ..."

    def placeholders(self) -> set[str]:
        return super().placeholders() | set(self.expression_placeholders)

    def reserves(self, name: str) -> bool:
        return super().reserves(name) or INPUT_PLACEHOLDER.match(name) is not None

    def load_binding(
        self, doc: YamlDoc, node: Any, op: str, opdef: OpDef, draft: SpecDraft
    ) -> ExpressionBinding:
        return ExpressionBinding(op, self._expression(doc, node, op, opdef, draft), loc=doc.at(node, op))

    def _expression(self, doc: YamlDoc, node: Any, op: str, opdef: OpDef, draft: SpecDraft) -> str:
        """The C expression of ``op``: the spec's ``c``, checked, else the catalog's."""
        what = f"op {op}"
        if opdef.max_inputs is None:
            raise doc.error(
                f"the {self.name} kind cannot implement {op}: it takes {opdef.arity_text()} inputs",
                node,
                op,
                hint=f"a {self.name} expression names each input, ${{x0}}, ${{x1}}, ...; it needs a fixed arity",
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
        names = (
            set(COMMON_PLACEHOLDERS) | set(draft.options) | set(self.expression_placeholders) | set(inputs)
        )
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
