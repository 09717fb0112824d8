"""The ``c_fused`` kind: C99 with each region fused into loop nests, from C templates.

An op maps to one of three bindings, by its catalog shape rule:

- **expression** rules (:data:`EXPRESSION_RULES`: elementwise ops (comparisons, where,
  cast, ... too) and the channel-wise
  ``bias_add`` and ``batch_norm``): ``c``, a C expression over ``${x0}``, ``${x1}``, ...
  (one scalar of each input) and the op's attributes; the spec's, else the catalog's;
- **reduction** rules (:data:`REDUCTION_RULES`: convolutions, pooling, dense, matmul,
  lrn, softmax, reductions): ``reduce``, accumulators each with an ``init`` and an
  ``update`` over ``${x0}``, ``${x1}``, ... at one point of the rule's reduction space,
  and ``result``, the op's value from the accumulators;
- **movement** rules (:data:`MOVEMENT_RULES`: reshape, transpose, slice, pad, gather,
  concatenate, split, ...): ``{}``; the rule says where each output element comes from;
- **kernel** rules (:data:`KERNEL_RULES`: attention): ``call``, the name of a function of
  the spec's support code that computes one block of the output (its last two axes)
  per call, with the arguments the rule fixes.

The loop structure of each rule is the generator's (``byoc.generator.c_fused.anchors``);
what an op computes is data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from byoc.catalog import OpDef
from byoc.shape_rules import SHAPE_RULES

from .bindings import ExpressionBinding, OpBinding
from .codegen_kind import CodegenKind, Slot
from .conditions import WHEN_KEY
from .draft import SpecDraft, c_name, check_template
from .lowerings import LoweringBinding
from .names import COMMON_PLACEHOLDERS, ELEMENT_PLACEHOLDER

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc

INPUT_DTYPE_PLACEHOLDER = re.compile(r"x(0|[1-9][0-9]*)_dtype\Z")
"""``${x0_dtype}``, ...: the name of an input's dtype (``byoc_cast_${x0_dtype}_${dtype}``)."""

EXPRESSION_RULES = tuple(
    rule
    for rule in (
        "elementwise",
        "unidirectional",
        "bias_add",
        "batch_norm",
        "compare",
        "predicate",
        "select",
        "cast",
        "bitcast",
        "dequantize",
        "quantize",
        "mod",
    )
    if rule in SHAPE_RULES
)
"""Rules whose ops compute each output element from the input elements at its index
(a channel-wise parameter indexed along its axis): one C expression."""
REDUCTION_RULES = (
    "conv",
    "conv_transpose",
    "pool",
    "global_pool",
    "dense",
    "matmul",
    "conv_integer",
    "matmul_integer",
    "lrn",
    "softmax",
    "reduce",
)
"""Rules whose ops accumulate over a reduction space per output element."""
ACCUMULATOR_TYPES = ("double", "float", "int32_t", "uint32_t", "int64_t", "uint64_t")
"""The C types an accumulator may declare (``type``): double by default, as the
reference computes in float64; an integer type for an integer product (an unsigned one
wraps where a signed overflow would be undefined)."""
POINTWISE_RESULT_RULES = ("lrn", "softmax")
"""Reduction rules whose output has the input's shape: ``result`` may read ``${x0}``
at the output element's own index."""
MOVEMENT_RULES = (
    "concatenate",
    "reshape",
    "flatten",
    "transpose",
    "squeeze",
    "unsqueeze",
    "expand",
    "pad",
    "slice",
    "gather",
    "split",
)
"""Rules whose ops copy input elements (or a pad value) to other places; split gives
each of its outputs from its own part of the input."""
KERNEL_RULES = ("attention",)
"""Rules whose ops a support function computes (``call``), one call per block of the
output's last two axes; the rule fixes the arguments (``byoc.generator.c_fused.calls``).
A computation whose loops do not fit one output element at a time (attention's streaming
softmax: a running maximum and sum over blocks of keys, the output rows rescaled as they
grow) is written once, in C, beside the spec."""
PART = "part"
"""The placeholder of an accumulator's ``merge``: the other partial value it takes in."""
RESULT_PLACEHOLDERS = ("window",)
"""Placeholders of ``result`` besides the accumulators: ``${window}``, the number of
points of the reduction space (for a pool: of the window inside the padded input)."""


