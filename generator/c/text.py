"""Small helpers for writing C and C++ text: literals, constant arrays, type names,
comments, and argument lists that wrap."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from byoc.errors import GraphError
from byoc.ir import ANON_PREFIX, C_TYPES, AttrValue, Constant, Function, Node, is_half, is_integer

from ..artifacts import Artifact, Role, literal_constants, weights_artifact
from . import dtypes as c_dtypes
from . import support_files

if TYPE_CHECKING:
    from byoc.spec.backend import BackendSpec

PTHREAD_INCLUDE = "#include <pthread.h>\n"
"""What a module whose code starts or waits on POSIX threads includes (its state's
``pthread_once``, the per-thread workspace)."""

C_WORD = re.compile(r"\b[A-Za-z_]\w*\b")
"""A C identifier or keyword in generated or spec C text (to find which names it uses)."""

DLPACK_CODES = {
    "float32": ("kDLFloat", 32),
    "float64": ("kDLFloat", 64),
    "int32": ("kDLInt", 32),
    "int64": ("kDLInt", 64),
    "int8": ("kDLInt", 8),
    "uint8": ("kDLUInt", 8),
    "bool": ("kDLBool", 8),
    "float16": ("kDLFloat", 16),
    "bfloat16": ("kDLBfloat", 16),
    "int16": ("kDLInt", 16),
    "uint16": ("kDLUInt", 16),
    "uint32": ("kDLUInt", 32),
    "uint64": ("kDLUInt", 64),
}
"""dtype -> (DLPack type code, bits)."""

LINE_WIDTH = 100
"""Argument lists and constant initialisers wrap before this column."""


def c_string(text: str) -> str:
    """``text`` as a C (or C++) string literal: printable ASCII as is, ``\\n`` for
    newlines, octal escapes for everything else."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append("\\n")
        elif ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~" and ch != "?":  # '?' is escaped to dodge trigraphs
            out.append(ch)
        else:
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8"))
    return '"' + "".join(out) + '"'


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Control and bidirectional-override characters, shown as ``<0xNN>`` in comments."""
_UNSAFE_IN_COMMENT = re.compile(r"\*/|/\*|\?\?|\\|" + _CONTROL.pattern)
_SPLICE = re.compile(r"\\(?=[ \t]*(?:\n|\Z))")


def comment_text(text: str) -> str:
    r"""``text`` made inert inside a C or C++ block comment, whatever it holds (file
    names in locations can hold anything): ``*/`` cannot end the comment early and
    ``/*`` cannot nest in it (``* /``, ``/ *``); no ``??`` can start a trigraph
    (``? ?``: ``??/`` is a backslash in C99); no backslash ends a line, where it would
    splice the next line on (``*\`` + newline + ``/`` closes a comment); and control
    and bidirectional-override characters show as ``<0xNN>``. Newlines are kept.
    Ordinary text, with none of these, comes back unchanged."""
    if _UNSAFE_IN_COMMENT.search(text) is None:
        return text
    text = text.replace("\r\n", "\n")
    text = _CONTROL.sub(lambda m: f"<0x{ord(m.group()):02x}>", text)
    text = _SPLICE.sub("\\\\.", text)
    text = re.sub(r"\?(?=\?)", "? ", text)
    return text.replace("*/", "* /").replace("/*", "/ *")


def comment(text: str) -> str:
    """A C comment holding ``text``, made inert by :func:`comment_text`."""
    return "/* " + comment_text(text) + " */"


def int64_array(values: tuple[int, ...]) -> str:
    return "{" + ", ".join(f"INT64_C({v})" for v in values) + "}"


def origin(node: Node) -> str:
    """Where a node came from, for a generated comment: ``add at guide.graph:9:9``."""
    where = f" at {node.loc}" if node.loc is not None else ""
    name = node.name if not node.name.startswith("%") else "(nested call)"
    return f"{name} = {node.op}(...){where}"


def function_origin(fn: Function) -> str:
    where = f" at {fn.loc}" if fn.loc is not None else ""
    return f"region @{fn.backend}{where}"


def check_reserved_names(externals: Sequence[Function], taken: Mapping[str, str]) -> None:
    """No region may define a C name that the module's helpers or macros have
    (``taken``: name -> what holds it), nor one that another region defines.

    A region ``sym`` defines ``sym_``, ``sym_wrapper_``, ``sym_<k>``, ``sym_const_<j>``
    and ``__tvm_ffi_sym``, all of the form ``sym_...`` or ``__tvm_ffi_sym``. So a name
    clashes exactly when a prefix of it ending before a ``_`` is a region's symbol:
    one look-up per prefix of the few taken names, however large the graph. Between
    regions, ``sym_`` and ``sym_wrapper_`` are the names to check (region
    ``f_wrapper``'s body would be region ``f``'s wrapper). Lowering already keeps one
    region's symbol from starting with another's plus ``_``; this also covers
    generators called directly, without lowering."""
    owners: dict[str, tuple[str, str | None]] = {name: (owner, None) for name, owner in taken.items()}
    for fn in externals:
        owners[f"{fn.name}_"] = (f"the body of region {fn.name}", fn.name)
        owners[f"{fn.name}_wrapper_"] = (f"the wrapper of region {fn.name}", fn.name)
    symbols = {fn.name: fn for fn in externals}
    for name, (owner, own_symbol) in owners.items():
        candidates = [name[:i] for i, ch in enumerate(name) if ch == "_" and i > 0]
        if name.startswith("__tvm_ffi_"):
            candidates.append(name[len("__tvm_ffi_") :])
        for sym in candidates:
            fn = symbols.get(sym)
            if fn is not None and sym != own_symbol:
                raise GraphError(
                    f"region {fn.name} defines C names that start with {fn.name}_, but {name} is already {owner}",
                    fn.loc,
                    hint="name the region differently (`@backend as NAME { ... }`)",
                )


