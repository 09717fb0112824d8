"""An ONNX file's import, remembered for the next run of the same file.

Importing BERT-base (437 MB) takes two seconds: protobuf parses the file, ONNX's shape
inference runs, the importer writes the graph text and byoc's parser reads it back. A
second ``byoc run`` of the same file gets the same Program, so the first one keeps it
in the disk cache (kind ``import``), under a key made of the file's digest
(:func:`byoc.warm_keys.file_digest`), the name it was given by, the input shapes, the
values the model was specialised to (``bound``), the user op catalogs, byoc's code
(:func:`byoc.warm_keys.code_stamp`) and the onnx and numpy versions.

The weights are not stored a second time. A constant of the Program whose bytes are
those of an initializer's ``raw_data`` in the file (most weights are) is stored as
where it is in the file, and read from there when the entry is found; only the others
(folded or transposed constants) are in the entry itself. So the entry of ResNet-50 is
a few hundred kilobytes, not 100 MB. The file is read, never mapped (a file truncated
meanwhile cannot crash the process), and an entry is used only if the file's status
is the same after the reads as when its digest was found.

An import that needs the value of an input (:class:`~byoc.onnx.importer.NeedsValue`)
is remembered as that need, so that ``byoc run --inputs`` asks for the value again
without importing; the graph alone decides it. Any other refusal is never remembered:
it is raised afresh each time. The Program of a model whose tensors keep their data in
other files is not remembered (their bytes are not in the key), as the import itself
says (:attr:`~byoc.onnx.model_import.ReadModel.whole`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from ..disk_cache import entry_key, read_entry, write_entry
from ..input_files import ONNX_LIMIT
from ..warm_keys import catalog_stamp, code_stamp, file_digest, file_status

KIND = "onnx-imports"
REFERENCED_BYTES = 1 << 16
"""A constant of at least this many bytes is stored as a place in the model file, when
its bytes are there."""
HEAD = 64
"""How many leading bytes index the file's tensors for the search of a constant."""


class _Changed(Exception):
    """The model file is not what the entry was made from (shorter, or rewritten)."""


def import_file(
    path: str | Path,
    make: Callable[[], tuple[object, bool]],
    *,
    shapes: Mapping[str, tuple[int, ...]] | None,
    bound: Mapping[str, np.ndarray] | None,
    catalog,
) -> tuple[object, str | None]:
    """``(program, key)``: the import of the ONNX file ``path`` (``make()`` does it,
    when the cache has no entry, and says too whether the file's bytes were all it read)
    and the key it is remembered under, which names the
    Program for the build's own record (:mod:`byoc.build_records`); the key is None when
    the import cannot be remembered (see the module doc): then nothing else may be
    remembered under it either, since it does not cover every byte the import read."""
    status = file_status(path)
    bound_digests = _value_digests(bound or {})
    stamp = catalog_stamp(catalog)
    if status is None or status[2] > ONNX_LIMIT or bound_digests is None or stamp is None:
        return make()[0], None  # not a regular file, too large (the import says so), or unnamed inputs
    found = file_digest(path)
    if found is None:
        return make()[0], None
    digest, status = found
    key = entry_key(
        "onnx-import",
        code_stamp(),
        _version("onnx"),
        np.__version__,
        digest,
        str(path),
        repr(sorted((name, tuple(map(int, dims))) for name, dims in (shapes or {}).items())),
        repr(bound_digests),
        stamp,
    )
    data = read_entry(KIND, key)
    if data is not None:
        program = _recall(data, path, status)
        if program is not None:
            return program, key
    from .importer import NeedsValue

    try:
        program, whole = make()
    except NeedsValue as need:
        if file_status(path) == status:
            write_entry(
                KIND, key, pickle.dumps(("needs", need.message, need.input, need.hint, need.position))
            )
        raise
    stored = _stored(program, path) if whole and file_status(path) == status else None
    if stored is None:  # nothing names this Program: its build is not remembered either
        return program, None
    write_entry(KIND, key, stored)
    return program, key


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _value_digests(bound: Mapping[str, np.ndarray]) -> list[tuple[str, str]] | None:
    """Each bound input's name with the digest of its dtype, shape and bytes, sorted;
    None when a value has no bytes to digest (strings, objects)."""
    out = []
    for name, value in sorted(bound.items()):
        array = np.ascontiguousarray(value)
        if array.dtype.hasobject:
            return None
        head = f"{array.dtype.str}{array.shape}".encode()
        out.append((name, hashlib.sha256(head + array.reshape(-1).view(np.uint8).tobytes()).hexdigest()))
    return out


