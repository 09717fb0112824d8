"""Parse the graph DSL (``.graph``) into byoc IR: :func:`parse_graph` and
:func:`parse_body`, the public entry points.

Lark reduces rules bottom-up, so the callbacks (:mod:`.graph_reader`) return small
plain records (:mod:`.graph_records`: :class:`Ref`, :class:`Call`, :class:`Assign`, ...)
and only the ``graph`` rule feeds them, in source order, into a
:class:`~byoc.builder.FunctionBuilder` (:mod:`.graph_emitter`), which resolves names,
orders and types the nodes, and reports semantic errors. A region's body goes to a
nested builder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial

from byoc.catalog import Catalog
from byoc.errors import GraphError, Location, ParseError
from byoc.gc_pause import full_collections_deferred
from byoc.ir import MAX_NAME_LENGTH, Function, Program
from byoc.npz_files import ReadWeights

from .graph_emitter import GraphEmitter
from .graph_reader import GraphReader
from .graph_records import WeightsDecl
from .graph_statements import KEYWORDS, TERMINALS
from .lark_support import ReaderParser, check_name_lengths, decode, run_parser
from .weights_file import WeightsFile

DESCRIBE = {
    **{word.upper(): f"`{word}`" for word in KEYWORDS},
    "AT": "`@`",
    "NAME": "a name",
    "NAME_EQ": "`name =`",
    "SIMPLE_ASSIGNS": "",
    "INT": "an integer",
    "SIGNED_INT": "an integer",
    "SIGNED_FLOAT": "a number",
    "NONFINITE": "a number",
    "STRING": "a string",
    "DOT": "`.`",
    "LPAR": "`(`",
    "RPAR": "`)`",
    "LBRACE": "`{`",
    "RBRACE": "`}`",
    "LSQB": "`[`",
    "RSQB": "`]`",
    "COMMA": "`,`",
    "COLON": "`:`",
    "$END": "end of input",
}

_LONG_NAMES = re.compile(
    rf'#[^\n]*|"(?:[^"\\\n]|\\.)*"|(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]{{{MAX_NAME_LENGTH},}})'
)
"""Comments and strings (skipped), or a name longer than MAX_NAME_LENGTH (group 1)."""

_parser = ReaderParser("graph.lark", GraphReader, TERMINALS)


def parse_graph(
    data: str | bytes,
    catalog: Catalog,
    *,
    file: str | None = None,
    weights_files: Mapping[str, bytes | ReadWeights] | None = None,
) -> Program:
    """Parse DSL text (or bytes) into a Program, one Function per ``graph``.
    ``weights_files`` holds weights files by name in memory (a bundle's members, an
    import's arrays), looked up before the file system."""
    text = decode(data, file)
    check_name_lengths(text, file, _LONG_NAMES)
    records = run_parser(partial(_parser.parse, reader=GraphReader(file)), text, file, DESCRIBE)
    weights = None
    if records and type(records[0]) is WeightsDecl:
        decl = records.pop(0)
        try:
            weights = WeightsFile(decl.file, decl.sha256, file, decl.file_loc, decl.sha_loc, weights_files)
        except (GraphError, ParseError) as exc:
            raise exc.with_source(text) from None
    if not records:
        raise ParseError(
            "no graph found",
            Location(file, 1, 1),
            hint="start with `graph main(x: float32[4]) { ... }`",
            source=text,
        )
    emitter = GraphEmitter(catalog, file, text, weights)
    functions: list[Function] = []
    seen: dict[str, Location] = {}
    try:
        with full_collections_deferred():
            for _, name, loc, params, body in records:
                if name in seen:
                    raise GraphError(
                        f"duplicate graph name {name!r}", loc, hint=f"first defined at {seen[name]}"
                    )
                seen[name] = loc
                functions.append(emitter.function(name, loc, params, body))
    except GraphError as exc:
        raise exc.with_source(text) from None
    except RecursionError:
        raise ParseError("the text nests too deeply to parse", Location(file, 1, 1), source=text) from None
    return Program(tuple(functions))


BODY_HEADER = "graph body() {"
"""What :func:`parse_body` puts before a body, on the body's first line."""


def parse_body(
    text: str, builder, catalog: Catalog, *, file: str | None = None
) -> list[tuple[str, Location]]:
    """Parse ``text``, the body of a graph (statements, then ``return ...``), into
    ``builder``, which offers the :class:`~byoc.builder.FunctionBuilder` methods that
    statements call (``add_node``, ``anonymous``, ``add_constant``); return the returned
    names. Backend specs read a pattern's ops this way (one grammar for graphs and
    patterns). Locations are the body's own lines; on the first line, columns count
    from :data:`BODY_HEADER`, which the body is parsed after.
    """
    wrapped = f"{BODY_HEADER}{text}\n}}\n"
    records = run_parser(partial(_parser.parse, reader=GraphReader(file)), wrapped, file, DESCRIBE)
    if len(records) != 1 or type(records[0]) is not tuple:
        raise ParseError(
            "expected the statements of one graph body",
            Location(file, 1, len(BODY_HEADER) + 1),
            hint="write statements and a `return`, without `graph`, `weights` or an unmatched `}`",
        )
    _, _, _, _, body = records[0]
    return GraphEmitter(catalog, file, wrapped, None).statements(builder, body)
