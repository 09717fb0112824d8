"""Load and validate a backend spec (``spec/backends/<name>.yaml``) into a
:class:`~byoc.spec.backend.BackendSpec`.

Validation stops at the first problem and raises a :class:`~byoc.errors.SpecError`
located at the offending key or value (1-based line and column). This module checks
the keys every kind shares (name, dtypes, ranks, options, compile); the spec's
codegen kind (:mod:`byoc.spec.codegen_kind`) checks its templates, constructs and
op mappings.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from byoc.catalog import Catalog
from byoc.ir import DTYPES

from .backend import BackendSpec, CompileSettings, OptionDef, frozen_map
from .codegen_kind import CodegenKind
from .draft import SpecDraft, check_template
from .kinds import KINDS
from .languages import LANGUAGES
from .names import COMMON_PLACEHOLDERS, FLAG_PLACEHOLDERS, MAX_RANK, RESERVED_C_NAME
from .ops_loader import load_catalog
from .option_types import OPTION_NAME, OPTION_TYPES
from .option_uses import check_option_uses
from .patterns import load_patterns
from .probe import load_probe
from .requirements import load_requirements
from .support import load_support
from .yaml_doc import YamlDoc

BACKEND_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
MAX_SYMBOL_PREFIX = 64
SCHEMA_VERSION = 1

COMMON_REQUIRED = ("version", "name", "kind", "dtypes", "ranks")
COMMON_OPTIONAL = ("description", "symbol_prefix", "broadcast", "options")


def is_backend_doc(doc: YamlDoc) -> bool:
    """True if ``doc`` looks like a backend spec rather than an op catalog."""
    return isinstance(doc.root, dict) and ("kind" in doc.root or "name" in doc.root)


def load_backend_file(path: str | Path, catalog: Catalog | None = None) -> BackendSpec:
    """Load and validate one backend spec file against ``catalog`` (default: the shipped one)."""
    return load_backend_doc(YamlDoc(path), catalog)


def load_backend_doc(doc: YamlDoc, catalog: Catalog | None = None) -> BackendSpec:
    catalog = load_catalog() if catalog is None else catalog
    root = doc.root
    if not isinstance(root, dict):
        raise doc.error(
            "a backend spec must be a mapping of keys such as `name`, `kind` and `ops`",
            root,
            hint="see spec/README.md for the format",
        )
    kind = _kind(doc, root)
    required, optional = kind.top_keys()
    compile_key = ("compile",) if kind.compiled else ()
    doc.check_keys(
        root,
        f"a {kind.name} backend spec",
        COMMON_REQUIRED + compile_key + required + ("ops",),
        COMMON_OPTIONAL
        + (("requires", "probe") if kind.compiled else ("compile",))
        + (("support",) if kind.support_files else ())
        + optional,
    )
    if doc.typed(root, "version", int, "version") != SCHEMA_VERSION:
        raise doc.error(
            "unsupported backend spec version",
            root,
            "version",
            value=True,
            hint=f"this byoc reads version {SCHEMA_VERSION}",
        )
    name = _name(doc, root)
    description = doc.typed(root, "description", str, "description") if "description" in root else ""
    symbol_prefix = _symbol_prefix(doc, root, name)
    broadcast = _broadcast(doc, root, kind)
    dtypes = _dtypes(doc, root, kind)
    ranks = _ranks(doc, root)
    options = _options(doc, root, kind) if "options" in root else {}
    compile_settings = _compile(doc, root, kind, options)
    requires = load_requirements(doc, root) if "requires" in root else {}
    probe = load_probe(doc, root, dtypes) if "probe" in root else None
    support = load_support(doc, root, name) if "support" in root else ()
    draft = SpecDraft(ranks, options, dtypes)
    kind.load_structure(doc, root, draft)
    kind.load_ops(doc, root, catalog, draft)
    if "patterns" in root:
        load_patterns(doc, root, catalog, draft, kind)
    kind.check_spec(doc, draft)
    check_option_uses(doc, root, options)
    return BackendSpec(
        name=name,
        kind=kind,
        description=description.strip(),
        symbol_prefix=symbol_prefix,
        broadcast=broadcast,
        dtypes=dtypes,
        ranks=ranks,
        compile=compile_settings,
        requires=frozen_map(requires),
        probe=probe,
        options=frozen_map(options),
        ops=frozen_map(draft.ops),
        macros=frozen_map(draft.macros),
        layers=frozen_map(draft.layers),
        templates=frozen_map(draft.templates),
        template_lines=frozen_map(draft.template_lines),
        patterns=frozen_map(draft.patterns),
        layouts=frozen_map(draft.layouts),
        header=draft.header,
        support=support,
        source=doc.path,
        loc=doc.at(root),
    )


# ------------------------------------------------------------------ top-level keys


def _kind(doc: YamlDoc, root) -> CodegenKind:
    if "kind" not in root:
        raise doc.error(
            "a backend spec is missing the required key 'kind'",
            root,
            hint=f"add `kind:`, one of: {', '.join(KINDS)}",
        )
    value = doc.typed(root, "kind", str, "kind")
    if value not in KINDS:
        raise doc.error(
            f"unknown codegen kind {value!r}",
            root,
            "kind",
            value=True,
            hint="known kinds: " + "; ".join(f"{k} ({v.doc})" for k, v in KINDS.items()),
        )
    return KINDS[value]


def _name(doc: YamlDoc, root) -> str:
    name = doc.typed(root, "name", str, "name")
    if not BACKEND_NAME.match(name):
        raise doc.error(
            f"backend name {name!r} is not an identifier",
            root,
            "name",
            value=True,
            hint="use letters, digits and _, not starting with a digit; graphs say @<name>",
        )
    stem, suffix = Path(doc.path).stem, Path(doc.path).suffix
    if suffix in (".yaml", ".yml") and stem != name:
        raise doc.error(
            f"backend {name!r} must be in a file named {name}{suffix}, not {stem}{suffix}",
            root,
            "name",
            value=True,
            hint="byoc finds a backend by its file name; rename the file or the backend",
        )
    return str(name)


def _broadcast(doc: YamlDoc, root, kind: CodegenKind) -> bool:
    if "broadcast" not in root:
        return False
    value = doc.typed(root, "broadcast", bool, "broadcast")
    if value and not kind.can_broadcast:
        raise doc.error(
            f"a {kind.name} backend cannot broadcast",
            root,
            "broadcast",
            value=True,
            hint="remove `broadcast: true`; a macro that takes broadcast inputs says so itself "
            "(`broadcast: true` on the macro, reading ${in<k>_stride<j>})"
            if getattr(kind, "macro_broadcast", False)
            else f"the {kind.name} generator needs every input of an op in the output's shape; remove `broadcast: true`",
        )
    return value


def _symbol_prefix(doc: YamlDoc, root, name: str) -> str:
    key = "symbol_prefix" if "symbol_prefix" in root else "name"
    what = "symbol_prefix" if key == "symbol_prefix" else "the backend name (the default symbol_prefix)"
    prefix = doc.identifier(root, key, doc.typed(root, key, str, key), what)
    if RESERVED_C_NAME.match(prefix):
        raise doc.error(
            f"{what} {prefix!r} is reserved in C (it starts with _ and a capital or _, or has __)",
            root,
            key,
            value=True,
            hint="start it with a letter and avoid double underscores",
        )
    if len(prefix) > MAX_SYMBOL_PREFIX:
        raise doc.error(
            f"{what} is {len(prefix)} characters long; the limit is {MAX_SYMBOL_PREFIX}",
            root,
            key,
            value=True,
        )
    return str(prefix)


def _dtypes(doc: YamlDoc, root, kind: CodegenKind) -> tuple[str, ...]:
    seq = _nonempty_list(doc, root, "dtypes")
    seen: set[str] = set()
    for i, d in enumerate(seq):
        if d not in DTYPES:
            raise doc.error(f"unknown dtype {d!r}", seq, i, hint=f"byoc supports {', '.join(DTYPES)}")
        if d not in kind.dtypes:
            raise doc.error(
                f"the {kind.name} kind cannot generate {d}",
                seq,
                i,
                hint=f"{kind.name} supports {', '.join(kind.dtypes)}",
            )
        if d in seen:
            raise doc.error(f"dtype {d} is listed twice", seq, i)
        if kind.single_dtype and seen:
            raise doc.error(
                f"a {kind.name} backend handles exactly one dtype",
                seq,
                i,
                hint="its layers and buffers share one element type; make one backend per dtype",
            )
        seen.add(str(d))
    return tuple(d for d in DTYPES if d in seen)


def _ranks(doc: YamlDoc, root) -> tuple[int, ...]:
    seq = _nonempty_list(doc, root, "ranks")
    seen: set[int] = set()
    for i, r in enumerate(seq):
        if isinstance(r, bool) or not isinstance(r, int):
            raise doc.error(f"a rank must be an integer, got {r!r}", seq, i)
        if not 0 <= r <= MAX_RANK:
            raise doc.error(f"rank {r} is out of range", seq, i, hint=f"ranks go from 0 to {MAX_RANK}")
        if r in seen:
            raise doc.error(f"rank {r} is listed twice", seq, i)
        seen.add(int(r))
    return tuple(sorted(seen))


def _nonempty_list(doc: YamlDoc, root, key: str) -> Any:
    seq = doc.typed(root, key, list, key)
    if not seq:
        raise doc.error(f"{key} must list at least one entry", root, key, value=True)
    return seq


# ------------------------------------------------------------------------ options


def _options(doc: YamlDoc, root, kind: CodegenKind) -> dict[str, OptionDef]:
    node = doc.mapping(root, "options", "options")
    out: dict[str, OptionDef] = {}
    for name in node:
        if not isinstance(name, str) or not OPTION_NAME.match(name):
            raise doc.error(f"option name {name!r} must be lower-case letters, digits and _", node, name)
        if kind.reserves(name):
            raise doc.error(
                f"option name {name!r} is taken by a placeholder that byoc supplies",
                node,
                name,
                hint=f"reserved names: {', '.join(sorted(kind.placeholders()))}{kind.reserved_more}",
            )
        what = f"option {name}"
        onode = doc.mapping(node, name, what)
        doc.check_keys(onode, what, ("type", "default"), ("doc", "choices", "at_least", "at_most"))
        otype = doc.typed(onode, "type", str, f"{what}: type")
        if otype not in OPTION_TYPES:
            raise doc.error(
                f"{what}: unknown type {otype!r}",
                onode,
                "type",
                value=True,
                hint=f"use {', '.join(OPTION_TYPES)}",
            )
        wanted = kind.options.get(name)
        if wanted is not None and otype != wanted:  # kinds read int and bool options
            raise doc.error(
                f"{what}: the {kind.name} generator reads {name} as {wanted}, not {otype}",
                onode,
                "type",
                value=True,
            )
        bounds = [_option_bound(doc, onode, key, otype, what) for key in ("at_least", "at_most")]
        default = _option_value(doc, onode, "default", otype, what)
        choices = None
        if "choices" in onode:
            seq = doc.typed(onode, "choices", list, f"{what}: choices")
            choices = tuple(_option_value(doc, seq, i, otype, f"{what}: a choice") for i in range(len(seq)))
            if default not in choices:
                raise doc.error(
                    f"{what}: the default {default!r} is not one of its choices", onode, "default", value=True
                )
        doc_text = doc.typed(onode, "doc", str, f"{what}: doc") if "doc" in onode else ""
        option = OptionDef(
            str(name), str(otype), default, doc_text.strip(), choices, doc.at(node, name), *bounds
        )
        if bounds[0] is not None and bounds[1] is not None and bounds[0] > bounds[1]:
            raise doc.error(f"{what}: at_least is larger than at_most", onode, "at_least", value=True)
        for key, value in [("default", default)] + [("choices", c) for c in choices or ()]:
            try:
                option.value(value)
            except ValueError as exc:
                raise doc.error(
                    f"{what}: the {key[:-1] if key == 'choices' else key} {exc}", onode, key, value=True
                ) from None
        out[name] = option
    return out


def _option_bound(doc: YamlDoc, node, key: str, otype: str, what: str) -> int | float | None:
    """The ``at_least:`` or ``at_most:`` bound of an int or float option, else None."""
    if key not in node:
        return None
    if otype not in ("int", "float"):
        raise doc.error(f"{what}: only int and float options take {key}", node, key, hint="use choices")
    return _option_value(doc, node, key, otype, f"{what}: {key}")


def _option_value(doc: YamlDoc, node, key, otype: str, what: str) -> Any:
    try:
        return OPTION_TYPES[otype].check(node[key])  # plain values, not ruamel's scalar subclasses
    except ValueError as exc:
        raise doc.error(f"{what} {exc}", node, key, value=True) from None


# ------------------------------------------------------------------------ compile


def _compile(doc: YamlDoc, root, kind: CodegenKind, options: dict[str, OptionDef]) -> CompileSettings:
    language = LANGUAGES[kind.language]
    if "compile" not in root:
        return CompileSettings(language.name)
    node = doc.mapping(root, "compile", "compile")
    if language.compiled:
        doc.check_keys(
            node, "compile", ("language",), ("compiler", "std", "flags", "option_flags", "large_flags")
        )
    else:
        doc.check_keys(
            node, f"compile (a {kind.name} artifact is interpreted, not compiled)", ("language",), ()
        )
    given = doc.typed(node, "language", str, "compile: language")
    if given != language.name:
        raise doc.error(
            f"a {kind.name} backend's language is {language.name}, not {given!r}",
            node,
            "language",
            value=True,
            hint=f"set `language: {language.name}`",
        )
    if not language.compiled:
        return CompileSettings(language.name)
    compiler = language.default_compiler
    if "compiler" in node:
        compiler = doc.typed(node, "compiler", str, "compile: compiler").strip()
        if not compiler:
            raise doc.error("compile: compiler must not be empty", node, "compiler", value=True)
    std = language.default_std
    if "std" in node:
        std = doc.typed(node, "std", str, "compile: std")
        if language.std_pattern is not None and not language.std_pattern.match(std):
            raise doc.error(
                f"{std!r} is not a {language.name} standard",
                node,
                "std",
                value=True,
                hint=f"for example {language.default_std}",
            )
    names = set(COMMON_PLACEHOLDERS) | set(FLAG_PLACEHOLDERS) | set(options)
    flags = _flag_list(doc, node, "flags", "compile: flags", names) if "flags" in node else ()
    option_flags: dict[str, tuple[str, ...]] = {}
    if "option_flags" in node:
        onode = doc.mapping(node, "option_flags", "compile: option_flags")
        for oname in onode:
            option = options.get(oname) if isinstance(oname, str) else None
            if option is None or not option.value_type.switch:
                usable = ", ".join(n for n, o in options.items() if o.value_type.switch) or "none"
                raise doc.error(
                    f"compile: option_flags: {oname!r} is not a boolean or int option of this backend",
                    onode,
                    oname,
                    hint=f"the flags are added when a boolean option is true or an int option is not 0; such options: {usable}",
                )
            option_flags[str(oname)] = _flag_list(doc, onode, oname, f"compile: option_flags: {oname}", names)
    large, above = _large_flags(doc, node, names) if "large_flags" in node else ((), 0)
    return CompileSettings(
        language.name,
        compiler,
        None if std is None else str(std),
        flags,
        frozen_map(option_flags),
        large,
        above,
    )


def _large_flags(doc: YamlDoc, node, names: set[str]) -> tuple[tuple[str, ...], int]:
    """``large_flags: {above_bytes: N, flags: [...]}``: the flags and the size above which
    a module's source gets them."""
    what = "compile: large_flags"
    lnode = doc.mapping(node, "large_flags", what)
    doc.check_keys(lnode, what, ("above_bytes", "flags"), ())
    above = doc.typed(lnode, "above_bytes", int, f"{what}: above_bytes")
    if isinstance(above, bool) or above < 0:
        raise doc.error(
            f"{what}: above_bytes must be a size in bytes, not {above!r}",
            lnode,
            "above_bytes",
            value=True,
            hint="the size of the module's source above which the flags are added: 262144, say",
        )
    return _flag_list(doc, lnode, "flags", f"{what}: flags", names), int(above)


def _flag_list(doc: YamlDoc, node, key, what: str, names: set[str]) -> tuple[str, ...]:
    seq = doc.typed(node, key, list, what)
    for i, flag in enumerate(seq):
        if not isinstance(flag, str) or not flag.strip():
            raise doc.error(f"{what}: each flag must be a non-empty string, got {flag!r}", seq, i)
        check_template(doc, seq, i, f"{what}: {flag}", names)
    return tuple(str(flag) for flag in seq)
