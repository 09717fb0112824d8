"""Reading input files safely: only regular files, and never more than a limit.

Every reader of an input file (graph text, spec YAML, ``.npz`` archives, bundles, ONNX
models and test data) goes through :func:`read_limited`. It refuses a FIFO, a device,
a socket or a directory by its ``os.stat`` *before* opening it (opening a FIFO blocks
until a writer comes; ``/dev/zero`` never ends), opens it without blocking, checks the
open file again (the path may have changed in between) and reads at most ``limit + 1``
bytes, so a file larger than its limit is refused before its bytes are held.
Standard input (``-``) is read by :func:`read_stdin` with the same limit.

Zip archives (``.npz`` files, weights files, bundles) are checked member by member
before anything is decompressed into memory: :func:`check_zip_members` refuses
duplicate member names, a member or an archive whose declared size exceeds its limit,
and a member that would expand more than :data:`MAX_RATIO` times (a zip bomb);
:func:`read_member` then decompresses a member in chunks, counting the bytes it really
gives, so that a header that lies about a size is found out before the bytes are held.

The limits, one per surface, are documented in docs/input-limits.md.
"""

from __future__ import annotations

import os
import stat
import sys
import zipfile
from collections.abc import Callable

from .errors import ByocError

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

GRAPH_TEXT_LIMIT = 64 * MiB
"""A ``.graph`` or ``.examplejson`` file, or standard input."""
SPEC_LIMIT = 4 * MiB
"""A backend spec or an op catalog (``ops.yaml``); the largest shipped spec is 101 KiB."""
NPZ_LIMIT = 2 * GiB
"""An ``.npz`` archive (``--inputs``, a weights file, a JSON module's constants): the file,
and the sum of its members' sizes once decompressed."""
BUNDLE_LIMIT = 4 * GiB
"""A ``.byoc`` bundle file."""
BUNDLE_MEMBER_LIMIT = 2 * GiB
"""One member of a bundle, decompressed."""
MANIFEST_LIMIT = 16 * MiB
"""A bundle's ``manifest.json``, decompressed."""
ONNX_LIMIT = 2 * GiB
"""An ONNX model file (protobuf's own limit for one message)."""
TENSOR_LIMIT = 2 * GiB
"""One ONNX test data file (``input_<k>.pb``, ``output_<k>.pb``)."""
LIBRARY_LIMIT = 2 * GiB
"""A compiled library that a build puts into a bundle."""

MAX_RATIO = 200
"""A zip member may expand at most this many times its compressed size ..."""
RATIO_FLOOR = 16 * MiB
"""... unless it expands to at most this much (small, very regular members are fine)."""
CHUNK = 1 * MiB

Error = Callable[..., ByocError]
"""Builds the error to raise: ``error(message, hint=...)``."""


def size_text(n: int) -> str:
    """``n`` bytes for a message: ``64 MiB``, ``3.2 GiB``, ``512 bytes``."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def file_kind(mode: int) -> str | None:
    """What a non-regular file is (``a FIFO (named pipe)``), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


NOT_REGULAR_HINT = "byoc reads regular files only; save the data to a file and name that"


def check_regular(path: str | os.PathLike[str], what: str, error: Error) -> os.stat_result:
    """The ``os.stat`` of ``path``, which must be a regular file (links are followed);
    ``what`` names it in messages ("graph file 'x.graph'")."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL character in the path
        raise error(f"cannot read {what}: {exc}") from None
    kind = file_kind(st.st_mode)
    if kind is not None:
        raise not_regular(what, kind, error)
    return st


def not_regular(what: str, kind: str, error: Error) -> ByocError:
    """The error for a file that is ``kind`` (:func:`file_kind`); a directory is said to be
    one in the words of the system's error (``Is a directory``)."""
    if kind == "a directory":
        return error(f"cannot read {what}: Is a directory", hint=NOT_REGULAR_HINT)
    return error(f"{what} is not a regular file: it is {kind}", hint=NOT_REGULAR_HINT)


def too_large(what: str, size: int | None, limit: int, error: Error) -> ByocError:
    has = f"{size_text(size)}, more than" if size is not None else "larger than"
    return error(
        f"{what} is {has} the {size_text(limit)} byoc reads",
        hint="see docs/input-limits.md for byoc's size limits",
    )


