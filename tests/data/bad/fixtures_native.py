"""Fixtures of the ``native`` surface (cases_native.yaml): shared libraries that must not
kill the process that loads them (byoc issue 31).

Bundles whose compiled library is cut short, emptied, replaced by text, made for another
machine or needing a symbol that nothing defines, each with the manifest's digests
recomputed so that only the library itself is wrong; a spec whose C calls a function its
required library lacks; a compiler that reads standard input. Building a bundle needs a
C compiler, as these cases do.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tempfile
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

FIXTURES: dict[str, Callable[[Path], None]] = {}

LIBRARY = "libccompiler.so"
C_GRAPH = """\
graph main(x: float32[2, 3], y: float32[2, 3]) {
  s = @ccompiler { return add(x, y) }
  return s
}
"""
MATH_SPEC = """\
version: 1
name: mymath
kind: c_source
description: exp through libm, which glibc's libm.so (a linker script) stands for.
dtypes: [float32]
ranks: [1]
requires:
  libm:
    headers: [math.h]
    libraries: [m]
    install: install the C library's development files (apt-get install libc6-dev)
    from: {dirs: {}}
compile: {compiler: cc, language: c, std: c99, flags: [-O2, -Wall, -Wextra, -Werror]}
prelude: |
  #include <stdint.h>
  #include <math.h>
macros:
  MYMATH_EXP:
    inputs: 1
    params: {p_ID_: "${symbol}", p_N_: "${in0_dim0}"}
    body: |
      static void p_ID_(const float* x, float* out) {
        for (int64_t k = 0; k < p_N_; ++k) out[k] = expf(x[k]);
      }
ops:
  exp: {macros: {1: MYMATH_EXP}}
"""
MATH_GRAPH = """\
graph main(x: float32[4]) {
  y = @mymath { return exp(x) }
  return y
}
"""
UNDEFINED_C = """\
extern float byoc_absent_expf(float);
float byoc_uses_absent(float x) { return byoc_absent_expf(x); }
"""
"""A library that needs a symbol no library defines (it links: a shared object may)."""


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


def missing_symbol_spec() -> str:
    """MATH_SPEC renamed ``missing``, whose C calls ``byoc_absent_expf`` (not in libm)."""
    return (
        MATH_SPEC.replace("name: mymath", "name: missing")
        .replace("MYMATH_EXP", "MISSING_EXP")
        .replace("expf(x[k])", "byoc_absent_expf(x[k])")
        .replace("#include <math.h>\n", "#include <math.h>\n  extern float byoc_absent_expf(float);\n")
    )


@cache
def built_bundle(graph: str, spec: str | None = None) -> bytes:
    """The bytes of a bundle built from ``graph`` (with the backend spec ``spec`` on
    the spec path, when given)."""
    from byoc.api import parse
    from byoc.building import build

    with tempfile.TemporaryDirectory() as tmp:
        spec_path = []
        if spec is not None:
            (Path(tmp) / "spec").mkdir()
            name = spec.split("name: ", 1)[1].split()[0]
            (Path(tmp) / "spec" / f"{name}.yaml").write_text(spec)
            spec_path = [str(Path(tmp) / "spec")]
        program = parse(graph, "graph", spec_path=spec_path)
        build(program, spec_path=spec_path).save(Path(tmp) / "model.byoc")
        return (Path(tmp) / "model.byoc").read_bytes()


def shared_library(source: str) -> bytes:
    """``source`` compiled into a shared object by the system's C compiler."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "x.c").write_text(source)
        subprocess.run(
            ["cc", "-shared", "-fPIC", "-o", f"{tmp}/x.so", f"{tmp}/x.c"],
            check=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        return (Path(tmp) / "x.so").read_bytes()


def rewrite_bundle(d: Path, raw: bytes, member: str, change: Callable[[bytes], bytes], edit=None) -> None:
    """Write ``d/model.byoc``: ``raw`` with ``member`` changed by ``change`` and the
    manifest's sizes and digests recomputed (``edit(manifest)`` applied), so every
    check of the archive passes and only the member's content is wrong."""
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        members = {name: z.read(name) for name in z.namelist()}
    manifest = json.loads(members.pop("manifest.json"))
    members[member] = change(members[member])
    manifest["members"] = {
        n: {"sha256": hashlib.sha256(b).hexdigest(), "size": len(b)} for n, b in members.items()
    }
    if edit is not None:
        edit(manifest)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(manifest))
        for name, data in members.items():
            z.writestr(name, data)
    (d / "model.byoc").write_bytes(buffer.getvalue())