def item_list(head: str, args: Sequence[str], tail: str, sep: str = ",") -> str:
    """``head`` + ``args`` + ``tail`` on one line, or one argument per line when long."""
    one = head + f"{sep} ".join(args) + tail
    if len(one) <= LINE_WIDTH:
        return one
    indent = " " * (len(head) - len(head.lstrip()) + 4)
    return head + "\n" + f"{sep}\n".join(indent + a for a in args) + tail


def block_comment(lines: Sequence[str]) -> str:
    """A block comment of ``lines``, continuation lines indented under the first."""
    body = comment_text("\n".join(lines))
    return "/* " + body.replace("\n", "\n   ") + " */"


def value_label(name: str) -> str:
    """An IR name as comments and messages show it: nested calls are marked as such."""
    return f"{name} (nested call)" if name.startswith(ANON_PREFIX) else name


@dataclass(slots=True)
class ConstantArrays:
    """The C definitions of a function's constants (:func:`constant_arrays`)."""

    texts: list[str]
    names: list[str]
    """``<sym>_const_<j>``, in the order of the constants given."""
    non_finite: bool
    """Whether a literal is an infinity or a NaN (the module needs <math.h>)."""
    blobs: list[Artifact]
    """The binary artifacts that large constants' ``.incbin`` directives read."""


def constant_arrays(
    sym: str, constants: Sequence[Constant], backend: str, names: Sequence[str] | None = None
) -> ConstantArrays:
    """The arrays ``<sym>_const_<j>`` of ``constants`` (or ``names``), each with a comment
    naming it: a ``static const`` initialiser, or, for a large constant or one beyond the
    function's literal budget (:func:`~byoc.generator.artifacts.literal_constants`), an
    array included from a binary artifact (:func:`included_array`)."""
    out = ConstantArrays([], [], False, [])
    literal = literal_constants([c.values.size for c in constants])
    for j, c in enumerate(constants):
        name = names[j] if names is not None else f"{sym}_const_{j}"
        ctype = C_TYPES[c.type.dtype]
        where = f" at {c.loc}" if c.loc is not None else ""
        if j not in literal:
            text, blob = included_array(name, c, ctype, backend, cxx=False)
            out.texts.append(text)
            out.blobs.append(blob)
        else:
            items, special = c_literals(c.values, c.type.dtype)
            head = f"static const {ctype} {name}[{max(len(items), 1)}] = {{"
            note = f" ({c_dtypes.half_note(c.values, c.type.dtype)})" if is_half(c.type.dtype) else ""
            out.texts.append(
                f"{comment(f'{name}: constant {c.name}: {c.type}{where}{note}')}\n{_initializer(head, items)}\n"
            )
            out.non_finite = out.non_finite or special
        out.names.append(name)
    return out


def included_array(
    name: str, c: Constant, ctype: str, backend: str | None, *, cxx: bool
) -> tuple[str, Artifact]:
    """Constant ``c`` as the array ``name`` whose bytes the assembler includes from the
    binary artifact ``<name>.bin`` (``.incbin``, in a 64-byte aligned ``.rodata``
    section), declared to C (``cxx``: C++) as ``extern const <ctype> name[N]`` with
    hidden visibility, so the library neither exports it nor reaches it through the
    GOT. No value is written as text: the compiler never parses them, whatever their
    number. The comment names the constant, its type and origin, and the file's
    SHA-256. Needs a GNU-compatible assembler (ELF targets); the build compiles in
    the directory holding the artifacts."""
    data = c.values.tobytes()
    digest = hashlib.sha256(data).hexdigest()
    file = f"{name}.bin"
    where = f" at {c.loc}" if c.loc is not None else ""
    note = block_comment(
        [
            f"{name}: constant {c.name}: {c.type}{where};",
            f"{c.values.size} values included from {file} ({len(data)} bytes,",
            f"sha256 {digest})",
        ]
    )
    directives = [
        f'.pushsection .rodata.{name},\\"a\\",%progbits',
        ".balign 64",
        f".globl {name}",
        f".hidden {name}",
        f".type {name}, %object",
        f".size {name}, {len(data)}",
        f"{name}:",
        f'.incbin \\"{file}\\"',
        ".popsection",
    ]
    asm = "__asm__(\n" + "\n".join(f'    "{d}\\n"' for d in directives) + ");\n"
    linkage = 'extern "C"' if cxx else "extern"
    declaration = f'{linkage} const {ctype} {name}[{c.values.size}] __attribute__((visibility("hidden")));\n'
    return f"{note}\n{asm}{declaration}", weights_artifact(file, data, backend, digest)


