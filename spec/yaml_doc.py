"""Read YAML with ruamel.yaml in round-trip mode, keeping line and column data, and
check mappings against a small schema with located :class:`SpecError` s.

A parsed document is kept in byoc's disk cache (:mod:`byoc.disk_cache`), keyed by
its text: ruamel's round-trip parser is pure Python and costs tens of milliseconds
per spec file, unpickling the same tree about one.

ruamel's ``lc`` positions are 0-based; every :class:`~byoc.errors.Location` made
here is 1-based, as humans count.
"""

from __future__ import annotations

import re
import reprlib
import warnings
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml import __version__ as ruamel_version
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, ReusedAnchorWarning
from ruamel.yaml.scalarstring import (
    DoubleQuotedScalarString,
    LiteralScalarString,
    SingleQuotedScalarString,
)

from byoc.disk_cache import cached, entry_key
from byoc.errors import YAML_LINE_BREAK, Location, SpecError

from .libyaml_load import libyaml_load
from .support import read_spec_text

C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DUPLICATE = re.compile(r'found duplicate key "(.*?)"')
_BLOCK_HEADER = re.compile(r"[|>]([1-9]?)[+-]?([1-9]?)")


def round_trip_yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    return yaml


MAX_EXPANDED_VALUES = 1 << 24
"""How many values (scalars, lists, mappings) a document may hold once its aliases are
expanded: a billion-laughs document (aliases of aliases) is refused when it is loaded,
before any check walks it."""
SHOWN_VALUES = 1000
"""A list or mapping whose aliases expand beyond this (and beyond the text's length) is
shown in messages cut short (:class:`ShownSeq`, :class:`ShownMap`)."""
ALIAS_CHECK = "aliases-2"
"""Part of the cache key: documents cached before these checks (the aliases' expansion,
an anchor defined twice) are parsed again."""


class _ShortRepr(reprlib.Repr):
    """A repr of a few levels and items, whatever the value's size."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxlist, self.maxdict = 3, 4, 4
        self.maxstring = self.maxother = 40

    def repr_CommentedSeq(self, x: Any, level: int) -> str:
        return self.repr_list(x, level)

    def repr_CommentedMap(self, x: Any, level: int) -> str:
        return self.repr_dict(x, level)

    repr_ShownSeq = repr_CommentedSeq
    repr_ShownMap = repr_CommentedMap


_SHORT = _ShortRepr()


class ShownSeq(CommentedSeq):
    """A list that aliases make huge: its repr (and so its text in any message) is cut short."""

    __slots__ = ()

    def __repr__(self) -> str:
        return _SHORT.repr(self)


class ShownMap(CommentedMap):
    """A mapping that aliases make huge, shown cut short like :class:`ShownSeq`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return _SHORT.repr(self)


def _aliases_checked(root: Any, path: str, text: str) -> Any:
    """``root``, after refusing a document whose aliases expand to more than
    :data:`MAX_EXPANDED_VALUES` values or refer to themselves; a list or mapping that
    aliases make huge becomes a :class:`ShownSeq` or :class:`ShownMap`. Every distinct
    list and mapping is visited once (no recursion: a deep document is fine)."""
    sizes: dict[int, int] = {}
    nodes: dict[int, Any] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            total = 1 + sum(sizes.get(id(c), 1) for c in _children(node))
            sizes[key] = total
            if total > MAX_EXPANDED_VALUES:
                raise SpecError(
                    f"the aliases here expand to more than {MAX_EXPANDED_VALUES:,} values",
                    _node_location(node, path),
                    hint="a spec needs no alias of an alias of ...; write the values out",
                    source=text,
                )
            continue
        if key in sizes:
            continue
        if key in open_:
            raise SpecError(
                "an alias refers to a value that holds it (a recursive alias)",
                _node_location(node, path),
                hint="a spec's values are trees; remove the alias",
                source=text,
            )
        open_.add(key)
        nodes[key] = node
        stack.append((node, True))
        stack.extend(
            (c, False) for c in _children(node) if isinstance(c, (list, dict)) and id(c) not in sizes
        )
    cut = max(SHOWN_VALUES, len(text))
    for key, size in sizes.items():
        node = nodes[key]
        if size > cut and type(node) is CommentedSeq:
            node.__class__ = ShownSeq
        elif size > cut and type(node) is CommentedMap:
            node.__class__ = ShownMap
    return root


