"""Small helpers for writing C and C++ text: literals, type names, comments."""

from __future__ import annotations

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


def comment(text: str) -> str:
    """A C comment holding ``text``; ``*/`` inside it is broken up."""
    return "/* " + text.replace("*/", "* /") + " */"


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
