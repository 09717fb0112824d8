"""Atomic outputs: a reader sees either the old file (or directory) or the complete
new one, never a partial one, even if byoc is killed mid-way.

Files are written to a temporary sibling, flushed, then renamed over the target.
Directories are filled under a temporary name, then swapped in; an existing target
directory is only ever replaced if byoc wrote it (it holds :data:`MARKER`). On Linux
the swap is one ``renameat2(RENAME_EXCHANGE)`` call, so even a kill between the two
halves of a swap cannot leave the target missing; elsewhere (or on a file system
without it) the old directory is renamed aside and the new one renamed in, and a
kill between those two renames leaves the target absent, with the old output kept
beside it (``.<name>.*.old/previous``).

A kill leaves at most a hidden ``.<name>.*.tmp`` sibling behind, never a partial
target. A failure to write (no space, a read-only or missing directory) is a
:class:`~byoc.errors.UsageError` naming the path and the system's reason.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .errors import UsageError

MARKER = ".byoc-output"
"""A file in every directory byoc writes; byoc refuses to replace a directory without it."""


def write_file(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename)."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    _check_writable(parent)
    if _exists(target, "choose another output path") and not target.is_file():
        # the rename would replace /dev/null itself
        what = "Is a directory" if target.is_dir() else "not a regular file (a device, pipe or socket)"
        raise UsageError(f"cannot write {target}: {what}", hint="choose another output path")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, default_mode(directory=False))  # mkstemp makes it private
        os.replace(tmp, target)
    except OSError as exc:
        _remove(tmp)
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        _remove(tmp)
        raise


def write_directory(path: str | Path, files: Mapping[str, str | bytes]) -> list[Path]:
    """Replace directory ``path`` by one holding exactly ``files`` (name -> content).

    Returns the written paths. ``path`` may not exist yet; if it exists it must be
    empty or an earlier byoc output directory.
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"cannot create {parent}: {exc.strerror or exc}", hint="choose another -o path"
        ) from None
    _check_writable(parent)
    if _exists(target, "choose another -o path"):
        if not target.is_dir():
            raise UsageError(f"{target} exists and is not a directory", hint="choose another -o path")
        if any(target.iterdir()) and not (target / MARKER).exists():
            raise UsageError(
                f"refusing to replace {target}: it is not empty and was not written by byoc",
                hint="choose a new or empty directory for -o",
            )
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        for name, data in files.items():
            if "/" in name or "\\" in name or name in ("", ".", "..", MARKER):
                raise UsageError(f"invalid artifact name {name!r}")
            try:
                handle = open(staging / name, "wb")
            except OSError as exc:  # a name too long for the file system, from a graph's name
                raise UsageError(
                    f"cannot write {target / name}: {exc.strerror or exc}",
                    hint="a graph or region name becomes part of a file name: choose a shorter one"
                    if exc.errno == errno.ENAMETOOLONG
                    else None,
                ) from None
            with handle:
                handle.write(data.encode("utf-8") if isinstance(data, str) else data)
                handle.flush()
                os.fsync(handle.fileno())
        (staging / MARKER).write_text("written by byoc; safe for byoc to replace\n")
        os.chmod(staging, default_mode(directory=True))  # mkdtemp makes it private
        if not target.exists():
            os.replace(staging, target)
        elif _exchange(staging, target):
            shutil.rmtree(staging, ignore_errors=True)  # it now holds the old output
        else:
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=parent))
            os.replace(target, old / "previous")
            os.replace(staging, target)
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [target / name for name in files]


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap paths ``a`` and ``b`` atomically (Linux ``renameat2``); False when this
    system or file system cannot, so the caller falls back to two renames."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EPERM):
        return False
    raise OSError(code, os.strerror(code), str(b))


def default_mode(directory: bool) -> int:
    """The mode a plain open() or mkdir() would give, under the process umask."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


def _exists(path: Path, hint: str) -> bool:
    """Whether ``path`` exists; a path the system cannot even look up (a name longer
    than the file system allows, ENAMETOOLONG) is a UsageError rather than an OSError."""
    try:
        path.stat()
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            return False
        raise UsageError(f"cannot use {path}: {exc.strerror or exc}", hint=hint) from None
    return True


def _check_writable(directory: Path) -> None:
    if not _exists(directory, "choose another output path") or not directory.is_dir():
        raise UsageError(f"output directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write to {directory}: permission denied", hint="choose a writable location")


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
