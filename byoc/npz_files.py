"""Reading and writing ``.npz`` archives safely: never unpickling, every failure a
ByocError.

Three surfaces read archives: ``byoc run --inputs`` (a :class:`~byoc.errors.UsageError`),
a graph's weights file (a located :class:`~byoc.errors.GraphError`) and a JSON module's
large constants (a :class:`~byoc.errors.RuntimeFailure`); each calls :func:`read_npz`
with the error to raise and a phrase naming the file.

bfloat16 entries. An ``.npz`` holds ``.npy`` members, whose header names a numpy dtype
by its type string; ml_dtypes' bfloat16 has none of its own (``np.savez`` writes it as
``|V2``, raw bytes that read back as no number), and a pickled dtype is never read. So
byoc stores a bfloat16 array as its bits, a ``uint16`` entry of the same shape, and
lists the names of such entries in one more entry, :data:`BFLOAT16_MARKER`: a 1-D
array of strings (``<U``), sorted. :func:`npz_bytes` writes that form and
:func:`read_npz` gives the entries back as bfloat16 arrays (a view, no copy) and drops
the marker; a marker that is not such a list, names a missing entry or one that is not
``uint16``, or an ``|V2`` entry (bfloat16 saved by ``np.savez`` directly) is an error.
bool and float16 have numpy type strings (``|b1``, ``<f2``) and are stored as they are.
A weights file's digest is that of these bytes, so it is the same on every write.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from .errors import ByocError
from .input_files import NPZ_LIMIT, check_zip_members, member_chunks, read_limited, size_text
from .ir import numpy_dtype

BFLOAT16 = numpy_dtype("bfloat16")

NEVER_UNPICKLES = "byoc never unpickles; save plain arrays with np.savez"

NPY_MAGIC = b"\x93NUMPY"
HEADER_BYTES = 1 << 16
"""Enough of a member to hold its ``.npy`` header (numpy reads at most 10,000 bytes of one)."""

BFLOAT16_MARKER = "__byoc_bfloat16__"
"""The entry that lists the archive's bfloat16 entries (stored as their uint16 bits)."""
BFLOAT16_HINT = (
    f"store a bfloat16 array as its bits, array.view(np.uint16), and list its name in an entry "
    f"{BFLOAT16_MARKER!r} (a 1-D array of str); byoc.npz_files.npz_bytes writes that form"
)


@dataclass(frozen=True)
class ReadWeights:
    """A weights file held in memory already read: the digest of its bytes and its
    arrays. An import in memory hands its weights over so, instead of the archive it
    just wrote, which the parser would hash and unpack again (0.15 s for ResNet-50)."""

    sha256: str
    arrays: Mapping[str, np.ndarray]


def read_npz(
    source: str | os.PathLike[str] | bytes | BinaryIO, what: str, error: Callable[..., ByocError]
) -> dict[str, np.ndarray]:
    """Every array of the .npz archive at the path ``source`` (or in its bytes, or in an
    open binary file); ``what`` names it in messages ("--inputs x.npz"),
    ``error(message, hint=...)`` builds the error to raise.

    A path is read by :func:`~byoc.input_files.read_limited` (a regular file of at most
    :data:`~byoc.input_files.NPZ_LIMIT` bytes), and the archive's members are checked
    before numpy reads them: see :func:`_check_archive`."""
    if isinstance(source, (str, os.PathLike)):
        data = read_limited(source, what, NPZ_LIMIT, error)
    elif isinstance(source, bytes):
        data = source
    else:
        data = source.read()
    if data.startswith(NPY_MAGIC):
        raise error(f"{what} is a single array, not an .npz archive", hint="save with np.savez")
    try:
        _check_archive(data, what, error)
        loaded = np.load(io.BytesIO(data), allow_pickle=False)
        if not hasattr(loaded, "files"):  # a .npy file: one plain array, not a context manager
            raise error(f"{what} is a single array, not an .npz archive", hint="save with np.savez")
        with loaded:
            arrays = {key: loaded[key] for key in loaded.files}
    except ByocError:
        raise
    except ValueError as exc:
        raise error(f"{what}: {exc}", hint=NEVER_UNPICKLES) from None
    except (OSError, EOFError) as exc:
        raise error(f"{what}: cannot read it as .npz ({exc})") from None
    except Exception as exc:  # zipfile and numpy's format module raise assorted errors on corrupt files
        raise error(f"{what} is not a valid .npz file ({type(exc).__name__}: {exc})") from None
    return _with_bfloat16(arrays, what, error)


