"""Macro bodies kept in a C file beside the spec: ``body: {file: NAME}``.

A backend with many kernels keeps their C where C tools can read it: a header of real
``#define`` lines beside the spec (``npu_kernels.h`` beside ``npu.yaml``), one per
macro, each continued with backslashes as C requires:

.. code-block:: c

    #define NPU_DENSE(p_ID_, p_STATE_, p_B_) \\
      static int p_ID_(const float* x, float* out) { \\
        ... \\
      }

The spec still says everything that is data: the argument of each parameter (the
macro's own ``params``, or the spec's shared ``params:`` by the parameter's name; the
``#define``'s parameter list gives their order), its doc, inputs, layouts and setup.
The file only holds C. The macro named ``NPU_DENSE`` takes
the ``#define NPU_DENSE(...)`` of the file; its body is the define's continued lines,
without the backslashes and without the indentation they share, which is exactly what
an inline ``body: |`` block would hold. So a module's text does not depend on where
the spec keeps its C, and a compiler error in a copied line is located at that line
of the C file (:mod:`byoc.spec_lines`).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from byoc.errors import Location, SpecError
from byoc.spec_lines import DEFINE

from .draft import c_name
from .support import file_beside

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc

_CONTINUED = re.compile(r"[ \t]*\\$")


@dataclass(frozen=True, slots=True)
class FileMacro:
    """One ``#define NAME(params)`` of a macro file."""

    params: tuple[str, ...]
    body: str
    """The continued lines, the backslashes and their shared indentation removed."""
    line: int
    """The file's line of the ``#define``."""
    body_line: int
    """The file's line of the body's first line (the line after the ``#define``)."""
    indent: int
    """How many columns of indentation the body lost (its lines' shared indentation)."""
    doc: str = ""
    """The comment right above the ``#define`` (no blank line between), its text on one
    line: the macro's doc when the spec gives none."""

    def location(self, offset: int, path: str) -> Location:
        """Where character ``offset`` of :attr:`body` is in the file ``path``."""
        before = self.body[:offset]
        return Location(path, self.body_line + before.count("\n"), offset - before.rfind("\n") + self.indent)


@dataclass(frozen=True, slots=True)
class MacroBody:
    """A macro's body as the spec gives it, inline or from a file, with what locates
    a character of it."""

    text: str
    error: Callable[[int, str, str | None], SpecError]
    """``error(offset, message, hint)``: a SpecError at character ``offset`` of :attr:`text`."""
    line: int | None
    """The line of its first line in its file (None when unknown: a quoted YAML string)."""
    file: str | None
    """The C file it was read from; None when it is written in the spec."""
    source: str | None = None
    """The whole text of :attr:`file`."""
    params: tuple[str, ...] | None = None
    """The ``#define``'s parameter list (the order of the arguments); None when the
    body is written in the spec, whose ``params`` then give the order."""
    define_line: int = 0
    """The file's line of the ``#define`` (0 when written in the spec)."""
    doc: str = ""
    """The comment above the ``#define`` in the file (:attr:`FileMacro.doc`)."""


@dataclass(frozen=True, slots=True)
class BodiesFile:
    """The spec's ``bodies: {file: NAME}``: the C file beside it that holds the
    ``#define`` of every macro that gives no ``body`` of its own."""

    text: str
    path: str
    named_at: Location
    """Where the spec names the file."""


def macro_bodies_file(doc: YamlDoc, root: Any) -> BodiesFile | None:
    """The spec's ``bodies`` file, read; None when the spec has none."""
    if "bodies" not in root:
        return None
    if not isinstance(root["bodies"], dict):
        raise doc.error(
            "bodies must name a C file beside the spec",
            root,
            "bodies",
            value=True,
            hint="write `bodies: {file: NAME}`, NAME a file beside the spec holding the macros' #defines",
        )
    text, path = file_beside(doc, root, "bodies", "bodies")
    return BodiesFile(text, path, doc.at(root["bodies"], "file", value=True))