def _recall(data: bytes, path: str | Path, status: tuple[int, ...]):
    """The Program of an entry, its weights read from ``path``; None when the entry or
    the file is not what it should be (the import then runs again and replaces it)."""
    from .importer import NeedsValue

    try:
        kind, *rest = pickle.loads(data)
    except Exception:  # a damaged entry: imported again, and replaced
        kind, rest = None, []
    if kind == "needs":
        message, name, hint, position = rest
        raise NeedsValue(message, name, hint=hint, position=position)
    if kind != "program":
        return None
    (pickled,) = rest
    try:
        with open(path, "rb") as f:
            program = _FileUnpickler(io.BytesIO(pickled), f).load()
    except (
        _Changed,
        OSError,
        pickle.UnpicklingError,
        EOFError,
        AttributeError,
        ImportError,
        TypeError,
        ValueError,
    ):
        return None
    return program if file_status(path) == status else None


def _stored(program, path: str | Path) -> bytes | None:
    """The entry of ``program``: its pickle, each large constant found in the file
    ``path`` as its place there; None when the file cannot be read again."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    buffer = io.BytesIO()
    try:
        _FilePickler(buffer, _tensor_index(data), data).dump(program)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return None
    return pickle.dumps(("program", buffer.getvalue()))


class _FilePickler(pickle.Pickler):
    """Pickles a Program, a large constant whose bytes are in the model file as a place
    in it (``("file", offset, size, dtype, shape, writeable)``)."""

    def __init__(self, file, index: dict[tuple[int, bytes], list[int]], data: bytes) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.index, self.data = index, data

    def persistent_id(self, obj):
        if type(obj) is not np.ndarray or obj.nbytes < REFERENCED_BYTES or obj.dtype.hasobject:
            return None
        if not obj.flags.c_contiguous:
            return None
        raw = obj.reshape(-1).view(np.uint8)
        for offset in self.index.get((raw.size, raw[:HEAD].tobytes()), ()):
            if np.array_equal(np.frombuffer(self.data, np.uint8, raw.size, offset), raw):
                return ("file", offset, raw.size, obj.dtype.str, obj.shape, bool(obj.flags.writeable))
        return None


class _FileUnpickler(pickle.Unpickler):
    """Reads the constants that :class:`_FilePickler` stored as places from ``file``."""

    def __init__(self, stream, file) -> None:
        super().__init__(stream)
        self.file = file

    def persistent_load(self, pid):
        tag, offset, size, dtype, shape, writeable = pid
        if tag != "file":
            raise pickle.UnpicklingError(f"unknown persistent id {tag!r}")
        raw = np.empty(size, np.uint8)
        self.file.seek(offset)
        if self.file.readinto(memoryview(raw)) != size:
            raise _Changed
        array = raw.view(np.dtype(dtype)).reshape(shape)
        array.flags.writeable = writeable
        return array


def _tensor_index(data: bytes) -> dict[tuple[int, bytes], list[int]]:
    """Where the ``raw_data`` of each large initializer of the main graph is in the
    serialised ModelProto ``data``, by (size, leading bytes)."""
    index: dict[tuple[int, bytes], list[int]] = {}
    for field, start, end in _fields(data, 0, len(data)):
        if field != 7:  # ModelProto.graph
            continue
        for g_field, g_start, g_end in _fields(data, start, end):
            if g_field != 5:  # GraphProto.initializer
                continue
            for t_field, t_start, t_end in _fields(data, g_start, g_end):
                if t_field == 9 and t_end - t_start >= REFERENCED_BYTES:  # TensorProto.raw_data
                    index.setdefault((t_end - t_start, data[t_start : t_start + HEAD]), []).append(t_start)
    return index


def _fields(data: bytes, pos: int, end: int):
    """``(field number, start, end)`` of each length-delimited field of the protobuf
    message in ``data[pos:end]`` (the wire format); stops at anything malformed."""
    while pos < end:
        tag, pos = _varint(data, pos, end)
        if tag is None:
            return
        wire = tag & 7
        if wire == 0:
            _, pos = _varint(data, pos, end)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = _varint(data, pos, end)
            if size is None or pos + size > end:
                return
            yield tag >> 3, pos, pos + size
            pos += size
        else:  # groups, or not protobuf
            return
        if pos is None or pos > end:
            return


def _varint(data: bytes, pos: int, end: int) -> tuple[int | None, int]:
    value = shift = 0
    while pos < end and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    return None, end


def import_path(
    path: str | Path,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    *,
    catalog=None,
    spec_path=None,
    bound: Mapping[str, np.ndarray] | None = None,
) -> tuple[object, str | None]:
    """``(program, key)`` of the ONNX file ``path`` as
    :func:`~byoc.onnx.model_import.import_program` imports it, remembered
    (:func:`import_file`)."""
    from ..api import load_catalog
    from .model_import import import_program, read_model

    catalog = catalog or load_catalog(spec_path=spec_path)

    def make():
        model = read_model(path)
        return import_program(model, shapes, catalog=catalog, spec_path=spec_path, bound=bound), model.whole

    return import_file(path, make, shapes=shapes, bound=bound, catalog=catalog)
