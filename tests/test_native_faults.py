"""Native libraries that must not kill the process (byoc issue 31): truncated libraries
from a bundle and from the build cache, symbols that no required library defines, glibc's
libm.so linker script, compilers that read standard input, disk-cache entries of the
wrong type, and oneDNN's dense with K = 0.

Whatever could kill the process runs the CLI in a subprocess, so that a regression is a
failed assertion on its exit status, not a dead test worker."""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, random_array

import byoc
from byoc.api import evaluate, load_backend, parse
from byoc.disk_cache import FORMAT, cached, entry_key
from byoc.errors import BuildError, RuntimeFailure
from byoc.runtime import load
from byoc.runtime.elf_check import NotLoadable, check_shared_object
from byoc.runtime.module import LibraryModule

sys.path.insert(0, str(DATA / "bad"))
import fixtures_native as fx  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 240


def cli(
    *argv: str, cwd: Path, cache: Path, stdin=subprocess.DEVNULL, **env: str
) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("BYOC_SPEC_PATH", "LD_PRELOAD")}
    environ.update(BYOC_CACHE_DIR=str(cache), **env)
    return subprocess.run(
        [sys.executable, "-m", "byoc", *argv],
        cwd=cwd,
        env=environ,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def assert_clean_error(proc: subprocess.CompletedProcess, title: str, fragment: str) -> None:
    shown = f"exit {proc.returncode}\n{proc.stderr[-2000:]}"
    assert proc.returncode == 2, shown  # not -7 (SIGBUS) nor 127 (symbol lookup error)
    assert "Traceback" not in proc.stderr, shown
    assert proc.stderr.startswith(f"{title}: "), shown
    assert fragment in proc.stderr, shown


# ------------------------------------------------------------------ the ELF check


def test_a_whole_library_passes_and_every_cut_of_it_fails(tmp_path):
    lib = fx.shared_library("int byoc_one(void) { return 1; }\n")
    whole = tmp_path / "whole.so"
    whole.write_bytes(lib)
    check_shared_object(whole)
    for cut in (0, 3, 40, 64, 100, 700, len(lib) // 2, len(lib) - 1):
        part = tmp_path / f"cut{cut}.so"
        part.write_bytes(lib[:cut])
        with pytest.raises(NotLoadable, match="truncated|empty|not an ELF file"):
            check_shared_object(part)


@pytest.mark.parametrize(
    ("offset", "value", "reason"),
    [
        (4, b"\x01", "32-bit"),
        (5, b"\x02", "big-endian"),
        (16, (1).to_bytes(2, "little"), "an object file"),
        (18, (243).to_bytes(2, "little"), "built for RISC-V"),
    ],
)
def test_a_library_for_another_machine_is_refused(tmp_path, offset, value, reason):
    lib = bytearray(fx.shared_library("int byoc_one(void) { return 1; }\n"))
    lib[offset : offset + len(value)] = value
    (tmp_path / "x.so").write_bytes(bytes(lib))
    with pytest.raises(NotLoadable, match=reason):
        check_shared_object(tmp_path / "x.so")


def test_a_library_module_refuses_a_truncated_file_before_loading_it(tmp_path):
    lib = fx.shared_library("int byoc_one(void) { return 1; }\n")
    (tmp_path / "half.so").write_bytes(lib[: len(lib) // 2])
    with pytest.raises(RuntimeFailure, match=r"cannot load the library .*it is truncated"):
        LibraryModule(tmp_path / "half.so", {})


# ------------------------------------------------------------------ truncated libraries


def test_a_truncated_bundle_library_is_an_error_not_sigbus(tmp_path):
    fx.native_library_cut_in_half(tmp_path)
    proc = cli("run", "model.byoc", cwd=tmp_path, cache=tmp_path / "cache")
    assert_clean_error(proc, "runtime error", "libccompiler.so): it is truncated")


def test_a_truncated_cache_entry_with_its_digest_recomputed_is_rebuilt(tmp_path):
    (tmp_path / "g.graph").write_text(fx.C_GRAPH)
    cache = tmp_path / "cache"
    first = cli("run", "g.graph", cwd=tmp_path, cache=cache)
    assert first.returncode == 0, first.stderr
    (lib,) = [p for p in cache.glob("??/*/libccompiler.so")]
    whole = lib.read_bytes()
    lib.write_bytes(whole[: len(whole) // 2])
    (lib.parent / f"{lib.name}.sha256").write_text(hashlib.sha256(lib.read_bytes()).hexdigest() + "\n")
    again = cli("run", "g.graph", cwd=tmp_path, cache=cache)
    assert again.returncode == 0, again.stderr
    assert "every output matches the numpy reference" in again.stdout
    check_shared_object(lib)  # rebuilt whole
    assert len(lib.read_bytes()) == len(whole)


# ------------------------------------------------------------------ missing symbols


def test_a_spec_calling_a_function_its_library_lacks_is_a_build_error_at_the_requirement(tmp_path):
    (tmp_path / "missing.yaml").write_text(fx.missing_symbol_spec())
    program = parse(fx.MATH_GRAPH.replace("@mymath", "@missing"), "graph", spec_path=[str(tmp_path)])
    with pytest.raises(BuildError) as info:
        byoc.build(program, spec_path=[str(tmp_path)])
    err = info.value
    assert "needs the symbol byoc_absent_expf" in err.message
    assert "libm (m)" in err.message and "libmissing.so" in err.message
    assert err.location is not None and err.location.file.endswith("missing.yaml")
    assert (err.location.line, err.location.column) == (8, 3)
    assert err.hint and "apt-get install libc6-dev" in err.hint


def test_the_same_spec_on_the_cli_exits_2(tmp_path):
    fx.native_spec_symbol_missing(tmp_path)
    proc = cli("run", "g.graph", "--spec-path", "spec", cwd=tmp_path, cache=tmp_path / "cache")
    assert_clean_error(proc, "build error", "needs the symbol byoc_absent_expf")
    assert re.search(r"^  --> .*spec/missing\.yaml:8:3$", proc.stderr, re.M), proc.stderr


FAKE_SPEC = """\
version: 1
name: fake
kind: c_source
description: calls byoc_fake_scale from libfake.
dtypes: [float32]
ranks: [1]
requires:
  fake:
    headers: []
    libraries: [fake]
    install: build libfake
    from: {dirs: {lib: [LIBDIR]}}
compile: {compiler: cc, language: c, std: c99, flags: [-O2, -Wall, -Wextra, -Werror]}
prelude: |
  #include <stdint.h>
  extern float byoc_fake_scale(float);
macros:
  FAKE_SCALE:
    inputs: 1
    params: {p_ID_: "${symbol}", p_N_: "${in0_dim0}"}
    body: |
      static void p_ID_(const float* x, float* out) {
        for (int64_t k = 0; k < p_N_; ++k) out[k] = byoc_fake_scale(x[k]);
      }
ops:
  negative: {macros: {1: FAKE_SCALE}}
"""


def test_a_required_library_replaced_by_another_is_an_error_at_bundle_load(tmp_path, rng):
    """As when oneDNN's library is replaced by another library of its name: the
    bundle's library needs a symbol the replacement lacks."""
    libdir = tmp_path / "lib"
    libdir.mkdir()
    (libdir / "libfake.so").write_bytes(fx.shared_library("float byoc_fake_scale(float x) { return -x; }\n"))
    specs = tmp_path / "spec"
    specs.mkdir()
    (specs / "fake.yaml").write_text(FAKE_SPEC.replace("LIBDIR", str(libdir)))
    text = "graph main(x: float32[5]) {\n  y = @fake { return negative(x) }\n  return y\n}\n"
    model = byoc.build(parse(text, "graph", spec_path=[str(specs)]), spec_path=[str(specs)])
    x = random_array(rng, (5,), "float32")
    np.testing.assert_array_equal(model(x=x)[0], -x)
    model.save(tmp_path / "model.byoc")
    # another library under the same name: it loads, but lacks byoc_fake_scale
    (libdir / "libfake.so").unlink()
    (libdir / "libfake.so").write_bytes(fx.shared_library("float byoc_other(float x) { return x; }\n"))
    proc = cli("run", "model.byoc", cwd=tmp_path, cache=tmp_path / "cache")
    assert_clean_error(proc, "runtime error", "needs the symbol byoc_fake_scale")
    assert "fake (fake)" in proc.stderr


def test_a_bundle_library_needing_an_absent_symbol_is_an_error_not_exit_127(tmp_path):
    fx.native_library_needs_an_absent_symbol(tmp_path)
    proc = cli("run", "model.byoc", cwd=tmp_path, cache=tmp_path / "cache")
    assert_clean_error(proc, "runtime error", "needs the symbol byoc_absent_expf")


# ------------------------------------------------------------------ linker scripts


def test_libm_through_its_linker_script_builds_runs_and_loads_from_a_bundle(tmp_path, rng):
    (tmp_path / "mymath.yaml").write_text(fx.MATH_SPEC)
    spec_path = [str(tmp_path)]
    program = parse(fx.MATH_GRAPH, "graph", spec_path=spec_path)
    model = byoc.build(program, spec_path=spec_path)
    (entry,) = model.manifest.modules
    (req,) = entry.requires
    files = req.locate().files
    assert files, "libm stands for at least libm.so.6"
    for file in files:
        check_shared_object(file)  # the script is followed to real shared objects
    x = random_array(rng, (4,), "float32")
    want = np.exp(x)
    np.testing.assert_allclose(model(x=x)[0], want, rtol=1e-6)
    model.save(tmp_path / "model.byoc")
    np.testing.assert_allclose(load(tmp_path / "model.byoc")(x=x)[0], want, rtol=1e-6)


def test_a_linker_script_naming_no_shared_library_is_a_clean_error(tmp_path):
    fx.native_requirement_empty_linker_script(tmp_path)
    proc = cli("run", "model.byoc", cwd=tmp_path, cache=tmp_path / "cache")
    assert_clean_error(proc, "runtime error", "is a linker script that names no shared library")


# ------------------------------------------------------------------ compilers reading stdin


def test_a_compiler_that_reads_stdin_does_not_hang_the_build(tmp_path):
    """The wrapper reads standard input to its end before compiling; the CLI's own
    standard input is a pipe that is never closed, so only /dev/null ends it."""
    wrapper = tmp_path / "cc-reads-stdin"
    wrapper.write_text('#!/bin/sh\ncat > /dev/null\nexec cc "$@"\n')
    wrapper.chmod(0o755)
    (tmp_path / "g.graph").write_text(fx.C_GRAPH)
    read, write = os.pipe()  # held open here: a reader of it waits for ever
    try:
        proc = cli("run", "g.graph", cwd=tmp_path, cache=tmp_path / "cache", stdin=read, CC=str(wrapper))
    finally:
        os.close(read)
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert "every output matches the numpy reference" in proc.stdout


# ------------------------------------------------------------------ the disk cache


def test_a_cache_entry_of_the_wrong_type_is_a_miss_and_rewritten(private_cache):
    key = entry_key("test", "typed")
    path = private_cache / "test" / key[:2] / key
    path.parent.mkdir(parents=True)
    path.write_bytes(f"{FORMAT} test {key}\n".encode() + pickle.dumps(["not", "a", "str"]))
    assert cached("test", key, lambda: "made", expect=str) == "made"
    assert cached("test", key, lambda: "made again", expect=str) == "made"  # rewritten
    path.write_bytes(pickle.dumps(["an entry without its header"]))
    assert cached("test", key, lambda: "made once more", expect=str) == "made once more"


def test_wrong_type_yaml_entries_do_not_break_commands(tmp_path):
    """Every parsed YAML entry (the shipped ops.yaml's among them) and every validated
    catalog and spec replaced by a pickle of another type: commands work as before, and
    the entries are made again."""
    cache = tmp_path / "cache"
    (tmp_path / "g.graph").write_text(fx.C_GRAPH)
    assert cli("run", "g.graph", cwd=tmp_path, cache=cache).returncode == 0
    entries = {
        kind: [p for p in (cache / kind).rglob("*") if p.is_file() and not p.name.startswith(".")]
        for kind in ("yaml", "validated")
    }
    assert all(entries.values())
    entries = entries["yaml"] + entries["validated"]
    for entry in entries:
        entry.write_bytes(pickle.dumps(["a", "list"]))
    proc = cli("run", "g.graph", cwd=tmp_path, cache=cache)
    assert proc.returncode == 0, proc.stderr
    assert all(p.read_bytes().startswith(FORMAT.encode()) for p in entries)


# ------------------------------------------------------------------ dnnl dense with K = 0

K0_GRAPH = """\
graph main(x: float32[3, 0], w: float32[4, 0], b: float32[4]) {
  return dense(x, w), relu(bias_add(dense(x, w), b, axis=1)), bias_add(dense(x, w), b, axis=1)
}
"""


def test_dnnl_dense_with_k_zero_is_zeros_plus_bias():
    """oneDNN has no inner product of K = 0 (its init failed); the result is the bias
    (zeros without one), then its relu, as numpy's reference computes it."""
    from byoc.spec.requirements import NotFound

    spec = load_backend("dnnl")
    try:
        [r.locate() for r in spec.requires.values()]
    except NotFound:
        pytest.skip("oneDNN is not installed")
    program = parse(K0_GRAPH, "graph")
    model = byoc.build(program, backends=["dnnl"])
    assert {m.backend for m in model.manifest.modules} == {"dnnl"}
    b = np.array([-1.5, 0.25, 2.0, -0.125], dtype=np.float32)
    inputs = {"x": np.zeros((3, 0), np.float32), "w": np.zeros((4, 0), np.float32), "b": b}
    got = model(**inputs)
    want = evaluate(program.functions[0], inputs)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[1], np.broadcast_to(np.maximum(b, 0), (3, 4)))
