"""The Python API: parse text into IR, print it back, evaluate it with numpy, and
read backend specs.

Three input languages: the graph DSL (``.graph``), ExampleJSON (``.examplejson``) and
ONNX models (``.onnx``, imported in memory as :func:`byoc.onnx.model_import.import_program`
does; ``shapes`` fixes their dynamic dimensions). Programs print as DSL or ExampleJSON.

import byoc
program = byoc.parse_file("examples/guide_whole_graph.graph")
outputs = byoc.evaluate(program.functions[0], {"x": x, "w0": w0, ...})
spec = byoc.load_backend("ccompiler", spec_path=["my_specs"])

``spec_path`` is a directory, or a list of them, searched for ``<backend>.yaml``
before ``$BYOC_SPEC_PATH`` and the shipped specs (see :mod:`byoc.spec.search`); the
``ops.yaml`` of those directories extend the op catalog, for parsing, evaluating and
checking backend specs alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .catalog import Catalog
from .errors import Location, ParseError, UsageError
from .input_files import GRAPH_TEXT_LIMIT, ONNX_LIMIT, read_limited, read_stdin
from .ir import Function, Program

if TYPE_CHECKING:
    from .npz_files import ReadWeights
    from .spec.backend import BackendSpec

SpecPath = str | Path | Iterable[str | Path] | None

LANGUAGES = ("graph", "examplejson", "onnx")
PRINTED_LANGUAGES = ("graph", "examplejson")
"""What :func:`print_program` writes: an ONNX model is read, never written."""
EXAMPLEJSON_BACKEND = "examplejson"
"""The backend spec whose op tokens the ExampleJSON parser and printer use by default."""
EXTENSIONS = {".graph": "graph", ".examplejson": "examplejson", ".ejson": "examplejson", ".onnx": "onnx"}
Shapes = Mapping[str, tuple[int, ...]]


def load_catalog(path: str | Path | None = None, *, spec_path: SpecPath = None) -> Catalog:
    """The op catalog: the shipped ``spec/ops.yaml`` extended by the ``ops.yaml`` of each
    directory of the spec search path (``spec_path``, then ``$BYOC_SPEC_PATH``); or,
    when ``path`` is given, that complete catalog file alone."""
    from byoc.spec import load_catalog as _load
    from byoc.spec import load_catalog_on_path

    return _load(path) if path is not None else load_catalog_on_path(spec_path)


def load_backend(name: str, spec_path: SpecPath = None, *, catalog: Catalog | None = None) -> BackendSpec:
    """The validated backend spec ``name``, from the spec search path, checked against
    ``catalog`` (default: the catalog of the same path)."""
    from byoc.spec import load_backend as _load

    return _load(name, spec_path, catalog=catalog)


def backend_loader(
    spec_path: SpecPath = None, catalog: Catalog | None = None
) -> Callable[[str], BackendSpec]:
    """:func:`load_backend` bound to one search path and catalog, as the generator takes it."""
    return lambda name: load_backend(name, spec_path, catalog=catalog)


def list_backends(spec_path: SpecPath = None) -> list[BackendSpec]:
    """Every backend spec on the search path, validated, sorted by name."""
    from byoc.spec import list_backends as _list

    return _list(spec_path)


def examplejson_tokens(spec_path: SpecPath = None, backend: str = EXAMPLEJSON_BACKEND) -> dict[str, str]:
    """Op token -> catalog op, from the examplejson-kind backend spec ``backend``."""
    spec = load_backend(backend, spec_path)
    if spec.kind.name_table != "tokens":
        raise UsageError(
            f"backend {backend!r} is a {spec.kind.name} backend; ExampleJSON tokens come from an examplejson one",
            hint="name a backend whose spec says `kind: examplejson`",
        )
    return spec.op_names()


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
            hint="name it *.graph, *.examplejson or *.onnx, or pass --from graph|examplejson|onnx",
        )
    return found


def parse(
    text: str | bytes,
    language: str = "graph",
    *,
    file: str | None = None,
    catalog: Catalog | None = None,
    spec_path: SpecPath = None,
    examplejson_backend: str = EXAMPLEJSON_BACKEND,
    shapes: Shapes | None = None,
    weights_files: Mapping[str, bytes | ReadWeights] | None = None,
) -> Program:
    """Parse DSL or ExampleJSON text, or the bytes of an ONNX model, into a validated
    Program.

    Ops come from ``catalog`` (default: the catalog of the spec search path).
    ExampleJSON op tokens come from the backend spec ``examplejson_backend``, found
    on the spec search path. ``shapes`` fixes an ONNX model's input shapes
    (``{"input": (1, 3, 224, 224)}``, as ``--shape`` does); ``file`` names the text in
    messages. ``weights_files`` holds DSL weights files in memory by name (a bundle's
    members, or an import's arrays already read), looked up before the file system.
    """
    catalog = catalog or load_catalog(spec_path=spec_path)
    language = language_of(file or "", language)
    _check_shapes(language, shapes)
    if language == "onnx":
        from .onnx.model_import import import_program

        data = text.encode("utf-8") if isinstance(text, str) else text
        return import_program(data, shapes, catalog=catalog, spec_path=spec_path, where=file)
    if language == "graph":
        from .grammar.graph_parser import parse_graph

        return parse_graph(text, catalog, file=file, weights_files=weights_files)
    from .grammar.examplejson_parser import parse_examplejson

    tokens = examplejson_tokens(spec_path, examplejson_backend)
    return parse_examplejson(text, catalog, file=file, tokens=tokens)


def parse_file(
    path: str | Path,
    language: str | None = None,
    *,
    catalog: Catalog | None = None,
    spec_path: SpecPath = None,
    examplejson_backend: str = EXAMPLEJSON_BACKEND,
    shapes: Shapes | None = None,
) -> Program:
    """Parse a ``.graph``, ``.examplejson`` or ``.onnx`` file (``-`` reads standard
    input). An ONNX model is read with the external data beside it."""

    options = {"catalog": catalog, "spec_path": spec_path, "examplejson_backend": examplejson_backend}
    return parse_source(path, language_of(path, language), shapes=shapes, keyed=False, **options)[0]


def parse_source(
    path: str | Path,
    language: str,
    *,
    catalog: Catalog | None = None,
    spec_path: SpecPath = None,
    examplejson_backend: str = EXAMPLEJSON_BACKEND,
    shapes: Shapes | None = None,
    keyed: bool = True,
) -> tuple[Program, str | None]:
    """:func:`parse_file` of a file in ``language``, and the key that names the Program
    for a build's record (:mod:`byoc.build_records`): an ONNX file's import key, a
    text file's :func:`~byoc.build_records.text_source_key`; None for standard input
    or without ``keyed``."""
    options = {"catalog": catalog, "spec_path": spec_path, "examplejson_backend": examplejson_backend}
    if str(path) == "-":
        limit = ONNX_LIMIT if language == "onnx" else GRAPH_TEXT_LIMIT
        data = read_stdin("standard input", limit, partial(ParseError, location=Location("<stdin>", 1, 1)))
        return parse(data, language, file="<stdin>", shapes=shapes, **options), None
    p = Path(path)
    if language == "onnx":
        from .onnx.import_cache import import_path

        return import_path(p, shapes, catalog=catalog, spec_path=spec_path)
    data = read_limited(p, str(p), GRAPH_TEXT_LIMIT, partial(ParseError, location=Location(str(p), 1, 1)))
    if not keyed:
        return parse(data, language, file=str(p), shapes=shapes, **options), None
    from .build_records import text_source_key
    from .parsed_texts import parsed_text

    tokens = examplejson_tokens(spec_path, examplejson_backend) if language == "examplejson" else None
    key = text_source_key(data, language, str(p), tokens)
    catalog = options["catalog"] = catalog or load_catalog(spec_path=spec_path)
    _check_shapes(language, shapes)
    return parsed_text(key, catalog, partial(parse, data, language, file=str(p), **options)), key


def _check_shapes(language: str, shapes: Shapes | None) -> None:
    if shapes and language != "onnx":
        raise UsageError(
            f"--shape fixes the inputs of an ONNX model, and this is a {language} file",
            hint="a graph declares its input shapes itself",
        )


def print_program(
    program: Program,
    language: str = "graph",
    *,
    spec_path: SpecPath = None,
    examplejson_backend: str = EXAMPLEJSON_BACKEND,
    inline_weights: bool = False,
) -> str:
    """Print a Program as DSL or ExampleJSON text (tokens from ``examplejson_backend``).

    External constants print as ``weights["entry"]`` references to their weights file,
    unless ``inline_weights`` asks for their values (a text that stands alone)."""
    if language not in PRINTED_LANGUAGES:
        raise UsageError(
            f"byoc cannot print {language!r}", hint=f"use one of: {', '.join(PRINTED_LANGUAGES)}"
        )
    if language == "graph":
        from .grammar.graph_printer import print_graph

        return print_graph(program, inline_weights=inline_weights)
    from .grammar.examplejson_printer import print_examplejson

    return print_examplejson(program, examplejson_tokens(spec_path, examplejson_backend))


def evaluate(
    fn: Function,
    inputs: Mapping[str, np.ndarray],
    catalog: Catalog | None = None,
    *,
    spec_path: SpecPath = None,
) -> tuple[np.ndarray, ...]:
    """Run ``fn`` with the op catalog's numpy references; the oracle for every backend.

    ``catalog`` defaults to the catalog of the spec search path."""
    from .reference import evaluate as _evaluate

    return _evaluate(fn, inputs, catalog or load_catalog(spec_path=spec_path))
