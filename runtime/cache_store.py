"""The cache root as a store with a size bound: what it holds, and least-recently-used
eviction.

The root (:func:`byoc.disk_cache.cache_dir`) holds entries of these kinds:

* ``build``: a compiled library (or an unlinked object), ``<root>/<xx>/<key>/`` (:mod:`byoc.runtime.build`);
* ``bundle``: a library unpacked from a bundle, ``<root>/bundles/<xx>/<digest>/``;
* ``spec``, ``validated``, ``parser``, ``compiler`` and ``check``: small files of
  parsed specs, validated catalogs and specs, Lark parser tables, compiler banners and
  the ONNX checker's passes (by model digest),
  ``<root>/{yaml,validated,lark,compiler,onnx-checked}/[<xx>/]<key>``
  (:mod:`byoc.disk_cache`, :mod:`byoc.spec.validated_cache`, the grammar's parser cache);
* ``digest``, ``import``, ``parsed`` and ``record``: model files' digests by their
  status, ONNX imports, DSL and ExampleJSON texts' Programs and the builds made from
  them, ``<root>/{file-digests,onnx-imports,parsed-texts,build-records}/<xx>/<key>``
  (:mod:`byoc.warm_keys`, :mod:`byoc.onnx.import_cache`, :mod:`byoc.parsed_texts`,
  :mod:`byoc.build_records`).

An entry's last use is its modification time: a build or bundle entry is touched
each time it is found. :func:`prune` removes the least recently used entries until
the total is within the bound, ``$BYOC_CACHE_MAX`` (``500M``, ``2G``, ``0`` for no
bound; default :data:`DEFAULT_MAX`). A successful build prunes when the total is
over the bound (at most once a minute per process), but never an entry used in the
last :data:`KEEP_RECENT_S` seconds: another process may be about to load it. ``tmp/`` (builds in progress) is never an
entry.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from byoc.atomic import write_file
from byoc.disk_cache import cache_dir
from byoc.errors import UsageError
from byoc.warm_keys import file_sha256, file_status

from .elf_check import NotLoadable, check_object_file, check_shared_object

DEFAULT_MAX = 2 << 30
"""The default bound of the cache, 2 GiB: a few hundred builds of real models."""
KEEP_RECENT_S = 60.0
"""An entry used this recently is never evicted by a build's automatic pruning."""
_KINDS = {
    "bundles": "bundle",
    "yaml": "spec",
    "validated": "validated",
    "parsed-texts": "parsed",
    "lark": "parser",
    "compiler": "compiler",
    "onnx-checked": "check",
    "file-digests": "digest",
    "onnx-imports": "import",
    "build-records": "record",
}
KINDS = ("build", *_KINDS.values())
"""Every kind of entry, in the order ``byoc cache info`` lists them."""
_HEX2 = re.compile(r"[0-9a-f]{2}\Z")
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)i?b?\s*\Z", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass(frozen=True, slots=True)
class Entry:
    """One cache entry: its kind, path, bytes on disk and last use (a timestamp)."""

    kind: str
    path: Path
    size: int
    used: float


def parse_size(text: str, what: str = "$BYOC_CACHE_MAX") -> int:
    """A size in bytes from ``123``, ``500M``, ``2G``, ``1.5GiB`` (units of 1024)."""
    m = _SIZE.match(text)
    if m is None:
        raise UsageError(
            f"{what} is {text!r}, not a size",
            hint="write bytes or a number with K, M, G or T (units of 1024): 500M, 2G; 0 for no bound",
        )
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def bound(env: Mapping[str, str] | None = None) -> int:
    """The cache's size bound in bytes, from ``$BYOC_CACHE_MAX``; 0: no bound."""
    text = _bound_text(env)
    return parse_size(text) if text else DEFAULT_MAX


