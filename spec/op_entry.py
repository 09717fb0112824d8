"""One entry of an op catalog loaded into an :class:`~byoc.catalog.OpDef`: its name,
inputs, shape rule, dtypes, outputs, reference (``numpy:`` or ``kernel:``) and C template.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from byoc.catalog import (
    SHAPE_RULES,
    AttrDef,
    OpDef,
    Reference,
    RuleError,
    ShapeRule,
    compile_reference,
    count_text,
    kernel_reference,
)
from byoc.errors import Location
from byoc.ir import DTYPES, OP_DEFAULT_DTYPES

from .op_attrs import OP_NAME, check_rule_attrs, load_attrs
from .op_onnx import load_onnx
from .template import TemplateSyntaxError, placeholders

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc

ARITY = re.compile(r"([0-9]+)(\+?)\Z")

OP_KEYS_REQUIRED = ("inputs", "shape")
OP_KEYS_OPTIONAL = ("doc", "outputs", "dtypes", "attrs", "numpy", "kernel", "c", "onnx")
REFERENCE_KEYS = ("numpy", "kernel")
"""An op gives exactly one of these: a numpy expression, or a reference kernel's name."""

MAX_INPUTS = 64
"""The most inputs an op may declare (its C template names x0 ... x63)."""


def check_op_name(doc: YamlDoc, ops_node, name) -> None:
    if not isinstance(name, str) or not OP_NAME.match(name):
        raise doc.error(f"op name {name!r} must be lower-case letters, digits and _", ops_node, name)


def load_op(doc: YamlDoc, ops_node, name) -> OpDef:
    check_op_name(doc, ops_node, name)
    node = doc.mapping(ops_node, name, f"op {name}")
    what = f"op {name}"
    doc.check_keys(node, what, OP_KEYS_REQUIRED, OP_KEYS_OPTIONAL)

    arity_raw = node["inputs"]
    match = (
        ARITY.match(str(arity_raw))
        if isinstance(arity_raw, (int, str)) and not isinstance(arity_raw, bool)
        else None
    )
    if match is None or not 1 <= int(match.group(1)) <= MAX_INPUTS:
        raise doc.error(
            f"{what}: inputs must be an integer from 1 to {MAX_INPUTS} or 'N+' (variadic), got {arity_raw!r}",
            node,
            "inputs",
            value=True,
        )
    min_inputs = int(match.group(1))
    max_inputs = None if match.group(2) else min_inputs

    rule = doc.typed(node, "shape", str, f"{what}: shape")
    if rule not in SHAPE_RULES:
        raise doc.error(
            f"{what}: unknown shape rule {rule!r}",
            node,
            "shape",
            value=True,
            hint=f"known rules: {', '.join(SHAPE_RULES)}",
        )
    if not SHAPE_RULES[rule].takes(min_inputs, max_inputs):
        raise doc.error(
            f"{what}: the shape rule {rule} takes {SHAPE_RULES[rule].arity_text()} inputs, "
            f"but the op declares {arity_raw}",
            node,
            "inputs",
            value=True,
        )

    dtypes = OP_DEFAULT_DTYPES
    if "dtypes" in node:
        seq = doc.typed(node, "dtypes", list, f"{what}: dtypes")
        for i, d in enumerate(seq):
            if d not in DTYPES:
                raise doc.error(
                    f"{what}: unknown dtype {d!r}", seq, i, hint=f"byoc supports {', '.join(DTYPES)}"
                )
        if len(set(seq)) != len(seq):
            raise doc.error(f"{what}: a dtype is listed twice", node, "dtypes", value=True)
        dtypes = tuple(d for d in DTYPES if d in seq)

    outputs = _load_outputs(doc, node, what, SHAPE_RULES[rule]) if "outputs" in node else (1, 1)
    attrs = load_attrs(doc, node, what) if "attrs" in node else ()
    check_rule_attrs(doc, node, what, SHAPE_RULES[rule], attrs)
    text, kernel, reference = _load_reference(
        doc, node, what, min_inputs, max_inputs, attrs, outputs != (1, 1)
    )

    c = None
    if "c" in node:
        c = doc.typed(node, "c", str, f"{what}: c")
        if not SHAPE_RULES[rule].elementwise:
            raise doc.error(f"{what}: only elementwise ops take a C template", node, "c", hint="remove `c:`")
        allowed = (
            {f"x{i}" for i in range(min_inputs)} | {f"x{i}_dtype" for i in range(min_inputs)} | {"dtype"}
        )
        allowed |= {a.name for a in attrs if a.type in ("int", "float", "bool")}
        try:
            found = list(placeholders(c))
        except TemplateSyntaxError as exc:
            raise doc.error_at(
                f"{what}: {exc.message}", doc.at_offset(node, "c", exc.offset), hint=exc.hint
            ) from None
        for ph in found:
            if ph.name not in allowed:
                raise doc.error_at(
                    f"{what}: undefined placeholder ${{{ph.name}}} in the C template",
                    doc.at_offset(node, "c", ph.offset),
                    hint=f"this op's placeholders: {', '.join('${' + a + '}' for a in sorted(allowed))}",
                )
    doc_text = doc.typed(node, "doc", str, f"{what}: doc") if "doc" in node else ""
    onnx = load_onnx(doc, node, what, attrs, outputs != (1, 1)) if "onnx" in node else None
    line, col = ops_node.lc.key(name)
    return OpDef(
        name,
        min_inputs,
        max_inputs,
        rule,
        dtypes,
        attrs,
        text,
        c,
        doc_text,
        kernel,
        Location(doc.path, line + 1, col + 1),
        reference,
        *outputs,
        onnx,
    )


