"""The Python API: parse text into IR, print it back, evaluate it with numpy.

import byoc
program = byoc.parse_file("examples/guide_whole_graph.graph")
outputs = byoc.evaluate(program.functions[0], {"x": x, "w0": w0, ...})
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .catalog import Catalog
from .errors import Location, ParseError, UsageError
from .ir import Function, Program

LANGUAGES = ("graph", "examplejson")
EXTENSIONS = {".graph": "graph", ".examplejson": "examplejson", ".ejson": "examplejson"}


def load_catalog(path: str | Path | None = None) -> Catalog:
    """The op catalog: the shipped ``spec/ops.yaml`` unless ``path`` is given."""
    from byoc.spec import load_catalog as _load

    return _load(path)


def language_of(path: str | Path, language: str | None = None) -> str:
    """The language of a file: ``language`` if given, else from its extension."""
    if language is not None:
        if language not in LANGUAGES:
            raise UsageError(f"unknown language {language!r}", hint=f"use one of: {', '.join(LANGUAGES)}")
        return language
    found = EXTENSIONS.get(Path(path).suffix.lower())
    if found is None:
        raise UsageError(
            f"cannot tell the language of {str(path)!r} from its extension",
            hint="name it *.graph or *.examplejson, or pass --from graph|examplejson",
        )
    return found


def parse(
    text: str | bytes,
    language: str = "graph",
    *,
    file: str | None = None,
    catalog: Catalog | None = None,
) -> Program:
    """Parse DSL or ExampleJSON text into a validated Program."""
    catalog = catalog or load_catalog()
    language = language_of(file or "", language)
    if language == "graph":
        from .grammar.graph_parser import parse_graph

        return parse_graph(text, catalog, file=file)
    from .grammar.examplejson_parser import parse_examplejson

    return parse_examplejson(text, catalog, file=file)


def parse_file(path: str | Path, language: str | None = None, *, catalog: Catalog | None = None) -> Program:
    """Parse a ``.graph`` or ``.examplejson`` file (``-`` reads standard input)."""
    import sys

    lang = language_of(path, language)
    if str(path) == "-":
        return parse(sys.stdin.buffer.read(), lang, file="<stdin>", catalog=catalog)
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ParseError(f"cannot read {p}: {exc.strerror or exc}", Location(str(p), 1, 1)) from None
    return parse(data, lang, file=str(p), catalog=catalog)


def print_program(program: Program, language: str = "graph") -> str:
    """Print a Program as DSL or ExampleJSON text."""
    if language_of("", language) == "graph":
        from .grammar.graph_printer import print_graph

        return print_graph(program)
    from .grammar.examplejson_printer import print_examplejson

    return print_examplejson(program)


def evaluate(
    fn: Function, inputs: Mapping[str, np.ndarray], catalog: Catalog | None = None
) -> tuple[np.ndarray, ...]:
    """Run ``fn`` with the op catalog's numpy references; the oracle for every backend."""
    from .reference import evaluate as _evaluate

    return _evaluate(fn, inputs, catalog or load_catalog())
