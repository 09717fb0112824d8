"""Import an ONNX model as graph DSL text plus a ``.npz`` weights file.

``import_onnx(path)`` reads the ModelProto (``onnx`` is an optional dependency,
imported here only), fixes the input shapes (``--shape NAME=1,3,224,224`` for a
dynamic dimension), runs ONNX shape inference, then walks the nodes in order:

* a node whose inputs are all known constants (initializers, ``Constant``,
  ``ConstantOfShape``, ``Shape`` of a static tensor, and whatever is computed from
  them) is folded with ONNX's own reference evaluator;
* any other node becomes catalog ops by the table of :mod:`byoc.onnx_ops`.

Constants that a statement uses are written as DSL constants: small ones inline,
the rest as ``weights["entry"]`` entries of the sidecar. The text is then parsed by
byoc's own parser, so the result is checked like any graph the user writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import GraphError, ParseError, UsageError
from .ir import DTYPES, MAX_NAME_LENGTH
from .npz_files import npz_bytes, sha256_hex

INSTALL_HINT = "install the ONNX extra: pip install 'byoc[onnx]'"
INLINE_ELEMENTS = 8
"""Constants of at most this many elements are written inline; larger ones go to the
weights file."""
_KEYWORDS = frozenset(("graph", "return", "const", "as", "true", "false"))


def require_onnx():
    """The ``onnx`` module, or a UsageError saying how to install it."""
    try:
        import onnx
    except ImportError:
        raise UsageError("importing ONNX models needs the onnx package", hint=INSTALL_HINT) from None
    return onnx


@dataclass(frozen=True)
class Imported:
    """An imported model: the DSL text (naming ``weights_file``) and the weights' bytes."""

    text: str
    weights: bytes
    weights_file: str
    entries: int


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
    """The ModelProto at ``path``, checked; a clean error for a malformed file."""
    onnx = require_onnx()
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise ParseError(
            f"{path} is not a valid ONNX model ({type(exc).__name__}: {exc})",
            hint="the file is truncated or not an ONNX protobuf",
        ) from None
    return check_model(model, str(path))


def check_model(model, where: str):
    """``model`` if ONNX's checker accepts it; a clean error naming ``where`` if not."""
    onnx = require_onnx()
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ParseError(f"{where} is not a valid ONNX model: {first}") from None
    return model


def import_onnx(
    source, shapes: Mapping[str, tuple[int, ...]] | None = None, weights_file: str | None = None
) -> Imported:
    """Import the model ``source`` (a path, or an in-memory ``onnx.ModelProto``; see the
    module doc)."""
    from .onnx_ops import Importer

    if isinstance(source, (str, Path)):
        model, where = load_model(source), str(source)
        weights_file = weights_file or Path(source).with_suffix(".npz").name
    else:
        model, where = check_model(source, "<model>"), "<model>"
        weights_file = weights_file or "model.npz"
    importer = Importer(model, dict(shapes or {}), where)
    body, arrays = importer.run()
    data = npz_bytes(arrays)
    head = f'weights "{weights_file}" sha256 "{sha256_hex(data)}"\n\n' if arrays else ""
    comment = f"# Imported by byoc from {Path(where).name} (ONNX opset {importer.opset}).\n"
    return Imported(comment + head + body, data, weights_file, len(arrays))


def import_program(
    source, shapes: Mapping[str, tuple[int, ...]] | None = None, *, catalog=None, spec_path=None
):
    """The model ``source`` (a path or a ModelProto) imported and parsed in memory: the
    Program that ``byoc import`` followed by parsing the written graph would give. The
    weights file exists only while the text is parsed (the parser reads every external
    constant then)."""
    import tempfile

    from .api import parse

    stem = Path(source).stem if isinstance(source, (str, Path)) else "model"
    imported = import_onnx(source, shapes, weights_file=f"{stem}.npz")
    with tempfile.TemporaryDirectory(prefix="byoc-onnx-") as tmp:
        (Path(tmp) / imported.weights_file).write_bytes(imported.weights)
        return parse(
            imported.text, file=str(Path(tmp) / f"{stem}.graph"), catalog=catalog, spec_path=spec_path
        )


class Names:
    """ONNX value names as unique DSL identifiers."""

    def __init__(self) -> None:
        self.taken: set[str] = set()
        self.table: dict[str, str] = {}

    def __call__(self, onnx_name: str) -> str:
        found = self.table.get(onnx_name)
        if found is not None:
            return found
        ident = re.sub(r"[^A-Za-z0-9_]", "_", onnx_name)[: MAX_NAME_LENGTH - 8] or "v"
        if not re.match(r"[A-Za-z_]", ident) or ident in _KEYWORDS:
            ident = "v_" + ident
        base, k = ident, 1
        while ident in self.taken:
            ident, k = f"{base}_{k}", k + 1
        self.taken.add(ident)
        self.table[onnx_name] = ident
        return ident

    def fresh(self, hint: str) -> str:
        """A new identifier for a value byoc adds (no ONNX name of its own)."""
        k = len(self.taken)
        while f"{hint}_{k}" in self.taken:
            k += 1
        self.taken.add(f"{hint}_{k}")
        return f"{hint}_{k}"


def dsl_dtype(dtype: np.dtype, what: str) -> str:
    name = np.dtype(dtype).name
    if name not in DTYPES:
        raise GraphError(
            f"{what} has dtype {name}, which byoc does not support", hint=f"byoc supports {', '.join(DTYPES)}"
        )
    return name


def number(v) -> str:
    """A DSL literal for one value (repr keeps a float32's value exactly)."""
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    text = repr(float(v))
    if text in ("inf", "-inf", "nan"):
        raise GraphError(f"the constant value {text} cannot be written in the DSL")
    return text
