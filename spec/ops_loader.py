"""Load and validate op catalogs into a :class:`~byoc.catalog.Catalog`.

The shipped catalog is ``spec/ops.yaml``. A user's spec directory may hold an
``ops.yaml`` of the same format that extends it (:func:`merge_catalogs`): it may add
ops, and change the ``doc`` of an op defined elsewhere with an entry that holds only
``doc:``; redefining an op of the shipped catalog is an error. An op's ``onnx:`` key
names the ONNX op that imports as it (:func:`_load_onnx`), a row of the ONNX
import's table (``byoc/onnx/ops.yaml``) that the table itself must not have.
Catalogs are cached by content, and each carries a digest of it (:attr:`Catalog.key`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from byoc.catalog import (
    SHAPE_RULES,
    AttrDef,
    Catalog,
    CatalogFile,
    OnnxImport,
    OpDef,
    Reference,
    RuleError,
    ShapeRule,
    check_attr_value,
    compile_reference,
    count_text,
    kernel_reference,
)
from byoc.errors import Location, SpecError
from byoc.ir import DTYPES, OP_DEFAULT_DTYPES
from byoc.value_types import VALUE_TYPES

from .template import TemplateSyntaxError, placeholders
from .yaml_doc import YamlDoc, read_spec_text

SHIPPED_OPS = Path(__file__).with_name("ops.yaml")
USER_CATALOG = "ops.yaml"
"""The file name of a spec directory's op catalog (every other ``*.yaml`` there is a backend spec)."""
OP_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
ARITY = re.compile(r"([0-9]+)(\+?)\Z")

OP_KEYS_REQUIRED = ("inputs", "shape")
OP_KEYS_OPTIONAL = ("doc", "outputs", "dtypes", "attrs", "numpy", "kernel", "c", "onnx")
REFERENCE_KEYS = ("numpy", "kernel")
"""An op gives exactly one of these: a numpy expression, or a reference kernel's name."""
ONNX_KEYS = (("type",), ("domain", "opsets", "attrs"))
"""The ``onnx:`` key's (required, optional) keys."""
ONNX_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
ONNX_DOMAIN = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*)?\Z")


@lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int) -> Catalog:
    return load_catalog_text(YamlDoc(path))


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load a complete op catalog; the shipped ``spec/ops.yaml`` when ``path`` is None.

    Results are cached per file and modification time.
    """
    p = Path(path) if path is not None else SHIPPED_OPS
    try:
        mtime = p.stat().st_mtime_ns
    except OSError:
        mtime = -1
    return _load_cached(str(p), mtime)


def load_catalog_text(doc: YamlDoc) -> Catalog:
    """A complete catalog: every entry defines its op."""
    ops_node = _ops_node(doc, "an op catalog")
    ops = {name: _load_op(doc, ops_node, name) for name in ops_node}
    _check_onnx_claims(ops.values(), [doc])
    return Catalog(ops, source=doc.path, key=_digest([doc.text]))


def load_user_catalogs(paths: Sequence[str | Path]) -> Catalog:
    """The shipped catalog extended by the user catalogs ``paths``, in search order."""
    return merge_catalogs([CatalogFile(str(p), read_spec_text(p)) for p in paths])


def merge_catalogs(files: Sequence[CatalogFile]) -> Catalog:
    """The shipped catalog extended by ``files`` (user catalogs, in search order).

    A new op defined by several files comes from the first (as the first backend
    spec of a name wins); a doc change applies from the first file that makes one.
    Cached by the files' content (and the shipped catalog's).
    """
    if not files:
        return load_catalog()
    return _merged(SHIPPED_OPS.stat().st_mtime_ns, tuple(files))


@lru_cache(maxsize=16)
def _merged(shipped_mtime_ns: int, files: tuple[CatalogFile, ...]) -> Catalog:
    shipped = load_catalog()
    docs = [YamlDoc(f.path, f.text) for f in files]
    loaded = [_load_user_catalog(doc) for doc in docs]
    ops = dict(shipped)
    for doc, (defined, _) in zip(docs, loaded):
        for name, op in defined.items():
            if name in shipped:
                raise _redefined(doc, op, shipped[name])
            ops.setdefault(name, op)
    doc_locations: dict[str, Location] = {}
    for doc, (_, doc_changes) in zip(docs, loaded):
        for name, (text, loc) in doc_changes.items():
            if name not in ops:
                raise doc.error_at(
                    f"op {name}: a user catalog entry with only `doc:` changes the doc of an existing "
                    "op, and there is no op of that name",
                    loc,
                    hint="a new op needs `inputs`, `shape` and `numpy:` or `kernel:` (spec/README.md)",
                )
            if name not in doc_locations:
                ops[name] = replace(ops[name], doc=text)
                doc_locations[name] = loc
    _check_onnx_claims(ops.values(), docs)
    key = _digest([shipped.key, *(f.text for f in files)])
    return Catalog(ops, source=shipped.source, key=key, user_files=files, doc_locations=doc_locations)


def _redefined(doc: YamlDoc, op: OpDef, shipped: OpDef) -> SpecError:
    return doc.error_at(
        f"op {op.name} is shipped with byoc (spec/ops.yaml:{shipped.loc.line if shipped.loc else '?'}); "
        "a user catalog may add ops and change the doc of shipped ones, not redefine them",
        op.loc or Location(doc.path, 1, 1),
        hint=f"give your op another name (such as my_{op.name}), or keep only `doc:` to change its doc",
    )


def _load_user_catalog(doc: YamlDoc) -> tuple[dict[str, OpDef], dict[str, tuple[str, Location]]]:
    """A user catalog's new ops, and its doc changes (entries with only ``doc:``)."""
    ops_node = _ops_node(doc, f"a spec directory's {USER_CATALOG} (its op catalog)")
    defined: dict[str, OpDef] = {}
    doc_changes: dict[str, tuple[str, Location]] = {}
    for name in ops_node:
        node = ops_node[name]
        if isinstance(node, dict) and list(node) == ["doc"]:
            _check_op_name(doc, ops_node, name)
            text = doc.typed(node, "doc", str, f"op {name}: doc")
            doc_changes[name] = (text, doc.at(ops_node, name))
        else:
            defined[name] = _load_op(doc, ops_node, name)
    return defined, doc_changes