@dataclass(frozen=True, slots=True)
class Accumulator:
    """One accumulator of a reduction op: a C ``type`` (double unless the spec says
    otherwise), set to ``init``, then ``update`` at every point of the reduction space
    (skipping a pool's padding)."""

    name: str
    init: str
    update: str
    float_update: str | None = None
    """The update of the accumulator as a C ``float``, where the option
    ``float32_dots`` makes the float32 (float16, bfloat16) dot products accumulate in
    float: the spec's ``float_update``, or None where the op has none."""
    merge: str | None = None
    """How two partial values of the accumulator, each over some of the points, make
    one (``${part}`` the other partial): lets a pass over a contiguous row run in vector
    lanes of partial values (generator/c_fused/partials.py); None where the op has none."""
    type: str = "double"
    """Its C type: one of :data:`ACCUMULATOR_TYPES`, one for all of an op's accumulators."""


@dataclass(frozen=True, slots=True)
class ReductionBinding(OpBinding):
    """c_fused, reduction rules: accumulators, and the result over them."""

    accumulators: tuple[Accumulator, ...]
    result: str

    @property
    def acc_type(self) -> str:
        """The C type of the op's accumulators (the loader checks that they share it)."""
        return self.accumulators[0].type

    def mapping_text(self) -> str:
        accs = ", ".join(
            f"{a.name} = {a.init}; {a.update}" + (f" (float: {a.float_update})" if a.float_update else "")
            for a in self.accumulators
        )
        return f"reduce {accs}; result {self.result}"


@dataclass(frozen=True, slots=True)
class MovementBinding(OpBinding):
    """c_fused, movement rules: the rule's own element mapping."""

    def mapping_text(self) -> str:
        return "data movement"


@dataclass(frozen=True, slots=True)
class CallBinding(OpBinding):
    """c_fused, kernel rules: the support function that computes the op (``${dtype}``
    replaced by the output's dtype)."""

    function: str

    def mapping_text(self) -> str:
        return f"call {self.function}"


def attribute_names(opdef: OpDef) -> list[str]:
    """The attributes a template of ``opdef`` may use: the scalar ones (int, float, bool),
    and a str one whose choices are C identifiers (bit_shift's LEFT or RIGHT, pasted into
    a name: ``byoc_shift_${direction}_${dtype}``)."""
    return [
        a.name
        for a in opdef.attrs
        if a.type in ("int", "float", "bool")
        or (a.type == "str" and a.choices and all(re.fullmatch(r"[A-Za-z_]\w*", str(c)) for c in a.choices))
    ]