def _load_reference(
    doc: YamlDoc,
    node,
    what: str,
    min_inputs: int,
    max_inputs: int | None,
    attrs: tuple[AttrDef, ...],
    several: bool = False,
) -> tuple[str | None, str | None, Reference]:
    """(numpy text, kernel name, compiled reference) of the op; exactly one of the first two."""
    given = [k for k in REFERENCE_KEYS if k in node]
    if len(given) != 1:
        raise doc.error(
            f"{what}: give exactly one reference, `numpy:` or `kernel:`"
            + (" (it gives both)" if given else ""),
            node,
            given[-1] if given else None,
            hint="numpy: an expression of numpy ufuncs; kernel: a function of byoc/reference_kernels/",
        )
    key = given[0]
    text = doc.typed(node, key, str, f"{what}: {key}")
    names = [a.name for a in attrs]
    try:
        if key == "numpy" and not several:
            return text, None, compile_reference(text, max_inputs, names)
        if key == "numpy":
            raise RuleError("an op of several outputs needs a reference kernel that returns them")
        return None, text, kernel_reference(text, min_inputs, max_inputs is None, names, several)
    except RuleError as exc:
        raise doc.error(f"{what}: {exc.message}", node, key, value=True, hint=exc.hint) from None


def _load_outputs(doc: YamlDoc, node, what: str, rule: ShapeRule) -> tuple[int, int | None]:
    """The op's ``outputs:``, an int or ``"N+"`` like ``inputs:``, within its rule's."""
    raw = node["outputs"]
    match = ARITY.match(str(raw)) if isinstance(raw, (int, str)) and not isinstance(raw, bool) else None
    if match is None or int(match.group(1)) < 1:
        raise doc.error(
            f"{what}: outputs must be a positive integer or 'N+' (N or more), got {raw!r}",
            node,
            "outputs",
            value=True,
        )
    low = int(match.group(1))
    high = None if match.group(2) else low
    if not rule.gives(low, high):
        gives = count_text(rule.min_outputs, rule.max_outputs)
        raise doc.error(
            f"{what}: the shape rule {rule.name} gives {gives} output{'' if gives == '1' else 's'}, "
            f"but the op declares {raw}",
            node,
            "outputs",
            value=True,
            hint="rules of several outputs: "
            + ", ".join(r.name for r in SHAPE_RULES.values() if r.max_outputs != 1),
        )
    return low, high