def bound_is_set(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``$BYOC_CACHE_MAX`` sets the bound (else it is :data:`DEFAULT_MAX`)."""
    return bool(_bound_text(env))


def _bound_text(env: Mapping[str, str] | None) -> str:
    return (os.environ if env is None else env).get("BYOC_CACHE_MAX", "").strip()


def human(size: float) -> str:
    """``size`` bytes as people read it: 812 B, 4.2 MiB, 1.9 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover - the loop returns


def _size(path: Path) -> int:
    if not path.is_dir():
        return path.lstat().st_size
    total = 0
    for top, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:  # removed meanwhile
                pass
    return total


def _entry(kind: str, path: Path) -> Entry | None:
    try:
        return Entry(kind, path, _size(path), path.lstat().st_mtime)
    except OSError:  # removed by another process while listed
        return None


def entries(root: Path | None = None) -> list[Entry]:
    """Every entry of the cache at ``root`` (default: the cache root)."""
    root = cache_dir() if root is None else root
    found: list[Entry] = []
    if not root.is_dir():
        return found
    for top in sorted(root.iterdir()):
        kind = "build" if _HEX2.match(top.name) else _KINDS.get(top.name)
        if kind is None or not top.is_dir():
            continue
        if kind == "build":  # <root>/<xx>/<key>/
            paths = sorted(top.iterdir())
        else:  # <root>/<kind>/<xx>/<key>, or <root>/<kind>/<key> (the parser tables)
            paths = []
            for p in sorted(top.iterdir()):
                paths += sorted(p.iterdir()) if _HEX2.match(p.name) and p.is_dir() else [p]
        found += [e for e in (_entry(kind, p) for p in paths) if e is not None]
    return found


def touch(path: Path) -> None:
    """Mark an entry as used now (a cache that cannot be written only loses the order)."""
    try:
        os.utime(path)
    except OSError:
        pass


def remove(entry: Entry, root: Path) -> bool:
    """Remove ``entry``: renamed into ``tmp/`` first, so no reader sees half of it."""
    try:
        (root / "tmp").mkdir(parents=True, exist_ok=True)
        grave = Path(tempfile.mkdtemp(prefix="evicted.", dir=root / "tmp"))
        os.rename(entry.path, grave / "entry")
    except OSError:  # gone already, or a read-only cache
        return False
    shutil.rmtree(grave, ignore_errors=True)
    return True


def prune(limit: int, root: Path | None = None, keep_recent: float = 0.0) -> list[Entry]:
    """Remove least-recently-used entries until the cache holds at most ``limit``
    bytes (0: no bound), sparing those used in the last ``keep_recent`` seconds;
    the removed entries."""
    root = cache_dir() if root is None else root
    if limit <= 0:
        return []
    found = sorted(entries(root), key=lambda e: e.used)
    total = sum(e.size for e in found)
    now = time.time()
    removed = []
    for e in found:
        if total <= limit:
            break
        if now - e.used < keep_recent:
            continue
        if remove(e, root):
            total -= e.size
            removed.append(e)
    return removed


PRUNE_EVERY_S = 60.0
"""A process prunes after a build at most this often: listing a large cache takes
tens of milliseconds, more than a small build."""
_last_pruned: dict[Path, float] = {}


def prune_after_build(root: Path) -> None:
    """The automatic pruning after a build: to ``$BYOC_CACHE_MAX``, sparing recent
    entries, at most once a minute per process; silent, and never a reason for a
    build to fail (``byoc cache info`` reports a bad bound)."""
    now = time.monotonic()
    if now - _last_pruned.get(root, -PRUNE_EVERY_S) < PRUNE_EVERY_S:
        return
    _last_pruned[root] = now
    try:
        prune(bound(), root, keep_recent=KEEP_RECENT_S)
    except Exception:
        pass


def intact(library: Path) -> bool:
    """True when the cached library exists, matches its recorded sha256 and is a whole
    shared object for this machine (an entry cut short with its digest recomputed
    would otherwise be mapped past its end: SIGBUS), or for an object file (``.o``), a
    whole relocatable object for this machine.

    The digest is recomputed only when the file is not the one last found whole: its
    device, inode, size, modification and change times are recorded beside it (``.checked``, see
    :func:`checked_stamp`) when it is written or verified, as make and ccache trust a file's
    metadata. A library holding a model's weights is 100 MB, and hashing it took a
    tenth of a second of every cached build."""
    try:
        recorded = (library.parent / f"{library.name}.sha256").read_text().strip()
        stamp = library.parent / f"{library.name}.checked"
        seen = checked_stamp(library, recorded)
        if _read_text(stamp) != seen:
            if file_sha256(library) != recorded:
                return False
            _write_quietly(stamp, seen)
        (check_object_file if library.suffix == ".o" else check_shared_object)(library)
        return True
    except (OSError, NotLoadable):
        return False


def checked_stamp(library: Path, digest: str) -> str:
    """What identifies ``library`` as the file whose sha256 was found to be ``digest``:
    the digest and the file's status (:func:`byoc.warm_keys.file_status`, as the
    remembered digests of model files use)."""
    return f"{digest} {file_status(library)}\n"


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _write_quietly(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (a temporary file renamed), or nothing if the cache is
    read-only: the stamp only saves the next build time."""
    try:
        write_file(path, text.encode())
    except (OSError, UsageError):
        pass
