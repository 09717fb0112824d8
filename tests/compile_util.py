"""Compile generated C or C++ text into a shared library for tests, with the TVM FFI
headers and library. Tests only; the product's builder lives in byoc.runtime."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import tvm_ffi.libinfo

from byoc.generator.c import support_files

WARNINGS = ("-Wall", "-Wextra", "-Werror")

BYOC_SUPPORT = {
    name: support_files.text(name)
    for name in (support_files.HEADER, *(f"{stem}.c" for stem in support_files.STEMS))
}
"""byoc's support files (byoc_module.h and every C file it declares), which a generated
module includes and links: what compiling a module's text needs beside it."""


def compile_library(
    files: dict[str, str], main: str, out_dir: Path, *, cplusplus: bool = False, link: bool = True
) -> Path:
    """Write ``files`` (name -> text) into ``out_dir`` and compile ``main``.

    With ``link`` false it only compiles to an object file (``-c``); otherwise it
    builds ``lib<stem>.so`` of ``main`` and the other sources of its language among
    ``files``. byoc's support files (:data:`BYOC_SUPPORT`, named ``.cc`` for a C++
    ``main``) join ``files``, as a build links them to every generated module. Raises AssertionError with the compiler's output on failure.
    """
    suffix = Path(main).suffix
    support = {
        name.replace(".c", suffix) if name.endswith(".c") else name: text
        for name, text in BYOC_SUPPORT.items()
    }
    files = {**support, **files}
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out_dir / name).write_text(text)
    compiler = os.environ.get("CXX", "g++") if cplusplus else os.environ.get("CC", "gcc")
    if shutil.which(compiler) is None:
        import pytest

        pytest.skip(f"no compiler {compiler!r}")
    std = "-std=c++17" if cplusplus else "-std=c99"
    include = tvm_ffi.libinfo.find_include_path()
    stem = Path(main).stem
    cmd = [compiler, std, *WARNINGS, "-O1", f"-I{include}", f"-I{out_dir}", str(out_dir / main)]
    if link:
        cmd += [str(out_dir / name) for name in files if name != main and name.endswith(suffix)]
        libdir = os.path.dirname(tvm_ffi.libinfo.find_libtvm_ffi())
        target = out_dir / f"lib{stem}.so"
        cmd += ["-shared", "-fPIC", "-o", str(target), f"-L{libdir}", "-ltvm_ffi", f"-Wl,-rpath,{libdir}"]
    else:
        target = out_dir / f"{stem}.o"
        cmd += ["-c", "-fPIC", "-o", str(target)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return target


def module_artifact(artifacts):
    """The one module among a C-family generator's artifacts, checking that the others
    are headers and support files (byoc's, the spec's), not large-constant binaries."""
    (module,) = [a for a in artifacts if a.role == "module"]
    assert all(a.role in ("header", "support") for a in artifacts if a is not module), artifacts
    return module