class CFusedKind(CodegenKind):
    """Ops map to C templates (see the module doc)."""

    __slots__ = ()
    name = "c_fused"
    doc = "C99 source: each region fused into loop nests, elementwise ops into their producer's loop"
    language = "c"
    generator = "c_fused.generate"
    support_files = True  # `support:` C files beside the spec (fused_math.h)
    templates = (Slot("prelude", "C text placed once, after the includes (helpers for op expressions)", ()),)
    op_optional = ("c", "reduce", "result", "call")
    shape_rules = EXPRESSION_RULES + REDUCTION_RULES + MOVEMENT_RULES + KERNEL_RULES
    attrs = True
    pattern_required = ("lowering",)
    options: Mapping[str, str] = MappingProxyType(
        {
            "host_isa": "bool",
            "target_clones": "bool",
            "vectorize": "bool",
            "openmp_threshold": "int",
            "openmp_reduction_threshold": "int",
            "block_reductions": "bool",
            "float32_dots": "bool",
        }
    )
    can_broadcast = True
    expression_placeholders = ("ctype", "dtype")
    """The placeholders of an expression besides the inputs', the common ones and options."""
    reserved_more = ", x0, x1, ..., x0_dtype, x1_dtype, ..."

    def placeholders(self) -> set[str]:
        return super().placeholders() | set(self.expression_placeholders) | set(RESULT_PLACEHOLDERS)

    def reserves(self, name: str) -> bool:
        return (
            super().reserves(name)
            or ELEMENT_PLACEHOLDER.match(name) is not None
            or INPUT_DTYPE_PLACEHOLDER.match(name) is not None
        )

    def load_pattern_binding(
        self, doc: YamlDoc, node: Any, name: str, inputs: int, draft: SpecDraft
    ) -> LoweringBinding:
        """A pattern is computed by other ops of the spec: its ``lowering`` (checked
        against the pattern once it is read, :mod:`byoc.spec.lowerings`)."""
        what = f"pattern {name}: lowering"
        text = doc.typed(node[name], "lowering", str, what)
        if not text.strip():
            raise doc.error(f"{what} is empty", node[name], "lowering", value=True)
        return LoweringBinding(name, str(text), loc=doc.at(node, name))

    def load_binding(self, doc: YamlDoc, node: Any, op: str, opdef: OpDef, draft: SpecDraft) -> OpBinding:
        onode = node[op]
        rule = opdef.shape_rule
        wanted = (
            {"c"}
            if rule in EXPRESSION_RULES
            else {"reduce", "result"}
            if rule in REDUCTION_RULES
            else {"call"}
            if rule in KERNEL_RULES
            else set()
        )
        for key in onode:
            if key not in wanted and key != WHEN_KEY:
                raise doc.error(
                    f"op {op}: {key} does not apply to a {rule} op",
                    onode,
                    key,
                    hint=_keys_hint(rule),
                )
        if rule in EXPRESSION_RULES:
            return ExpressionBinding(op, self._expression(doc, node, op, opdef, draft), loc=doc.at(node, op))
        if rule in REDUCTION_RULES:
            return self._reduction(doc, node, op, opdef, draft)
        if rule in KERNEL_RULES:
            return self._call(doc, node, op, rule)
        return MovementBinding(op, loc=doc.at(node, op))

    def _call(self, doc: YamlDoc, node: Any, op: str, rule: str) -> CallBinding:
        """``call``: a C function name, ``${dtype}`` its one placeholder."""
        onode = node[op]
        what = f"op {op}: call"
        if "call" not in onode:
            raise doc.error(f"op {op}: a {rule} op needs `call`", node, op, hint=_keys_hint(rule))
        text = doc.typed(onode, "call", str, what).strip()
        if not re.fullmatch(r"(?:[A-Za-z_]\w*|\$\{dtype\})+", text) or text[0].isdigit():
            raise doc.error(
                f"{what} must be a C function name, got {text!r}",
                onode,
                "call",
                value=True,
                hint="for example call: fused_attention_${dtype} (a function of the spec's support files)",
            )
        return CallBinding(op, text, loc=doc.at(node, op))

    def _names(self, opdef: OpDef, draft: SpecDraft) -> set[str]:
        """Placeholders every template of ``opdef`` may use."""
        return (
            set(COMMON_PLACEHOLDERS)
            | set(draft.options)
            | set(self.expression_placeholders)
            | set(attribute_names(opdef))
            | {f"x{i}_dtype" for i in range(opdef.max_inputs or 0)}
        )

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
        inputs = {f"x{i}" for i in range(opdef.max_inputs)}
        return self._one_line(
            doc, onode, "c", f"{what}: the C expression", self._names(opdef, draft) | inputs
        )

    def _one_line(self, doc: YamlDoc, node: Any, key: str, what: str, names: set[str]) -> str:
        """``node[key]``: a one-line C expression over ``names``."""
        text = doc.typed(node, key, str, what)
        if not text.strip():
            raise doc.error(f"{what} is empty", node, key, value=True)
        body = text.strip()
        for bad, why in ((";", "a C expression, not a statement"), ("\n", "one line")):
            if bad in body:
                raise doc.error_at(
                    f"{what} must be {why}",
                    doc.at_offset(node, key, text.index(body) + body.index(bad)),
                    hint='for example c: "${x0} + ${x1}"; put helper functions in `prelude`',
                )
        check_template(doc, node, key, what, names)
        return str(body)

    def _reduction(
        self, doc: YamlDoc, node: Any, op: str, opdef: OpDef, draft: SpecDraft
    ) -> ReductionBinding:
        onode = node[op]
        what = f"op {op}"
        for key in ("reduce", "result"):
            if key not in onode:
                raise doc.error(
                    f"{what}: a {opdef.shape_rule} op needs `{key}`",
                    node,
                    op,
                    hint=_keys_hint(opdef.shape_rule),
                )
        base = self._names(opdef, draft)
        inputs = {f"x{i}" for i in range(opdef.max_inputs or 0)}
        accs = doc.mapping(onode, "reduce", f"{what}: reduce")
        if not accs:
            raise doc.error(f"{what}: reduce needs at least one accumulator", onode, "reduce", value=True)
        accumulators: list[Accumulator] = []
        for name in accs:
            c_name(doc, accs, name, f"{what}: the accumulator")
            if name in base or name in inputs or name in RESULT_PLACEHOLDERS or name == PART:
                raise doc.error(
                    f"{what}: the accumulator {name!r} is named like a placeholder",
                    accs,
                    name,
                    hint="rename it",
                )
            entry = doc.mapping(accs, name, f"{what}: accumulator {name}")
            doc.check_keys(
                entry, f"{what}: accumulator {name}", ("init", "update"), ("float_update", "merge", "type")
            )
            acc_type = self._acc_type(doc, entry, f"{what}: accumulator {name}", accumulators)
            earlier = {a.name for a in accumulators}
            init = self._one_line(doc, entry, "init", f"{what}: the init of accumulator {name}", base)
            updates = [
                self._one_line(
                    doc,
                    entry,
                    key,
                    f"{what}: the {key} of accumulator {name}",
                    base | inputs | earlier | {name},
                )
                if key in entry
                else None
                for key in ("update", "float_update")
            ]
            merge = (
                self._one_line(
                    doc, entry, "merge", f"{what}: the merge of accumulator {name}", base | {name, PART}
                )
                if "merge" in entry
                else None
            )
            accumulators.append(Accumulator(str(name), init, *updates, merge, acc_type))
        names = base | {a.name for a in accumulators} | set(RESULT_PLACEHOLDERS)
        if opdef.shape_rule in POINTWISE_RESULT_RULES:
            names |= inputs
        result = self._one_line(doc, onode, "result", f"{what}: the result", names)
        return ReductionBinding(op, tuple(accumulators), result, loc=doc.at(node, op))

    @staticmethod
    def _acc_type(doc: YamlDoc, entry: Any, what: str, earlier: list[Accumulator]) -> str:
        """An accumulator's ``type``: a known C type, the same as the op's earlier accumulators'."""
        if "type" not in entry:
            acc_type = "double"
        else:
            acc_type = doc.typed(entry, "type", str, f"{what}: the type")
            if acc_type not in ACCUMULATOR_TYPES:
                raise doc.error(
                    f"{what}: type {acc_type!r} is not an accumulator type",
                    entry,
                    "type",
                    value=True,
                    hint=f"one of {', '.join(ACCUMULATOR_TYPES)}",
                )
        if earlier and earlier[0].type != acc_type:
            at = (entry, "type") if "type" in entry else (entry, "init")
            raise doc.error(
                f"{what}: type {acc_type} differs from accumulator {earlier[0].name}'s {earlier[0].type}",
                *at,
                hint="the accumulators of one op share one C type",
            )
        return acc_type


def _keys_hint(rule: str) -> str:
    if rule in EXPRESSION_RULES:
        return "a c_fused op of this rule takes `c` (or `{}` for the catalog's C expression)"
    if rule in REDUCTION_RULES:
        return "a c_fused op of this rule takes `reduce: {acc: {init: ..., update: ...}}` and `result`"
    if rule in KERNEL_RULES:
        return "a c_fused op of this rule takes `call: NAME`, a function of the spec's support files"
    return "a c_fused data-movement op takes no keys: `{}`"