def read_limited(path: str | os.PathLike[str], what: str, limit: int, error: Error) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them: a larger file,
    or one that is not regular, is refused before its bytes are read."""
    st = check_regular(path, what, error)
    if st.st_size > limit:
        raise too_large(what, st.st_size, limit, error)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror or exc}") from None
    with open(fd, "rb", buffering=0, closefd=True) as f:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:  # replaced since it was looked at
            raise not_regular(what, kind, error)
        try:
            data = _read_at_most(f, limit + 1, first=st.st_size + 1)
        except OSError as exc:
            raise error(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise too_large(what, None, limit, error)
    return data


def read_stdin(what: str, limit: int, error: Error) -> bytes:
    """Standard input's bytes, at most ``limit`` of them: a pipe, a file or a terminal (a
    directory or another device, such as ``/dev/zero``, is refused)."""
    stream = sys.stdin.buffer if sys.stdin is not None else None
    if stream is None:
        raise error(f"cannot read {what}: there is no standard input")
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError):
        mode = stat.S_IFIFO
    if stat.S_ISDIR(mode):
        raise not_regular(what, "a directory", error)
    if (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)) and not stream.isatty():  # /dev/zero never ends
        raise not_regular(what, file_kind(mode) or "a device", error)
    try:
        data = _read_at_most(stream, limit + 1, first=CHUNK)
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise too_large(what, None, limit, error)
    return data


def _read_at_most(f, n: int, *, first: int) -> bytes:
    """Up to ``n`` bytes of ``f``: ``first`` in one read (a regular file's size plus one,
    so that one read usually ends it), then chunks until the end or ``n``."""
    chunks: list[bytes] = []
    total = 0
    want = max(1, min(n, first))
    while total < n:
        chunk = f.read(want)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        want = min(n - total, CHUNK)
    return b"".join(chunks)


# ----------------------------------------------------------------------- zip archives


def check_zip_members(
    archive: zipfile.ZipFile, what: str, total_limit: int, member_limit: int, error: Error
) -> list[zipfile.ZipInfo]:
    """The members of ``archive``, after refusing duplicate names, a member declaring more
    than ``member_limit`` bytes or expanding more than :data:`MAX_RATIO` times, and
    members declaring more than ``total_limit`` bytes in all."""
    infos = archive.infolist()
    seen: set[str] = set()
    total = 0
    for info in infos:
        if info.filename in seen:
            raise error(
                f"{what} holds two members named {info.filename!r}",
                hint="an archive names each member once; rewrite it",
            )
        seen.add(info.filename)
        check_member_size(info, what, member_limit, error)
        total += info.file_size
        if total > total_limit:
            raise error(
                f"{what}: its members expand to more than the {size_text(total_limit)} byoc reads",
                hint="see docs/input-limits.md for byoc's size limits",
            )
    return infos


def check_member_size(info: zipfile.ZipInfo, what: str, limit: int, error: Error) -> None:
    """Refuse a member whose declared size exceeds ``limit`` or :data:`MAX_RATIO` times its
    compressed size (above :data:`RATIO_FLOOR`)."""
    name = info.filename
    if info.file_size > limit:
        raise error(
            f"{what}: member {name!r} expands to {size_text(info.file_size)}, more than the "
            f"{size_text(limit)} byoc reads",
            hint="see docs/input-limits.md for byoc's size limits",
        )
    if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        raise error(
            f"{what}: member {name!r} expands {info.file_size // max(info.compress_size, 1)} times "
            f"(from {size_text(info.compress_size)} to {size_text(info.file_size)}); "
            f"byoc refuses more than {MAX_RATIO} times, a zip bomb",
            hint="store large members uncompressed (np.savez, not np.savez_compressed)",
        )


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, what: str, error: Error) -> bytes:
    """Member ``info`` decompressed in chunks, refused as soon as it gives more bytes than
    it declares (checked by :func:`check_member_size` before)."""
    with archive.open(info) as member:
        return b"".join(member_chunks(member, info, what, error))


def member_chunks(member, info: zipfile.ZipInfo, what: str, error: Error, done: int = 0):
    """The rest of the open member ``info`` (``done`` bytes of it read already), chunk by
    chunk, refused as soon as it gives more bytes than it declares: a compressed
    member's declared size is only a claim."""
    while chunk := member.read(CHUNK):
        done += len(chunk)
        if done > info.file_size:
            raise error(
                f"{what}: member {info.filename!r} expands to more than the "
                f"{size_text(info.file_size)} it declares",
                hint="the archive is corrupt or hostile",
            )
        yield chunk
