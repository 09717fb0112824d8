"""Compile generated C and C++ into shared libraries, with a content-addressed cache.

* The compiler is ``$CC`` (C) or ``$CXX`` (C++) when set, else the spec's; ``$CFLAGS``
  (C) or ``$CXXFLAGS`` (C++) are appended to the spec's flags.
* Include paths and ``libtvm_ffi`` come from ``tvm_ffi.libinfo``.
* Libraries are cached under ``$BYOC_CACHE_DIR``, else ``$XDG_CACHE_HOME/byoc``, else
  ``~/.cache/byoc``, keyed by a sha256 of the sources, the command line and the
  compiler's version. A build goes to a temporary name and is renamed into place,
  so processes that build the same source at once never see a partial library.
  Each entry carries a sha256 of its library; a corrupted entry is rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from byoc.errors import BuildError

CONTEXT_LINES = 3


@dataclass(frozen=True, slots=True)
class Toolchain:
    """What compiles one artifact: the compiler command and its flags."""

    compiler: tuple[str, ...]
    flags: tuple[str, ...]
    language: str  # "c" or "c++"


def toolchain(
    language: str,
    spec_compiler: str,
    std: str | None,
    flags: Sequence[str],
    env: Mapping[str, str] | None = None,
) -> Toolchain:
    env = os.environ if env is None else env
    cplusplus = language in ("c++", "cpp", "cxx")
    override = env.get("CXX" if cplusplus else "CC")
    compiler = tuple(shlex.split(override)) if override else (spec_compiler,)
    extra = tuple(shlex.split(env.get("CXXFLAGS" if cplusplus else "CFLAGS", "")))
    std_flag = (f"-std={std}",) if std else ()
    return Toolchain(compiler, std_flag + tuple(flags) + extra, "c++" if cplusplus else "c")


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("BYOC_CACHE_DIR"):
        return Path(env["BYOC_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "byoc"


@lru_cache(maxsize=16)
def compiler_version(compiler: tuple[str, ...]) -> str:
    """The compiler's ``--version`` banner (part of the cache key); raises BuildError if missing."""
    if shutil.which(compiler[0]) is None:
        raise BuildError(
            f"C/C++ compiler {compiler[0]!r} not found",
            hint="install one (Debian/Ubuntu: apt-get install build-essential) or point $CC / $CXX at yours",
        )
    try:
        proc = subprocess.run([*compiler, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"cannot run {compiler[0]}: {exc}", hint="check $CC / $CXX") from None
    return proc.stdout.strip() or proc.stderr.strip()


def _tvm_ffi_paths() -> tuple[str, str]:
    import tvm_ffi.libinfo

    return tvm_ffi.libinfo.find_include_path(), os.path.dirname(tvm_ffi.libinfo.find_libtvm_ffi())


def build_library(
    sources: Mapping[str, str], main: str, chain: Toolchain, *, cache: Path | None = None
) -> Path:
    """Compile ``sources[main]`` (other entries are headers it includes) into a cached
    shared library and return its path. Raises BuildError with the compiler's message
    and the generated lines around the first error."""
    include, libdir = _tvm_ffi_paths()
    version = compiler_version(chain.compiler)
    key = hashlib.sha256()
    for part in (chain.language, version, *chain.compiler, *chain.flags, include, libdir):
        key.update(part.encode() + b"\0")
    for name in sorted(sources):
        key.update(name.encode() + b"\0" + sources[name].encode() + b"\0")
    digest = key.hexdigest()
    root = cache or cache_dir()
    entry = root / digest[:2] / digest
    library = entry / f"lib{Path(main).stem}.so"
    if _valid(library):
        return library
    try:
        entry.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(
            f"cannot create the build cache {entry}: {exc.strerror}",
            hint="set $BYOC_CACHE_DIR to a writable directory",
        ) from None
    with tempfile.TemporaryDirectory(prefix="build.", dir=entry) as work:
        for name, text in sources.items():
            Path(work, name).write_text(text, encoding="utf-8")
        tmp_lib = Path(work) / library.name
        cmd = [
            *chain.compiler,
            *chain.flags,
            "-shared",
            "-fPIC",
            f"-I{include}",
            f"-I{work}",
            str(Path(work) / main),
            "-o",
            str(tmp_lib),
            f"-L{libdir}",
            "-ltvm_ffi",
            f"-Wl,-rpath,{libdir}",
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except OSError as exc:
            raise BuildError(
                f"cannot run {chain.compiler[0]}: {exc.strerror or exc}", hint="check $CC / $CXX"
            ) from None
        except subprocess.TimeoutExpired:
            raise BuildError(f"{chain.compiler[0]} took longer than 600 s on {main}") from None
        if proc.returncode != 0:
            raise BuildError(
                f"{chain.compiler[0]} failed on the generated {main}:\n{_excerpt(proc.stderr, sources[main], main)}",
                hint="this is a bug in a spec's C text or in byoc; `byoc gen -o DIR` writes the sources to inspect",
            )
        data = tmp_lib.read_bytes()
        (Path(work) / "sha256").write_text(hashlib.sha256(data).hexdigest())
        os.replace(Path(work) / "sha256", entry / f"{library.name}.sha256.tmp")
        os.replace(tmp_lib, library)
        os.replace(entry / f"{library.name}.sha256.tmp", entry / f"{library.name}.sha256")
    return library


def _valid(library: Path) -> bool:
    """True when the cached library exists and matches its recorded sha256."""
    try:
        recorded = (library.parent / f"{library.name}.sha256").read_text().strip()
        return hashlib.sha256(library.read_bytes()).hexdigest() == recorded
    except OSError:
        return False


def _excerpt(stderr: str, source: str, main: str) -> str:
    """The compiler's first lines, plus the generated source around its first error line."""
    message = "\n".join(stderr.strip().splitlines()[:20])
    lines = source.splitlines()
    for line in stderr.splitlines():
        parts = line.split(":")
        if len(parts) > 2 and parts[0].endswith(main) and parts[1].isdigit():
            n = int(parts[1])
            lo, hi = max(1, n - CONTEXT_LINES), min(len(lines), n + CONTEXT_LINES)
            shown = "\n".join(f"{'>' if i == n else ' '}{i:5} | {lines[i - 1]}" for i in range(lo, hi + 1))
            return f"{message}\n\ngenerated {main}, around line {n}:\n{shown}"
    return message