def macro_body(
    doc: YamlDoc, mnode: Any, name: str, what: str, bodies: BodiesFile | None = None, at: Any = None
) -> MacroBody:
    """The ``body`` of the macro ``name`` (the spec's node ``mnode``, named at ``at``):
    a string in the spec, or ``{file: NAME}``, the ``#define name(...)`` of the C file
    NAME beside it; without a ``body``, the ``#define`` in the spec's ``bodies`` file."""
    if isinstance(mnode.get("body"), dict) or ("body" not in mnode and bodies is not None):
        if "body" in mnode:
            text, path = file_beside(doc, mnode, "body", f"{what}: body")
            named_at = doc.at(mnode["body"], "file", value=True)
        else:
            assert bodies is not None
            text, path, named_at = bodies.text, bodies.path, at or bodies.named_at
        found = file_macro(text, path, name, named_at)

        def in_file(offset: int, message: str, hint: str | None) -> SpecError:
            return SpecError(message, found.location(offset, path), hint=hint, source=text)

        return MacroBody(
            found.body, in_file, found.body_line, path, text, found.params, found.line, found.doc
        )
    body = str(doc.typed(mnode, "body", str, f"{what}: body"))
    if not body.strip():
        raise doc.error(f"{what}: the body is empty", mnode, "body", value=True)

    def in_spec(offset: int, message: str, hint: str | None) -> SpecError:
        return doc.error_at(message, doc.at_offset(mnode, "body", offset), hint=hint)

    return MacroBody(body, in_spec, doc.block_line(mnode, "body"), None)


def check_all_taken(bodies: Sequence[tuple[str, MacroBody]]) -> None:
    """Every function-like macro a macro file defines is the body of a macro of the
    spec (``bodies``: each macro's name and body): a define that none takes is a stale
    copy (a macro renamed in the spec and not in the file), refused where it stands."""
    taken: dict[str, set[str]] = {}
    texts: dict[str, str] = {}
    for name, body in bodies:
        if body.file is not None and body.source is not None:
            taken.setdefault(body.file, set()).add(name)
            texts[body.file] = body.source
    for path, names in taken.items():
        lines, defines = _defines(texts[path])
        for k in sorted(k for ks in defines.values() for k in ks):
            found = DEFINE.match(lines[k])
            assert found is not None
            if found.group(2) and found.group(1) not in names:
                raise _error(
                    f"{found.group(1)} is no macro's body: no macro of the spec is named so",
                    path,
                    texts[path],
                    k,
                    found.start(1) + 1,
                    hint="add the macro to the spec's `macros:` with body: {file: ...}, or delete the #define",
                )


@functools.lru_cache(maxsize=8)
def _defines(text: str) -> tuple[tuple[str, ...], Mapping[str, tuple[int, ...]]]:
    """A macro file's lines, and the lines of each name's ``#define``: read once per
    file, however many macros the spec takes from it (a library backend's two dozen)."""
    lines = tuple(text.split("\n"))
    where: dict[str, list[int]] = {}
    for k, line in enumerate(lines):
        found = DEFINE.match(line)
        if found:
            where.setdefault(found.group(1), []).append(k)
    return lines, MappingProxyType({name: tuple(ks) for name, ks in where.items()})


def file_macro(text: str, path: str, name: str, named_at: Location) -> FileMacro:
    """The ``#define name(...)`` of the macro file ``text`` (read from ``path``), whose
    continued lines are the body. A SpecError located in the file when it is malformed,
    or at ``named_at`` (the spec's ``file:``) when the file does not define ``name``."""
    lines, defines = _defines(text)
    found = defines.get(name, ())
    if not found:
        raise SpecError(
            f"macro {name}: {path} has no #define {name}(...)",
            named_at,
            hint=f"write `#define {name}(<params>) \\` and its continued body lines in {path}",
        )
    if len(found) > 1:
        raise _error(
            f"macro {name} is defined twice in the file",
            path,
            text,
            found[1],
            1,
            hint=f"the first #define {name} is at line {found[0] + 1}; keep one",
        )
    k = found[0]
    head = lines[k]
    match = DEFINE.match(head)
    assert match is not None
    if match.group(2) is None:
        raise _error(
            f"#define {name} takes no parameter list",
            path,
            text,
            k,
            match.end(1) + 1,
            hint=f"a kernel's macro has parameters: #define {name}(p_ID_, ...) \\",
        )
    close = head.find(")", match.end())
    if close < 0:
        raise _error(
            f"#define {name}: its parameter list does not close on its line", path, text, k, match.end()
        )
    params = tuple(p.strip() for p in head[match.end() : close].split(",") if p.strip())
    if not _CONTINUED.search(head) or head[close + 1 :].strip() != "\\":
        raise _error(
            f"#define {name}: the body starts on the next line",
            path,
            text,
            k,
            close + 2,
            hint="end the #define line with its parameter list and a backslash",
        )
    body: list[str] = []
    for line in lines[k + 1 :]:
        continued = _CONTINUED.search(line)
        body.append(line[: continued.start()] if continued else line)
        if not continued:
            break
    while body and not body[-1].strip():
        body.pop()
    if not body:
        raise _error(f"#define {name} has an empty body", path, text, k, 1)
    indent = min(len(line) - len(line.lstrip(" ")) for line in body if line.strip())
    text_of_body = "\n".join(line[indent:] if line.strip() else "" for line in body)
    return FileMacro(params, text_of_body + "\n", k + 1, k + 2, indent, comment_above(lines, k))


