"""Import an ONNX model as graph DSL text plus a ``.npz`` weights file.

``import_onnx(path)`` reads the ModelProto (``onnx`` is an optional dependency,
imported here only), fixes the input shapes (``--shape NAME=1,3,224,224`` for a
dynamic dimension), runs ONNX shape inference, then walks the nodes in order:

* a node whose inputs are all known constants (initializers, ``Constant``,
  ``ConstantOfShape``, ``Shape`` of a static tensor, and whatever is computed from
  them) is folded with ONNX's own reference evaluator;
* any other node becomes catalog ops by the table of :mod:`byoc.onnx.ops`.

Constants that a statement uses are written as DSL constants: small ones inline,
the rest as ``weights["entry"]`` entries of the sidecar. The text is then parsed by
byoc's own parser, so the result is checked like any graph the user writes.

Names from the model (its file name, value names, attribute strings) reach the text
only as data: value names become fresh identifiers (:class:`Names`), strings are
escaped (:func:`dsl_string`). An error the parser finds in the generated text is
reported against the model file and the ONNX node that the offending line came from
(:func:`parse_imported`), never against the text, which the user never sees.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ByocError, ParseError, UsageError
from ..npz_files import ReadWeights, npz_bytes, sha256_hex
from ..warm_keys import remembered_digest
from .locations import locate_at_nodes, node_message
from .model_checks import (  # noqa: F401 (INSTALL_HINT, MIN_OPSET, max_opset: importers' names since the start)
    INSTALL_HINT,
    MIN_OPSET,
    check_model,
    check_names_utf8,
    max_opset,
    require_onnx,
)
from .values import dsl_string

INLINE_ELEMENTS = 8
"""Constants of at most this many elements are written inline; larger ones go to the
weights file."""


ASIDE_BYTES = 1 << 16
"""An initializer whose bytes exceed this is a weight: shape inference needs its type and
dims, never its values (the values it propagates are shapes, a few integers)."""


@contextmanager
def weight_bytes_aside(graph, *, restore: bool = True):
    """``graph``'s large initializers without their ``raw_data`` while the block runs, and
    with the very same bytes after it: ONNX's shape inference serialises the whole model
    and returns another copy of it, which for ResNet-50's 100 MB of weights took most of
    a second. Without ``restore`` (a model byoc read itself, whose weights the import
    has already taken as arrays) the bytes are dropped: keeping them aside and putting
    them back copies the 100 MB twice more (0.12 s)."""
    aside = [(t, t.raw_data if restore else b"") for t in graph.initializer if len(t.raw_data) > ASIDE_BYTES]
    try:
        for t, _ in aside:
            t.ClearField("raw_data")
        yield
    finally:
        for t, data in aside if restore else ():
            t.raw_data = data


@dataclass(frozen=True)
class Imported:
    """An imported model: the DSL text (naming ``weights_file``) and the weights' bytes;
    ``origins[k]`` names the ONNX node that line ``k + 1`` of the text came from ("" for
    the lines of no node), and ``where`` the model in messages."""

    text: str
    weights: bytes
    weights_file: str
    entries: int
    origins: tuple[str, ...] = ()
    where: str = "<model>"
    digest: str = ""
    """The SHA-256 of ``weights`` (the text declares it)."""
    arrays: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict, repr=False)
    """The weights' arrays, which ``weights`` archives: the parser takes them as they are."""


