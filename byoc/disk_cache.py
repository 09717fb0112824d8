"""byoc's cache directory, and a small content-keyed disk cache for work that every
process would otherwise repeat: parsing the spec YAML files and building the Lark
parsers (together about a third of a warm ``byoc run``).

The cache root is ``$BYOC_CACHE_DIR``, else ``$XDG_CACHE_HOME/byoc``, else
``~/.cache/byoc``; compiled libraries and unpacked bundles live there too. An entry
is named by the SHA-256 of everything its content depends on (the input text and the
versions of the libraries and the Python that made it), so a stale entry is never
found, only orphaned. Entries are pickles: the cache is trusted as the build cache's
shared libraries are, which byoc loads and runs.

The cache is an accelerator, never a dependency: an entry that cannot be read or
decoded, or decodes to a value of the wrong type (``expect``), or lacks its header
(the format, kind and key it was written under), is made again and replaced, and one that cannot be written (a read-only or full disk) is
skipped without a word. Entries are written to a temporary file and renamed, so a
concurrent reader sees a whole entry or none.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

FORMAT = "byoc-disk-cache-2"
"""Part of every key; change it when the layout of an entry changes."""


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The cache root: ``$BYOC_CACHE_DIR``, else ``$XDG_CACHE_HOME/byoc``, else ``~/.cache/byoc``."""
    env = os.environ if env is None else env
    if env.get("BYOC_CACHE_DIR"):
        return Path(env["BYOC_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "byoc"


def entry_key(*parts: str) -> str:
    """The SHA-256 of ``parts``, the cache format and the Python version."""
    digest = hashlib.sha256()
    for part in (FORMAT, sys.version.split()[0], *parts):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()


def read_entry(kind: str, key: str) -> bytes | None:
    """The bytes stored under ``key`` in the ``kind`` folder (without the header), or
    None: missing, unreadable, or not written under this kind and key. A found entry
    is touched: its modification time is its last use."""
    path = cache_dir() / kind / key[:2] / key
    header = f"{FORMAT} {kind} {key}\n".encode()
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if not data.startswith(header):
        return None
    try:
        os.utime(path)  # its last use, for the cache's least-recently-used eviction
    except OSError:
        pass
    return data[len(header) :]


def write_entry(kind: str, key: str, data: bytes) -> None:
    """Store ``data`` under ``key`` (a temporary file renamed into place, so a reader
    sees a whole entry or none); a cache that cannot be written is skipped."""
    path = cache_dir() / kind / key[:2] / key
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(f"{FORMAT} {kind} {key}\n".encode())
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception:  # a cache that cannot be written only costs the next process time
        pass


def cached(
    kind: str,
    key: str,
    make: Callable[[], T],
    *,
    dump: Callable[[T], bytes | None] = pickle.dumps,
    load: Callable[[bytes], T] = pickle.loads,
    expect: type | tuple[type, ...] = object,
) -> T:
    """The value of entry ``key`` in the cache's ``kind`` folder; on a miss, ``make()``'s
    value, stored with ``dump`` for the next process (a ``dump`` that returns None keeps
    nothing: a value that may not be kept). ``load`` turns an entry's bytes
    back into a value; one that is not an instance of ``expect`` is a miss (a damaged or
    foreign entry must cost a rebuild, never an error), and a made value that is not
    one is not stored. An exception from ``make`` propagates, and nothing is stored."""
    data = read_entry(kind, key)
    if data is not None:
        try:
            found = load(data)
            if isinstance(found, expect):
                return found
        except Exception:  # undecodable: made again, and replaced
            pass
    value = make()
    if isinstance(value, expect):
        try:
            data = dump(value)
            if data is not None:
                write_entry(kind, key, data)
        except Exception:  # a value that cannot be stored only costs the next process time
            pass
    return value
