"""Where a backend spec's templates may write a ``str`` option.

A ``str`` option expands to a whole C string literal (``"text"``, escaped by
:func:`byoc.spec.option_types.c_string_literal`). That literal is one token only where
a token may start, so the loader refuses a ``${name}`` of a ``str`` option

* inside a string, character or raw string literal (``"v${name}"`` would end the
  enclosing literal at the value's first quote and put the value's text in code),
* glued to a name before it (``R${name}``, ``u8${name}``: a prefixed literal),
* as the operand of ``_Pragma`` (which runs its string as a directive), and
* on an ``#include`` line (which would open a file the value names).

In a comment it is inert (the literal holds no ``*/``, newline or splice), and in a
compile flag it is one argument (``-DNAME=${name}`` defines a string macro). Adjacent
literals concatenate, so ``"prefix " ${name}`` is how a template adds text to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from .backend import OptionDef
from .template import TemplateSyntaxError, placeholders
from .yaml_doc import YamlDoc

NOT_TEMPLATES = frozenset({"options", "compile", "requires", "description", "name", "kind", "version"})
"""Top-level keys whose strings are not C templates (flags are compiler arguments)."""
_RAW_START = re.compile(r'R"([^()\\\s"]{0,16})\(')
_PRAGMA = re.compile(r"_Pragma\s*\(\s*\Z")
_INCLUDE = re.compile(r"[ \t]*#[ \t]*include\b")
_NAME_CHAR = re.compile(r"[A-Za-z0-9_]")


def literal_context(text: str, offset: int) -> str | None:
    """Why a C string literal may not be written at ``offset`` of the template ``text``
    (``inside a string literal``, ...), or None where it stays one token."""
    state, close, i = None, "", 0
    while i < offset:
        if state is None:
            if text.startswith("/*", i):
                state, close, i = "comment", "*/", i + 2
                continue
            if text.startswith("//", i):
                state, i = "line comment", i + 2
                continue
            raw = _RAW_START.match(text, i)
            if raw is not None:
                state, close, i = "a raw string literal", ")" + raw.group(1) + '"', raw.end()
                continue
            ch = text[i]
            if ch == '"':
                state, close = "a string literal", '"'
            elif ch == "'" and not (i > 0 and text[i - 1].isdigit()):  # not C++'s 1'000
                state, close = "a character literal", "'"
        elif state in ("comment", "a raw string literal"):
            if text.startswith(close, i):
                state, i = None, i + len(close)
                continue
        elif state == "line comment":
            if text[i] == "\n" and text[i - 1] != "\\":
                state = None
        elif text[i] == "\\":  # an escape in a string or character literal
            i += 2
            continue
        elif text[i] in (close, "\n"):
            state = None
        i += 1
    if state is not None and "comment" not in state:
        return f"inside {state}"
    if state is not None:
        return None
    if offset > 0 and _NAME_CHAR.match(text[offset - 1]):
        return 'glued to the name before it (a prefixed literal such as R"...")'
    if _PRAGMA.search(text, 0, offset):
        return "as the operand of _Pragma"
    if _INCLUDE.match(text, text.rfind("\n", 0, offset) + 1):
        return "on an #include line"
    return None


def _strings(node: Any, top: bool = True) -> Iterator[tuple[Any, Any]]:
    """Every string scalar under ``node`` as (container, key), but ``doc`` texts and
    what the top-level keys of :data:`NOT_TEMPLATES` hold."""
    items = node.items() if isinstance(node, Mapping) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        if top and key in NOT_TEMPLATES:
            continue
        if isinstance(value, str):
            if key != "doc":
                yield node, key
        else:
            yield from _strings(value, top=False)


def check_option_uses(doc: YamlDoc, root: Any, options: Mapping[str, OptionDef]) -> None:
    """Raise a located SpecError where a template writes a ``str`` option's literal
    where it would not stay one token (see the module's docstring)."""
    strings = {name for name, o in options.items() if o.type == "str"}
    if not strings:
        return
    for node, key in _strings(root):
        text = node[key]
        if "$" not in text:
            continue
        try:
            found = [p for p in placeholders(text) if p.name in strings]
        except TemplateSyntaxError:
            continue  # the kind's own check reports a malformed template
        for p in found:
            why = literal_context(text, p.offset)
            if why is not None:
                raise doc.error_at(
                    f"the str option {p.name} is written {why}",
                    doc.at_offset(node, key, p.offset),
                    hint=f'${{{p.name}}} expands to a whole C string literal ("...", escaped): write it '
                    f'where a literal may stand, next to others to join them ("prefix " ${{{p.name}}}), '
                    "or declare the option as an identifier (pasted as code)",
                )