def _library_changed(d: Path, change: Callable[[bytes], bytes]) -> None:
    rewrite_bundle(d, built_bundle(C_GRAPH), LIBRARY, change)


def _patched(offset: int, value: bytes) -> Callable[[bytes], bytes]:
    return lambda lib: lib[:offset] + value + lib[offset + len(value) :]


@fixture
def native_library_cut_in_half(d: Path) -> None:
    _library_changed(d, lambda lib: lib[: len(lib) // 2])


@fixture
def native_library_cut_after_header(d: Path) -> None:
    _library_changed(d, lambda lib: lib[:100])


@fixture
def native_library_empty(d: Path) -> None:
    _library_changed(d, lambda lib: b"")


@fixture
def native_library_is_a_linker_script(d: Path) -> None:
    _library_changed(d, lambda lib: b"/* GNU ld script */\nGROUP ( /lib/libccompiler.so.1 )\n")


@fixture
def native_library_32_bit(d: Path) -> None:
    _library_changed(d, _patched(4, b"\x01"))


@fixture
def native_library_for_arm(d: Path) -> None:
    _library_changed(d, _patched(18, (40).to_bytes(2, "little")))


@fixture
def native_library_is_an_executable(d: Path) -> None:
    _library_changed(d, _patched(16, (2).to_bytes(2, "little")))


@fixture
def native_library_needs_an_absent_symbol(d: Path) -> None:
    _library_changed(d, lambda lib: shared_library(UNDEFINED_C))


@fixture
def native_requirement_lacks_the_symbol(d: Path) -> None:
    """A bundle of the libm backend whose library needs a symbol libm lacks."""
    rewrite_bundle(
        d, built_bundle(MATH_GRAPH, MATH_SPEC), "libmymath.so", lambda lib: shared_library(UNDEFINED_C)
    )


def _requirement_in(d: Path, content: bytes) -> None:
    """A bundle whose module requires ``libfake.so`` in ``d``, holding ``content``."""
    (d / "lib").mkdir()
    (d / "lib" / "libfake.so").write_bytes(content)

    def edit(manifest: dict) -> None:
        (module,) = manifest["modules"]
        module["requires"] = {
            "fake": {
                "headers": [],
                "libraries": ["fake"],
                "install": "build libfake",
                "from": {"dirs": {"lib": [str(d / "lib")]}},
            }
        }

    rewrite_bundle(d, built_bundle(C_GRAPH), LIBRARY, lambda lib: lib, edit)


@fixture
def native_requirement_truncated(d: Path) -> None:
    _requirement_in(d, shared_library("int byoc_fake(void) { return 1; }\n")[:2000])


@fixture
def native_requirement_empty_linker_script(d: Path) -> None:
    _requirement_in(d, b"/* GNU ld script */\nGROUP ( AS_NEEDED ( libnothing.so.9 ) )\n")


@fixture
def native_spec_symbol_missing(d: Path) -> None:
    (d / "spec").mkdir()
    (d / "spec" / "missing.yaml").write_text(missing_symbol_spec())
    (d / "g.graph").write_text(MATH_GRAPH.replace("@mymath", "@missing"))


@fixture
def native_compiler_reads_stdin(d: Path) -> None:
    """A spec whose compiler is a wrapper that reads standard input, then fails."""
    (d / "spec").mkdir()
    wrapper = d / "cc-reads-stdin"
    wrapper.write_text('#!/bin/sh\ncat > /dev/null\necho "cc-reads-stdin: no input files" >&2\nexit 1\n')
    wrapper.chmod(0o755)
    spec = MATH_SPEC.replace("compiler: cc,", "compiler: ./cc-reads-stdin,").replace(
        "name: mymath", "name: stdin"
    )
    (d / "spec" / "stdin.yaml").write_text(spec.replace("MYMATH_EXP", "STDIN_EXP"))
    (d / "g.graph").write_text(MATH_GRAPH.replace("@mymath", "@stdin"))