def _initializer(head: str, items: Sequence[str]) -> str:
    if not items:
        return head + "0};"
    one = head + ", ".join(items) + "};"
    if len(one) <= LINE_WIDTH:
        return one
    lines, line = [head], " "
    for item in items:
        if len(line) + len(item) + 2 > LINE_WIDTH:
            lines.append(line.rstrip())
            line = " "
        line += f" {item},"
    lines.append(line.rstrip())
    return "\n".join(lines) + "\n};"


INT_MIN_TEXT = {"int32": "INT32_MIN", "int64": "INT64_MIN"}


def c_literals(values: Sequence[int | float], dtype: str) -> tuple[list[str], bool]:
    """C literals for ``values`` as the numpy reference holds them in ``dtype``, and
    whether any is an infinity or NaN (which need <math.h>).

    The values are converted as the reference does (``np.array(values, dtype)``), then
    written in the shortest form that reads back as exactly that value: ``0.1f`` for a
    float32 (numpy's shortest round-trip digits), ``0.1`` for a float64, plain decimal
    integers (``INT32_MIN`` / ``INT64_MIN``, whose positive part has no C type; the
    8-bit types' values, ``-128`` included, are plain ``int`` literals). The types added
    later are :func:`byoc.generator.c.dtypes.literals`'s: a half type's bit pattern
    (``{0x3c00}``), a bool 0 or 1, unsigned 32 and 64 bit integers with a ``u``.
    """
    new = c_dtypes.literals(values, dtype)
    if new is not None:
        return new, False
    array = np.array(values, dtype=dtype).reshape(-1)
    out: list[str] = []
    special = False
    if is_integer(dtype):
        low = int(np.iinfo(dtype).min)
        named = INT_MIN_TEXT.get(dtype)
        return [named if named and int(v) == low else str(int(v)) for v in array.tolist()], False
    suffix = "f" if dtype == "float32" else ""
    # numpy's shortest round-trip digits, all at once: the text str(np.float32(v)) and
    # repr(float(v)) give one value at a time, 1.5x slower (ResNet-50's 100k literals)
    texts = array.astype(str).tolist()
    finite = np.isfinite(array)
    if finite.all():
        return [text + suffix for text in texts], False
    for text, x, ok in zip(texts, array.tolist(), finite.tolist()):
        if ok:
            out.append(text + suffix)
        else:
            out.append("NAN" if math.isnan(x) else "INFINITY" if x > 0 else "-INFINITY")
            special = True
    return out, special


def c_value(value: AttrValue) -> str:
    """One attribute value as C text."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, tuple):
        return c_list(value)
    return str(value)


def c_list(items: Sequence[int]) -> str:
    """``(a, b, c)``: a list as one macro argument."""
    return "(" + ", ".join(map(str, items)) + ")"


def spec_source(spec: BackendSpec) -> str:
    """The spec file, for the header, the same on every machine: shipped specs relative
    to the package, others relative to the search directory they were found in."""
    if spec.display_path is not None:
        return spec.display_path
    if spec.source is None:
        return "an in-memory spec"
    from byoc.spec.search import display_path

    return display_path(spec.source)


def one_line(text: str) -> str:
    """``text`` safe in a comment on one line (a ``#define``'s): a newline shows as <0x0a>."""
    return comment_text(text).replace("\n", "<0x0a>")


def support_includes(spec: BackendSpec) -> str:
    """The ``#include`` of each of the spec's support headers, after a comment that says
    where they and the support sources come from."""
    headers = [f.name for f in spec.support if f.is_header]
    sources = [f.name for f in spec.support if not f.is_header]
    note = f"The spec's support code, beside {one_line(spec_source(spec))}"
    if sources:
        note += f"; {', '.join(sources)} compiled once per spec and linked"
    return f"/* ---- {note} ---- */\n" + "".join(f'#include "{h}"\n' for h in headers)


def c_module(
    spec: BackendSpec, text: str, blobs: Sequence[Artifact], used: Sequence[str]
) -> tuple[Artifact, ...]:
    """A C kind's module ``<backend>.c`` of ``text`` with what it links: byoc's
    support files that the module ``used``, the spec's own (``support:``), and the
    ``blobs`` of its large constants."""
    return (
        Artifact(f"{spec.name}.c", text, Role.MODULE, spec.name),
        *support_files.artifacts(spec.name, used),
        *support_artifacts(spec),
        *blobs,
    )


def support_artifacts(spec: BackendSpec) -> tuple[Artifact, ...]:
    """The spec's support files (``support:``) as artifacts beside the module: its
    headers, which the module includes, and its sources, compiled once and linked."""
    return tuple(
        Artifact(f.name, f.text, Role.HEADER if f.is_header else Role.SUPPORT, spec.name)
        for f in spec.support
    )
