"""A catalog op's ``onnx:`` key (the ONNX op that imports as it), and the check that
no two ops import the same ONNX op at the same opset.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from byoc.catalog import AttrDef, OnnxImport, RuleError, check_attr_value
from byoc.errors import SpecError

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc


ONNX_KEYS = (("type",), ("domain", "opsets", "attrs"))
"""The ``onnx:`` key's (required, optional) keys."""
ONNX_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
ONNX_DOMAIN = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*)?\Z")


def load_onnx(doc: YamlDoc, node, what: str, attrs: tuple[AttrDef, ...], several: bool) -> OnnxImport:
    """The op's ``onnx:`` key: the ONNX op (``domain``, default the default domain, and
    ``type``) that imports as it at ``opsets`` (``[first, last]``, ``null`` for no
    last; default every opset), its attributes renamed by ``attrs`` (ONNX name ->
    ``[the op's attribute, ONNX's default]``, as ``byoc/onnx/ops.yaml`` writes them)."""
    what = f"{what}: onnx"
    onode = doc.mapping(node, "onnx", what)
    doc.check_keys(onode, what, *ONNX_KEYS)
    if several:
        raise doc.error(
            f"{what}: an op of several outputs does not import from ONNX",
            node,
            "onnx",
            hint="an ONNX op of one output imports as an op of one output; remove `onnx:`",
        )
    op_type = doc.typed(onode, "type", str, f"{what}: type")
    if not ONNX_NAME.match(op_type):
        raise doc.error(
            f"{what}: type {op_type!r} is not an ONNX op type",
            onode,
            "type",
            value=True,
            hint="the op type as ONNX nodes write it, such as HardSwish",
        )
    domain = doc.typed(onode, "domain", str, f"{what}: domain") if "domain" in onode else ""
    if not ONNX_DOMAIN.match(domain):
        raise doc.error(
            f"{what}: domain {domain!r} is not an ONNX domain",
            onode,
            "domain",
            value=True,
            hint="dot-separated names, such as com.example; leave it out for ONNX's own ops",
        )
    domain = "" if domain == "ai.onnx" else domain
    if domain == "":
        _check_not_shipped(doc, onode, what, op_type)
    opsets = _load_opsets(doc, onode, what) if "opsets" in onode else (1, None)
    mapped = _load_onnx_attrs(doc, onode, what, attrs) if "attrs" in onode else ()
    return OnnxImport(op_type, domain, opsets, mapped, loc=doc.at(node, "onnx"))


def _check_not_shipped(doc: YamlDoc, onode, what: str, op_type: str) -> None:
    """The ONNX op is not one that byoc's own table imports."""
    from byoc.onnx.ops import onnx_ops

    row = onnx_ops().get(op_type)
    if row is not None:
        becomes = f" as {row.op}" if row.op else ""
        raise doc.error(
            f"{what}: byoc imports ONNX {op_type} itself{becomes} (byoc/onnx/ops.yaml); "
            "an `onnx:` key adds an ONNX op that byoc does not import",
            onode,
            "type",
            value=True,
            hint=f"to run {op_type} as your op, match what it imports as with a pattern of your "
            "backend (spec/README.md, patterns); or name an op of another domain",
        )


def _load_opsets(doc: YamlDoc, onode, what: str) -> tuple[int, int | None]:
    seq = doc.typed(onode, "opsets", list, f"{what}: opsets")
    hint = "[first, last] opset of the op's domain, last null for no end: [14, null]"
    if len(seq) != 2:
        raise doc.error(
            f"{what}: opsets must be [first, last], got {len(seq)} entries",
            onode,
            "opsets",
            value=True,
            hint=hint,
        )
    for i, bound in enumerate(seq):
        if not (
            isinstance(bound, int) and not isinstance(bound, bool) and bound >= 1 or i == 1 and bound is None
        ):
            raise doc.error(
                f"{what}: opsets: {bound!r} is not an opset (a positive integer{'' if i == 0 else ' or null'})",
                seq,
                i,
                hint=hint,
            )
    low, high = int(seq[0]), None if seq[1] is None else int(seq[1])
    if high is not None and high < low:
        raise doc.error(
            f"{what}: opsets [{low}, {high}] end before they begin", onode, "opsets", value=True, hint=hint
        )
    return low, high


def _load_onnx_attrs(
    doc: YamlDoc, onode, what: str, attrs: tuple[AttrDef, ...]
) -> tuple[tuple[str, str, object], ...]:
    anode = doc.mapping(onode, "attrs", f"{what}: attrs")
    declared = {a.name: a for a in attrs}
    hint = "ONNX_ATTRIBUTE: [your op's attribute, ONNX's default], such as alpha: [alpha, 0.2]"
    out: list[tuple[str, str, object]] = []
    for key in anode:
        if not isinstance(key, str) or not ONNX_NAME.match(key):
            raise doc.error(f"{what}: attrs: {key!r} is not an ONNX attribute name", anode, key)
        pair = anode[key]
        if not isinstance(pair, list) or len(pair) != 2:
            raise doc.error(
                f"{what}: attrs: {key} must be [attribute, default]", anode, key, value=True, hint=hint
            )
        name, default = pair
        if name not in declared:
            raise doc.error(
                f"{what}: attrs: {key} names {name!r}, which is not an attribute of the op",
                pair,
                0,
                hint=f"the op's attributes: {', '.join(declared) or 'none (declare them under attrs:)'}",
            )
        if any(name == taken for _, taken, _ in out):
            raise doc.error(f"{what}: attrs: two ONNX attributes set {name!r}", pair, 0)
        try:
            checked = check_attr_value(declared[name], default)
        except RuleError as exc:
            raise doc.error(
                f"{what}: attrs: {key}: the default {exc.message.removeprefix(f'attribute {name} ')}",
                pair,
                1,
                hint="ONNX's default, of the op's attribute type (for an attribute ONNX requires, any such value)",
            ) from None
        out.append((key, name, checked))
    return tuple(out)


def check_onnx_claims(ops, docs: Sequence[YamlDoc]) -> None:
    """No two ops import the same ONNX op at the same opset: the later is an error."""
    claims: list[tuple[str, OnnxImport]] = []
    texts = {doc.path: doc.text for doc in docs}
    for op in ops:
        mine = op.onnx
        if mine is None:
            continue
        for other_name, other in claims:
            if mine.overlaps(other):
                where = f" ({other.loc.file}:{other.loc.line})" if other.loc else ""
                raise SpecError(
                    f"op {op.name}: onnx: op {other_name}{where} imports {mine.domain + '.' if mine.domain else ''}"
                    f"{mine.type} already, at {other.opsets_text()}",
                    mine.loc,
                    hint="one op imports each ONNX op at each opset: drop one `onnx:` key, or split "
                    "the opsets between them",
                    source=texts.get(mine.loc.file) if mine.loc else None,
                )
        claims.append((op.name, mine))