def _check_archive(data: bytes, what: str, error: Callable[..., ByocError]) -> None:
    """Refuse a zip bomb before numpy decompresses it: duplicate member names, members
    declaring more than :data:`NPZ_LIMIT` bytes in all or expanding too much
    (:func:`~byoc.input_files.check_zip_members`), a compressed member that gives more
    bytes than it declares, and an ``.npy`` header declaring more data than its member
    holds (numpy would allocate the header's shape first). Not a zip archive: numpy's
    own error follows."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        return
    with archive:
        for info in check_zip_members(archive, what, NPZ_LIMIT, NPZ_LIMIT, error):
            with archive.open(info) as member:
                head = member.read(HEADER_BYTES)
                _check_npy_header(head, info, what, error)
                if info.compress_type != zipfile.ZIP_STORED:  # count what it really expands to
                    for _ in member_chunks(member, info, what, error, len(head)):
                        pass


def _check_npy_header(head: bytes, info: zipfile.ZipInfo, what: str, error: Callable[..., ByocError]) -> None:
    """Refuse an ``.npy`` member whose header declares more data than the member holds."""
    stream = io.BytesIO(head)
    try:
        version = np.lib.format.read_magic(stream)
        read_header = (
            np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read_header(stream)
    except Exception:  # not an .npy header, or a malformed one: numpy says so when it reads it
        return
    if dtype.hasobject:  # pickled: refused when read
        return
    count = 1
    for dim in shape:
        count *= int(dim)
    declared = count * dtype.itemsize
    if stream.tell() + declared > info.file_size:
        raise error(
            f"{what}: entry {info.filename!r} declares {dtype}{list(shape)}, {size_text(declared)} "
            f"of data, but the member holds {size_text(max(info.file_size - stream.tell(), 0))}",
            hint="the archive is truncated or hostile; save it again with np.savez",
        )


def _with_bfloat16(
    arrays: dict[str, np.ndarray], what: str, error: Callable[..., ByocError]
) -> dict[str, np.ndarray]:
    """``arrays`` with the entries that :data:`BFLOAT16_MARKER` lists viewed as bfloat16,
    and the marker dropped (see the module doc)."""
    marker = arrays.pop(BFLOAT16_MARKER, None)
    names: list[str] = []
    if marker is not None:
        if marker.ndim != 1 or marker.dtype.kind != "U":
            raise error(
                f"{what}: entry {BFLOAT16_MARKER!r} is {marker.dtype}{list(marker.shape)}, "
                "not a list of entry names",
                hint=BFLOAT16_HINT,
            )
        names = [str(name) for name in marker]
    for name in names:
        array = arrays.get(name)
        if array is None:
            raise error(
                f"{what}: {BFLOAT16_MARKER!r} names the entry {name!r}, which it lacks", hint=BFLOAT16_HINT
            )
        if array.dtype != np.uint16:
            raise error(
                f"{what}: entry {name!r} is listed as bfloat16, so it must hold uint16 bits, "
                f"but it is {array.dtype}",
                hint=BFLOAT16_HINT,
            )
        arrays[name] = array.view(BFLOAT16)
    for name, array in arrays.items():
        if array.dtype.kind == "V" and name not in names:
            raise error(
                f"{what}: entry {name!r} holds raw {array.dtype} values, not numbers "
                "(np.savez writes a bfloat16 array so)",
                hint=BFLOAT16_HINT,
            )
    return arrays


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """The bytes of an uncompressed .npz archive holding ``arrays`` (for an atomic write);
    bfloat16 arrays are stored as their bits, listed in :data:`BFLOAT16_MARKER`."""
    if BFLOAT16_MARKER in arrays:
        raise ValueError(f"{BFLOAT16_MARKER!r} is reserved for byoc's list of bfloat16 entries")
    stored = dict(arrays)
    halves = sorted(name for name, array in arrays.items() if array.dtype == BFLOAT16)
    for name in halves:
        # not np.ascontiguousarray, which makes a rank-0 array shape (1,)
        stored[name] = np.asarray(arrays[name], order="C").view(np.uint16)
    if halves:
        stored[BFLOAT16_MARKER] = np.array(halves, dtype=str)
    return _npz_archive(stored)


def _npz_archive(arrays: Mapping[str, np.ndarray]) -> bytes:
    """What ``np.savez(buffer, **arrays)`` writes (the same bytes), from a mapping: an
    entry may have any name, ``file`` and ``allow_pickle`` too, which ``np.savez`` takes
    as its own arguments."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
    return buffer.getvalue()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
