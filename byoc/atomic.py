"""Atomic outputs: a reader sees either the old file (or directory) or the complete
new one, never a partial one, even if byoc is killed mid-way.

Files are written to a temporary sibling, flushed, then renamed over the target.
Directories are filled under a temporary name, then swapped in; an existing target
directory is only ever replaced if byoc wrote it (it holds :data:`MARKER`).
"""

from __future__ import annotations

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
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _default_mode(directory=False))  # mkstemp makes it private
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
    if target.exists():
        if not target.is_dir():
            raise UsageError(f"{target} exists and is not a directory", hint="choose another -o path")
        if any(target.iterdir()) and not (target / MARKER).exists():
            raise UsageError(
                f"refusing to replace {target}: it is not empty and was not written by byoc",
                hint="choose a new or empty directory for -o",
            )
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent))
    try:
        for name, data in files.items():
            if "/" in name or "\\" in name or name in ("", ".", "..", MARKER):
                raise UsageError(f"invalid artifact name {name!r}")
            with open(staging / name, "wb") as handle:
                handle.write(data.encode("utf-8") if isinstance(data, str) else data)
                handle.flush()
                os.fsync(handle.fileno())
        (staging / MARKER).write_text("written by byoc; safe for byoc to replace\n")
        os.chmod(staging, _default_mode(directory=True))  # mkdtemp makes it private
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=parent))
            os.replace(target, old / "previous")
            os.replace(staging, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [target / name for name in files]


def _default_mode(directory: bool) -> int:
    """The mode a plain open() or mkdir() would give, under the process umask."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


def _check_writable(directory: Path) -> None:
    if not directory.is_dir():
        raise UsageError(f"output directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write to {directory}: permission denied", hint="choose a writable location")


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