def parse_shapes(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``--shape NAME=1,3,224,224`` arguments as a mapping."""
    shapes = {}
    for item in items:
        name, eq, dims = item.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            shape = ()
        if not eq or not name or not shape or min(shape) < 0:
            raise UsageError(
                f"--shape {item!r} is not NAME=DIMS", hint="write it as --shape input=1,3,224,224"
            )
        shapes[name] = shape
    return shapes


def load_model(path: str | Path):
    """The ModelProto at ``path``, with the external data that sits beside it, checked;
    a clean error for a malformed file."""
    return read_model(path).proto


@dataclass(frozen=True)
class ReadModel:
    """A model that byoc read from ``where`` and checked (:func:`read_model`): an import
    takes it as it is, without checking it again, and may drop its weights' bytes once
    it holds them as arrays, so it imports once."""

    proto: object
    where: str
    whole: bool = True
    """The file's bytes are the whole model: no tensor keeps its data in another file."""


def read_model(path: str | Path) -> ReadModel:
    """The model at ``path`` with the external data that sits beside it, checked, for
    an import; a clean error for a malformed file."""
    require_onnx()
    from ..input_files import ONNX_LIMIT, read_limited

    data = read_limited(path, str(path), ONNX_LIMIT, UsageError)
    model = model_from_bytes(data, str(path))
    whole = not _external_tensors(model)
    _load_external_data(model, Path(path).parent, str(path))
    known = remembered_digest(path)  # the import cache's lookup hashed the file just now
    checked = check_model(model, str(path), data if whole else None, known if whole else None)
    return ReadModel(checked, str(path), whole)


def model_from_bytes(data: bytes, where: str):
    """The (unchecked) ModelProto serialised in ``data``."""
    onnx = require_onnx()
    try:
        return onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise ParseError(
            f"{where} is not a valid ONNX model ({type(exc).__name__}: {exc})",
            hint="the file is truncated or not an ONNX protobuf",
        ) from None


def _external_tensors(model):
    """The tensors of ``model`` that keep their data in a file."""
    from onnx.external_data_helper import uses_external_data

    return [t for t in _tensors(model.graph) if uses_external_data(t)]


def _tensors(graph):
    """Every tensor of ``graph``: initializers and node attributes, subgraphs included."""
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _tensors(sub)


def _load_external_data(model, directory: Path | None, where: str) -> None:
    """Read the tensors that ``model`` keeps in files of ``directory`` (None: the model
    came from memory, so there is nowhere to look). Each file must be a regular file
    inside ``directory``."""
    tensors = _external_tensors(model)
    if not tensors:
        return
    from onnx.external_data_helper import ExternalDataInfo, load_external_data_for_tensor

    for tensor in tensors:
        check_names_utf8(tensor, where)
        fields = {entry.key: entry.value for entry in tensor.external_data}
        location = fields.get("location", "")
        what = f"{where}: tensor {tensor.name!r} keeps its data in {location!r}"
        if directory is None:
            raise UsageError(f"{what}, but the model was given in memory", hint="import it from its file")
        if not location:
            raise ParseError(
                f"{where}: tensor {tensor.name!r} keeps its data in another file, but names none",
                hint="its external_data needs a 'location': the data file's name beside the model",
            )
        file = directory / location
        if Path(location).is_absolute() or ".." in Path(location).parts:
            raise ParseError(
                f"{what}, outside the model's directory", hint="keep data files beside the model"
            )
        if "\0" in location:
            raise ParseError(
                f"{what}, which is not a file name (it holds a NUL character)",
                hint="the model is corrupt, or was not written by an ONNX exporter",
            )
        try:
            info = os.stat(file)  # never opened before it is known to be a regular file (a FIFO hangs)
        except OSError:
            raise ParseError(
                f"{what}, which is missing (no file {file})", hint="copy the data file beside the model"
            ) from None
        if not stat.S_ISREG(info.st_mode):
            raise ParseError(
                f"{what}, which is not a regular file (a directory, device, FIFO or socket)",
                hint="external data must be a regular file beside the model",
            )
        _check_extent(fields, info.st_size, what)
        try:
            ExternalDataInfo(tensor)
            load_external_data_for_tensor(tensor, str(directory))
        except Exception as exc:  # whatever else onnx refuses
            raise ParseError(f"{what}, which cannot be read ({type(exc).__name__}: {exc})") from None


def _check_extent(fields: Mapping[str, str], size: int, what: str) -> None:
    """An external tensor's ``offset`` and ``length`` must be decimal numbers of bytes
    within the file's ``size``."""
    numbers = {}
    for key in ("offset", "length"):
        text = fields.get(key)
        if text is None:
            continue
        if not re.fullmatch(r"[0-9]+", text):
            raise ParseError(
                f"{what}, at {key} {text!r}, which is not a number of bytes",
                hint="an external tensor's offset and length are non-negative decimal integers",
            )
        numbers[key] = int(text)
    offset = numbers.get("offset", 0)
    length = numbers.get("length", size - offset)
    if offset > size or offset + length > size:
        raise ParseError(
            f"{what}, at bytes {offset}..{offset + length}, past the end of the file ({size} bytes)",
            hint="the data file is truncated, or the model names the wrong file",
        )


def _model_of(source, where: str | None):
    """``(model, where, stem, owned)`` of an import source: a path, the bytes of a
    model, a :class:`ReadModel`, or a ModelProto (the caller's: not ``owned``); ``where``
    names an in-memory one in messages."""
    if isinstance(source, (str, Path)):
        source = read_model(source)
    if isinstance(source, ReadModel):
        return source.proto, source.where, Path(source.where).stem, True
    where = where or "<model>"
    stem = Path(where).stem if where.endswith(".onnx") else "model"
    data = None
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        source = model_from_bytes(data, where)
    _load_external_data(source, None, where)  # refuses external data: none in memory
    return check_model(source, where, data), where, stem, data is not None


def import_onnx(
    source,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    weights_file: str | None = None,
    *,
    where: str | None = None,
    catalog=None,
    spec_path=None,
) -> Imported:
    """Import the model ``source`` (a path, the bytes of a model, or an in-memory
    ``onnx.ModelProto``, which ``where`` names in messages; see the module doc). The
    weights file is named ``weights_file``, by default ``STEM.npz`` after the model.
    The ops of ``catalog`` (default: that of ``spec_path``) that name an ONNX op in
    their ``onnx:`` key import it."""
    model, where, stem, owned = _model_of(source, where)
    weights_file = weights_file or f"{stem}.npz"
    return _import(model, where, shapes, weights_file, catalog=catalog, spec_path=spec_path, owned=owned)


def _import(
    model, where: str, shapes, weights_file: str, bound=None, *, catalog=None, spec_path=None, owned=False
) -> Imported:
    """The import of ``model``; ``owned``: byoc read it (from a file or bytes), so the
    import may drop its weights' bytes once it holds them as arrays."""
    from ..api import load_catalog
    from .functions import inline
    from .importer import Importer

    if catalog is None:
        catalog = load_catalog(spec_path=spec_path)
    model, calls = inline(model, where)
    importer = Importer(model, dict(shapes or {}), where, calls, bound, catalog, keep_weights=not owned)
    body, arrays, body_origins = importer.run()
    data = npz_bytes(arrays)
    digest = sha256_hex(data)
    # the file names are data: escaped as DSL strings, so that no name can end the
    # comment or the string and add text of its own (a graph, a declaration)
    head = f"weights {dsl_string(weights_file)} sha256 {dsl_string(digest)}\n\n" if arrays else ""
    name = Path(where).name
    shown = name if name.isprintable() and not set(name) & set('"\\') else dsl_string(name)
    comment = f"# Imported by byoc from {shown} (ONNX opset {importer.opset}).\n"
    text = comment + head + body
    origins = ("",) * (comment + head).count("\n") + tuple(body_origins)
    return Imported(text, data, weights_file, len(arrays), origins, where, digest, arrays)


def parse_imported(imported: Imported, file: str | None = None, *, catalog=None, spec_path=None):
    """The Program of ``imported``'s text, its weights read from memory (nothing is
    written). ``file`` is where the text will be written, if it will (the weights file is
    resolved beside it); an error the parser finds in the text names the model and the
    ONNX node the line came from, not the text. When the text is not written, the
    Program's locations name the model and the node too (:mod:`byoc.onnx.locations`),
    for the errors found after parsing."""
    from ..api import parse

    name = file or f"<{imported.where} imported>"
    try:
        program = parse(
            imported.text,
            file=name,
            catalog=catalog,
            spec_path=spec_path,
            weights_files={imported.weights_file: ReadWeights(imported.digest, imported.arrays)},
        )
    except ByocError as exc:
        loc = exc.location
        if loc is None or loc.file != name:
            raise
        origin = imported.origins[loc.line - 1] if 1 <= loc.line <= len(imported.origins) else ""
        statement = _source_line_of(imported.text, loc.line)
        raise type(exc)(node_message(exc.message, imported.where, origin, statement), hint=exc.hint) from None
    if file is not None:  # the text is written: errors found later point into it
        return program
    return locate_at_nodes(program, name, imported.where, imported.origins, imported.text)


def _source_line_of(text: str, line: int) -> str:
    lines = text.split("\n")
    return lines[line - 1].strip() if 1 <= line <= len(lines) else ""


def import_program(
    source,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    *,
    catalog=None,
    spec_path=None,
    where: str | None = None,
    bound: Mapping[str, np.ndarray] | None = None,
):
    """The model ``source`` (as for :func:`import_onnx`) imported and parsed in memory:
    the Program that ``byoc import`` followed by parsing the written graph would give
    (its weights file ``STEM.npz``, the digest the same). Nothing is written: the parser
    reads the weights from memory. ``bound`` specialises the model to values of some
    of its inputs, which it then no longer takes (:class:`byoc.onnx.importer.NeedsValue`)."""
    model, where, stem, owned = _model_of(source, where)
    imported = _import(
        model, where, shapes, f"{stem}.npz", bound, catalog=catalog, spec_path=spec_path, owned=owned
    )
    return parse_imported(imported, catalog=catalog, spec_path=spec_path)
