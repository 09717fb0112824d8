"""Small helpers for writing C and C++ text: literals, type names, comments."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from byoc.errors import GraphError
from byoc.ir import Function, Node, TensorType

DLPACK_CODES = {
    "float32": ("kDLFloat", 32),
    "float64": ("kDLFloat", 64),
    "int32": ("kDLInt", 32),
    "int64": ("kDLInt", 64),
}
"""dtype -> (DLPack type code, bits)."""

C_TYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t"}


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


_UNSAFE_IN_COMMENT = re.compile(
    r"\*/|/\*|\?\?|\\|[\x00-\x08\x0b-\x1f\x7f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
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


def type_text(t: TensorType) -> str:
    return str(t)


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