def comment_above(lines: Sequence[str], k: int) -> str:
    """The text of the C comment that ends on the line before line ``k`` (a ``/* ... */``
    block, or ``//`` lines), on one line; empty when there is none."""
    end = k - 1
    if end < 0 or not lines[end].rstrip().endswith("*/") and not lines[end].lstrip().startswith("//"):
        return ""
    if lines[end].lstrip().startswith("//"):
        start = end
        while start > 0 and lines[start - 1].lstrip().startswith("//"):
            start -= 1
        words = [line.lstrip()[2:] for line in lines[start : end + 1]]
    else:
        start = end
        while start >= 0 and "/*" not in lines[start]:
            start -= 1
        if start < 0 or not lines[start].lstrip().startswith("/*"):
            return ""
        block = "\n".join(lines[start : end + 1])
        inner = block[block.index("/*") + 2 : block.rindex("*/")].split("\n")
        words = [inner[0], *(line.strip().removeprefix("*") for line in inner[1:])]  # a " * " margin
    return " ".join(" ".join(words).split())


def macro_arguments(
    doc: YamlDoc, mnode: Any, name: str, what: str, body: MacroBody, shared: Any
) -> dict[str, tuple[Any, str]]:
    """Where the argument of each parameter of the macro ``name`` is written, in the
    order the macro takes them: ``(node, key)``, the macro's own ``params`` entry, or
    the spec's shared ``params:`` entry (``shared``) of that name when the macro's
    gives none. A body from a file takes the ``#define``'s parameters, so the macro's
    ``params`` may name only those, in any order; a body in the spec takes the
    macro's ``params`` in their order, where an empty argument (``p_ID_:``) means the
    shared one."""
    own = doc.mapping(mnode, "params", f"{what}: params") if "params" in mnode else {}
    if body.params is None and "params" not in mnode:
        raise doc.error(
            f"{what}: no params",
            mnode,
            "body",
            hint="a body written in the spec takes the parameters its `params:` lists, in their order",
        )
    for param in own:
        c_name(doc, own, param, f"{what}: parameter")
    order = tuple(str(p) for p in own) if body.params is None else body.params
    for param in own:
        if param not in order:
            raise doc.error(
                f"{what}: #define {name} in {os.path.basename(str(body.file))} takes no parameter {param}",
                own,
                param,
                hint=f"its parameters: {', '.join(order) or '(none)'}",
            )
    found: dict[str, tuple[Any, str]] = {}
    for param in order:
        if own.get(param) is not None:
            found[param] = (own, param)
        elif param in shared:
            found[param] = (shared, param)
        elif body.file is not None and body.source is not None:
            raise _error(
                f"#define {name}: parameter {param} has no argument",
                body.file,
                body.source,
                body.define_line - 1,
                1,
                hint=f"give it in the params of macro {name}, or in the spec's shared `params:`",
            )
        else:
            raise doc.error(
                f"{what}: parameter {param} has no argument",
                own,
                param,
                hint="write its template, or give it in the spec's shared `params:`",
            )
    return found


def _error(message: str, path: str, text: str, k: int, column: int, hint: str | None = None) -> SpecError:
    return SpecError(message, Location(path, k + 1, max(column, 1)), hint=hint, source=text)


__all__: Sequence[str] = (
    "FileMacro",
    "MacroBody",
    "check_all_taken",
    "file_macro",
    "macro_arguments",
    "macro_body",
)