def _children(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [*node.keys(), *node.values()]
    if isinstance(node, list):
        return list(node)
    return []


def _node_location(node: Any, path: str) -> Location:
    lc = getattr(node, "lc", None)
    line, col = (lc.line, lc.col) if lc is not None and lc.line is not None else (0, 0)
    return Location(path, line + 1, col + 1)


_ANCHOR = re.compile(
    r"duplicate anchor '([^']*)'\s*first occurrence .*?line (\d+).*?second occurrence .*?line (\d+), column (\d+)",
    re.S,
)
"""ruamel's ReusedAnchorWarning: the anchor, the line of its first occurrence, and the
line and column of its second (ruamel prints a mark's line and column from 1)."""


def _strict_load(text: str) -> Any:
    """The document of ``text``, an anchor defined twice raised as ruamel's warning
    rather than printed: YAML lets the second shadow the first, but in a spec it is a
    copy that was not renamed, and the aliases after it silently change meaning.
    libyaml reads the text where it reads it as ruamel does (:mod:`.libyaml_load`)."""
    fast = libyaml_load(text)
    if fast is not None:
        return fast
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReusedAnchorWarning)
        return round_trip_yaml().load(text)


class YamlDoc:
    """A parsed YAML file plus the helpers to point at its keys and values."""

    def __init__(self, path: str | Path, text: str | None = None) -> None:
        self.path = str(path)
        if text is None:
            text = read_spec_text(path)
        self.text = text
        try:
            self.root = cached(
                "yaml",
                entry_key("ruamel.yaml", ruamel_version, ALIAS_CHECK, text),
                lambda: _aliases_checked(_strict_load(text), self.path, text),
            )
        except SpecError:
            raise
        except ReusedAnchorWarning as warning:
            found = _ANCHOR.search(str(warning))
            name, first, line, column = found.groups() if found else ("?", "?", "1", "0")
            raise SpecError(
                f"the anchor &{name} is defined twice",
                Location(self.path, int(line), int(column)),
                hint=f"an alias refers to the latest anchor of its name; rename one of the two (the first is at line {first})",
                source=text,
            ) from None
        except DuplicateKeyError as exc:
            mark = exc.problem_mark
            found = _DUPLICATE.search(str(exc.problem))
            key = found.group(1) if found else "?"
            loc = Location(self.path, mark.line + 1, mark.column + 1) if mark else Location(self.path, 1, 1)
            raise SpecError(
                f"duplicate key {key!r}",
                loc,
                hint="a name may appear only once in a mapping; remove or rename one of them",
                source=text,
            ) from None
        except MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            loc = Location(self.path, mark.line + 1, mark.column + 1) if mark else Location(self.path, 1, 1)
            raise SpecError(f"invalid YAML: {exc.problem or exc.context}", loc, source=text) from None
        except Exception as exc:  # ruamel raises a few non-Marked errors (e.g. bad unicode)
            raise SpecError(f"invalid YAML: {exc}", Location(self.path, 1, 1), source=text) from None

    # -------------------------------------------------------------- locations

    @cached_property
    def lines(self) -> list[str]:
        """The text's lines, split where YAML breaks them (a spec's macros ask for a line
        each: splitting a large spec once per question cost 15 ms of every load)."""
        return YAML_LINE_BREAK.split(self.text)

    def block_line(self, container: Any, key: Any) -> int | None:
        """The line of the first line of ``container[key]``'s text when it is a literal
        block (``|``), whose lines are the file's lines one for one; None for any other
        scalar."""
        if not isinstance(container[key], LiteralScalarString) or not container[key]:
            return None
        return self.at_offset(container, key, 0).line

    def at(self, container: Any = None, key: Any = None, *, value: bool = False) -> Location:
        """The location of ``key`` in ``container`` (or of its value), else of the container."""
        line, col = 0, 0
        if (
            isinstance(container, CommentedMap)
            and key is not None
            and key in container
            and key not in container.lc.data
        ):
            # a key merged in (``<<: *anchor``) is where the anchored mapping wrote it
            source = next((m for m in getattr(container, "merge", ()) if key in m), None)
            if source is not None:
                return self.at(source, key, value=value)
        if isinstance(container, CommentedMap) and key is not None and key in container.lc.data:
            # an empty (null) value has no position of its own: point at its key
            value = value and container[key] is not None
            line, col = container.lc.value(key) if value else container.lc.key(key)
        elif isinstance(container, CommentedSeq) and isinstance(key, int) and key < len(container):
            line, col = container.lc.item(key)
        elif isinstance(container, (CommentedMap, CommentedSeq)):
            line, col = container.lc.line, container.lc.col
        return Location(self.path, line + 1, col + 1)

    def at_offset(self, container: Any, key: Any, offset: int) -> Location:
        """The location of character ``offset`` of the string ``container[key]``.

        Exact for literal blocks (``|``) and for a character that starts a word of a
        plain or quoted scalar on one line or several (the word is found in the text,
        past as many occurrences of it as the value holds before it); otherwise the
        location of the value itself.
        """
        base = self.at(container, key, value=True)
        value = container[key]
        lines = self.lines
        if not isinstance(value, str) or not 1 <= base.line <= len(lines):
            return base
        head = value[:offset]
        newlines = head.count("\n")
        column = offset - (head.rfind("\n") + 1)
        if isinstance(value, LiteralScalarString):
            header = _BLOCK_HEADER.match(lines[base.line - 1], base.column - 1)
            explicit = header and (header.group(1) or header.group(2))
            if explicit:
                parent = self.at(container, key).column - 1 if isinstance(container, CommentedMap) else 0
                indent = parent + int(explicit)
            else:
                body = (ln for ln in lines[base.line :] if ln.strip())
                first = next(body, "")
                indent = len(first) - len(first.lstrip(" "))
            return Location(self.path, base.line + 1 + newlines, indent + column + 1)
        quoted = isinstance(value, (DoubleQuotedScalarString, SingleQuotedScalarString))
        token = re.match(r"\S+", value[offset:])
        if token is None:
            return (
                base
                if newlines
                else Location(self.path, base.line, base.column + column + (1 if quoted else 0))
            )
        # A plain or quoted scalar folds its line breaks and indentation into spaces, and
        # a double-quoted one reads escapes, so an offset in the value is not one in the
        # text: find the same word, as many occurrences on, in the lines from the value.
        word = token.group(0)
        skip = value[:offset].count(word)
        for k in range(base.line - 1, len(lines)):
            start = base.column - 1 if k == base.line - 1 else 0
            at = lines[k].find(word, start)
            while at >= 0:
                if skip == 0:
                    return Location(self.path, k + 1, at + 1)
                skip -= 1
                at = lines[k].find(word, at + len(word))
        return base

    def error_at(self, message: str, location: Location, *, hint: str | None = None) -> SpecError:
        return SpecError(message, location, hint=hint, source=self.text)

    def error(
        self,
        message: str,
        container: Any = None,
        key: Any = None,
        *,
        value: bool = False,
        hint: str | None = None,
    ) -> SpecError:
        return SpecError(message, self.at(container, key, value=value), hint=hint, source=self.text)

    # ---------------------------------------------------------------- checks

    def mapping(self, container: Any, key: Any, what: str) -> CommentedMap:
        node = container[key]
        if not isinstance(node, CommentedMap):
            raise self.error(f"{what} must be a mapping, got {_type_text(node)}", container, key, value=True)
        return node

    def check_keys(
        self, node: CommentedMap, what: str, required: Iterable[str], optional: Iterable[str]
    ) -> None:
        """Reject unknown keys (listing the allowed ones) and missing required keys."""
        required = list(required)
        allowed = required + [k for k in optional if k not in required]
        for key in node:
            if key not in allowed:
                raise self.error(
                    f"unknown key {key!r} in {what}",
                    node,
                    key,
                    hint=f"allowed keys: {', '.join(allowed)}",
                )
        for key in required:
            if key not in node:
                raise self.error(f"{what} is missing the required key {key!r}", node, hint=f"add `{key}:`")

    def typed(self, node: Any, key: Any, types: type | tuple[type, ...], what: str) -> Any:
        """``node[key]``, which must be of ``types`` (bool is never an int here)."""
        value = node[key]
        want = types if isinstance(types, tuple) else (types,)
        if isinstance(value, bool) and bool not in want or not isinstance(value, want):
            names = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in want)
            raise self.error(f"{what} must be {names}, got {_type_text(value)}", node, key, value=True)
        return value

    def identifier(self, node: Any, key: Any, name: Any, what: str, *, at_value: bool = True) -> str:
        from byoc.c_names import C_KEYWORDS

        if not isinstance(name, str) or not C_IDENTIFIER.match(name):
            raise self.error(
                f"{what} {name!r} is not a valid C identifier",
                node,
                key,
                value=at_value,
                hint="use letters, digits and underscores, not starting with a digit",
            )
        if name in C_KEYWORDS:
            raise self.error(
                f"{what} {name!r} is a C or C++ keyword", node, key, value=at_value, hint="pick another name"
            )
        return name


_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    list: "a list",
    dict: "a mapping",
}


def _type_text(value: Any) -> str:
    """What a YAML value is, for an error message: ``an integer 0``, ``a string 'x'``
    (ruamel's scalar types, ScalarInt and the like, read as the Python types they extend)."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    for kind in (str, int, float):
        if isinstance(value, kind):
            return f"{_TYPE_NAMES[kind]} {kind(value)!r}"
    return f"{type(value).__name__} {value!r}"
