"""The parts of the keys under which a warm build finds the work of an earlier one: the
digest of an input file, a stamp of byoc's own code, of this machine's CPU, and of a
catalog's user files.

A model file's digest is remembered in the disk cache (kind ``digest``) under the
file's identity and status: device, inode, size, modification and change times in
nanoseconds. Any write to the file changes its change time, which no user call can
set back, so a remembered digest is found only for the bytes it was computed from;
hashing BERT-base's 437 MB again each run took a quarter of a second.

byoc's code is stamped by the path, size and modification time of every file of its
packages (Python, YAML, grammars, C): an edit to the importer, the generator or a
shipped spec makes every key new, so a development checkout never finds work that
older code did. It is computed once per process (a few milliseconds).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import importlib.util
import os
import platform
import stat
from collections.abc import Mapping
from pathlib import Path

from . import __version__
from .disk_cache import read_entry, write_entry

PACKAGES = ("byoc", "byoc.grammar", "byoc.spec", "byoc.generator", "byoc.runtime")
"""The packages whose files make up byoc's code (package-dir maps them to folders)."""
DIGEST_KIND = "file-digests"
CHUNK = 1 << 20


def file_status(path: str | Path) -> tuple[int, ...] | None:
    """What identifies the file's bytes without reading them: device, inode, size,
    modification and change times (ns); None for anything but a regular file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_digest(path: str | Path) -> tuple[str, tuple[int, ...]] | None:
    """``(sha256 hex digest, status)`` of the regular file at ``path``, the digest
    remembered under its status (see the module doc); None if it is not a regular
    file or cannot be read."""
    status = file_status(path)
    if status is None:
        return None
    found = _remembered(path, status)
    if found is not None:
        return found, status
    try:
        digest = file_sha256(path)
    except OSError:
        return None
    if file_status(path) != status:  # written to while it was read: no digest to remember
        return None
    write_entry(DIGEST_KIND, _digest_key(path, status), digest.encode("ascii"))
    return digest, status


def file_sha256(path: str | Path) -> str:
    """The SHA-256 (hex) of the file at ``path``, read a megabyte at a time: a model or
    its library is hundreds of megabytes, which reading whole first would allocate (and
    fault in) again."""
    digest = hashlib.sha256()
    chunk = bytearray(CHUNK)
    view = memoryview(chunk)
    with open(path, "rb") as f:
        while n := f.readinto(chunk):
            digest.update(view[:n])
    return digest.hexdigest()


def remembered_digest(path: str | Path) -> str | None:
    """The digest remembered for the file at ``path`` as it is now, or None: never
    computed here (a caller that has just read the file, and hashes what it read)."""
    status = file_status(path)
    return None if status is None else _remembered(path, status)


def _remembered(path: str | Path, status: tuple[int, ...]) -> str | None:
    found = read_entry(DIGEST_KIND, _digest_key(path, status))
    return found.decode("ascii") if found is not None and len(found) == 64 else None


def _digest_key(path: str | Path, status: tuple[int, ...]) -> str:
    return hashlib.sha256(repr((os.path.realpath(path), status)).encode("utf-8", "surrogatepass")).hexdigest()


@functools.cache
def code_stamp() -> str:
    """A digest of byoc's version and of the path, size and modification time of every
    file of its packages (not their bytecode)."""
    parts = [__version__]
    for package in PACKAGES:
        found = importlib.util.find_spec(package)
        for root in (found.submodule_search_locations or []) if found else []:
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
                for name in sorted(files):
                    if name.endswith((".pyc", ".pyo")):
                        continue
                    path = os.path.join(folder, name)
                    try:
                        st = os.stat(path)
                    except OSError:
                        continue
                    parts.append(f"{package}:{os.path.relpath(path, root)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


@functools.cache
def machine_stamp() -> str:
    """This machine's architecture, CPU model and CPU feature flags: what the probes and
    the host ISA options answer from."""
    lines = [platform.machine()]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features", "cpu family", "model\t")):
                    lines.append(line.strip())
                elif not line.strip() and len(lines) > 1:
                    break  # the first processor's block
    except OSError:
        lines.append(platform.processor())
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()


def catalog_stamp(catalog) -> str | None:
    """What identifies ``catalog``'s content: its key (a digest of the YAML texts it was
    loaded from) and its user files; None for a catalog built in code, which has no key:
    nothing made with it may be remembered."""
    if not getattr(catalog, "key", ""):
        return None
    digest = hashlib.sha256(catalog.key.encode("utf-8", "surrogatepass"))
    for f in catalog.user_files:
        digest.update(f"\0{f.path}\0{f.text}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def value_digest(value) -> str | None:
    """A digest of ``value`` (a spec, option values: dataclasses, mappings, sequences,
    sets and plain values) that is the same in every process: sets are sorted, which
    their repr is not (string hashes differ between processes). A function is its
    qualified name and any other object its repr (an op's reference, a codegen kind:
    byoc's code, which the code stamp covers); None when that repr is only an address."""
    parts: list[str] = []
    if not _canonical(value, parts):
        return None
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _canonical(value, out: list[str]) -> bool:
    if isinstance(value, str) and not isinstance(value, enum.Enum):  # a YAML scalar is the str it holds
        out.append(f"str:{str(value)!r}")
        return True
    if value is None or isinstance(value, (bool, int, float, bytes, enum.Enum)):
        out.append(f"{type(value).__name__}:{value!r}")
        return True
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(f"<{type(value).__qualname__}")
        for f in dataclasses.fields(value):
            out.append(f.name)
            if not _canonical(getattr(value, f.name), out):
                return False
        out.append(">")
        return True
    if isinstance(value, Mapping):
        out.append("{")
        for key, item in value.items():  # in order: a spec's mappings keep the file's
            if not (_canonical(key, out) and _canonical(item, out)):
                return False
        out.append("}")
        return True
    if isinstance(value, (set, frozenset)):
        texts = []
        for item in value:
            one: list[str] = []
            if not _canonical(item, one):
                return False
            texts.append("\0".join(one))
        out.extend(["(set", *sorted(texts), ")"])
        return True
    if isinstance(value, (list, tuple)):
        out.append("[")
        for item in value:
            if not _canonical(item, out):
                return False
        out.append("]")
        return True
    if callable(value) and hasattr(value, "__qualname__"):  # an op's reference: byoc's code, by name
        out.append(f"function:{getattr(value, '__module__', '')}.{value.__qualname__}")
        return True
    text = repr(value)  # an object of byoc's code (a codegen kind): its repr names it
    if " at 0x" in text:
        return False
    out.append(f"{type(value).__qualname__}:{text}")
    return True