def _ops_node(doc: YamlDoc, what: str):
    """The ``ops`` mapping of a catalog, after checking its top level."""
    root = doc.root
    if not isinstance(root, dict):
        raise doc.error(f"{what} must be a mapping with `version` and `ops`", root)
    if "kind" in root or "name" in root:
        key = "kind" if "kind" in root else "name"
        raise doc.error(
            f"{what} holds op definitions, not a backend spec",
            root,
            key,
            hint=f"name a backend spec <backend>.yaml; {USER_CATALOG} is the op catalog of its directory",
        )
    doc.check_keys(root, "the op catalog", ("version", "ops"), ())
    if doc.typed(root, "version", int, "version") != 1:
        raise doc.error(
            "unsupported catalog version", root, "version", value=True, hint="this byoc reads version 1"
        )
    return doc.mapping(root, "ops", "ops")


def _digest(texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


MAX_INPUTS = 64
"""The most inputs an op may declare (its C template names x0 ... x63)."""


def _check_op_name(doc: YamlDoc, ops_node, name) -> None:
    if not isinstance(name, str) or not OP_NAME.match(name):
        raise doc.error(f"op name {name!r} must be lower-case letters, digits and _", ops_node, name)


def _load_op(doc: YamlDoc, ops_node, name) -> OpDef:
    _check_op_name(doc, ops_node, name)
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
    attrs = _load_attrs(doc, node, what) if "attrs" in node else ()
    _check_rule_attrs(doc, node, what, SHAPE_RULES[rule], attrs)
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
    onnx = _load_onnx(doc, node, what, attrs, outputs != (1, 1)) if "onnx" in node else None
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


def _load_onnx(doc: YamlDoc, node, what: str, attrs: tuple[AttrDef, ...], several: bool) -> OnnxImport:
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


def _check_onnx_claims(ops, docs: Sequence[YamlDoc]) -> None:
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
            hint="numpy: an expression of numpy ufuncs; kernel: a function of byoc/reference_kernels.py",
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


def _check_rule_attrs(doc: YamlDoc, node, what: str, rule: ShapeRule, attrs: tuple[AttrDef, ...]) -> None:
    """The op declares every attribute its shape rule reads, with the rule's type."""
    declared = {a.name: a for a in attrs}
    for name, type_name in rule.attrs.items():
        adef = declared.get(name)
        if adef is None:
            raise doc.error(
                f"{what}: the shape rule {rule.name} reads the attribute {name!r}, which the op does not declare",
                node,
                "shape",
                value=True,
                hint=f"declare it under attrs: {name}: {{type: {type_name}, default: ...}}",
            )
        if adef.type != type_name:
            attrs_node = node["attrs"]
            raise doc.error(
                f"{what}: attribute {name} must have type {type_name} (the shape rule {rule.name} reads it)",
                attrs_node[name],
                "type",
                value=True,
            )


def _load_attrs(doc: YamlDoc, node, what: str) -> tuple[AttrDef, ...]:
    attrs_node = doc.mapping(node, "attrs", f"{what}: attrs")
    out = []
    for aname in attrs_node:
        if not isinstance(aname, str) or not OP_NAME.match(aname):
            raise doc.error(
                f"{what}: attribute name {aname!r} must be lower-case letters, digits and _",
                attrs_node,
                aname,
            )
        anode = doc.mapping(attrs_node, aname, f"{what}: attribute {aname}")
        doc.check_keys(anode, f"attribute {aname}", ("type",), ("default", "choices"))
        atype = doc.typed(anode, "type", str, f"attribute {aname}: type")
        if atype not in VALUE_TYPES:
            raise doc.error(
                f"attribute {aname}: unknown type {atype!r}",
                anode,
                "type",
                value=True,
                hint=f"known types: {', '.join(VALUE_TYPES)}",
            )
        choices = _load_choices(doc, anode, aname, atype) if "choices" in anode else ()
        default = None
        if "default" in anode:
            try:
                default = check_attr_value(AttrDef(aname, atype, choices=choices), anode["default"])
            except RuleError as exc:
                message = exc.message.removeprefix(f"attribute {aname} ")
                raise doc.error(
                    f"attribute {aname}: the default {message}", anode, "default", value=True
                ) from None
        out.append(AttrDef(aname, atype, default, choices))
    return tuple(out)


def _load_choices(doc: YamlDoc, anode, aname: str, atype: str) -> tuple:
    seq = doc.typed(anode, "choices", list, f"attribute {aname}: choices")
    if not seq:
        raise doc.error(f"attribute {aname}: choices must not be empty", anode, "choices", value=True)
    out = []
    for i, value in enumerate(seq):
        try:
            out.append(check_attr_value(AttrDef(aname, atype), value))
        except RuleError as exc:
            message = exc.message.removeprefix(f"attribute {aname} ")
            raise doc.error(f"attribute {aname}: choice {message}", seq, i) from None
    if len(set(out)) != len(out):
        raise doc.error(f"attribute {aname}: a choice is listed twice", anode, "choices", value=True)
    return tuple(out)


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
