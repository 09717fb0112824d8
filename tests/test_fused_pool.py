"""The `fused` backend's parallel loops: the module's thread pool
(generator/c_fused/pool.py) and the outlined chunk functions (generator/c_fused/outline.py).

Every scenario that runs parallel code runs in a subprocess with a timeout, so that a
deadlock fails the test instead of hanging the session. Results are compared bit for
bit with the serial module's and with the numpy reference; nothing is timed.
"""

from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from compile_util import compile_library
from conftest import random_array
from shipped_fused import SUPPORT
from test_gen_fused import BACKEND, CASES, compile_text, externals_of, ffi_array, generate

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build
from byoc.generator.lowering import lower
from byoc.testing.compare import check_close

TESTS = Path(__file__).resolve().parent
TIMEOUT = 240
"""Seconds a scenario may take; a deadlock fails it."""
PARALLEL = {"openmp_threshold": "1", "openmp_reduction_threshold": "1"}
"""Every nest with a loop on the pool."""
SERIAL = {"openmp_threshold": "0", "openmp_reduction_threshold": "0"}


def scenario(name: str, env: dict[str, str] | None = None) -> str:
    """Run ``_scenario_<name>()`` of this module in a fresh process; its stdout."""
    proc = subprocess.run(
        [sys.executable, "-c", f"import test_fused_pool as t; t._scenario_{name}()"],
        cwd=TESTS,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def graph(shape: list[int], bias: list[int], op: str = "add") -> str:
    """``multiply(op(x, b), x)`` with ``b`` broadcast: two nested loops when it broadcasts."""
    return (
        f"graph main(x: float32{shape}, b: float32{bias}) {{\n"
        f"  s = @fused {{ return multiply({op}(x, b), x) }}\n  return s\n}}\n"
    )


def conv(channels: int, size: int) -> str:
    return (
        f"graph main(x: float32[1, 5, {size}, {size}], w: float32[{channels}, 5, 3, 3], "
        f"b: float32[{channels}]) {{\n"
        "  r = @fused { return relu(bias_add(conv(x, w, pads=[1, 1, 1, 1]), b)) }\n  return r\n}\n"
    )


SHAPES = {
    "flat_many_chunks": graph([1000003], [1000003]),  # 32 chunks of uneven length
    "rows_not_divisible": graph([37, 1001], [1001]),  # 37 rows in 32 chunks
    "two_rows": graph([2, 70001], [70001]),  # fewer rows than threads or chunks
    "three_rows": graph([3, 513], [513], "subtract"),
    "conv_tail_block": conv(6, 9),  # 6 output channels: blocks of 4, then 2
    "conv_many": conv(40, 7),
}
"""Graphs of this module, beyond the golden cases."""


def _externals(case: str):
    if case in SHAPES:
        return lower(parse(SHAPES[case], "graph"), load_backend, load_catalog()).externals_for(BACKEND)
    return externals_of(case)


def _scenario_bits() -> None:
    """Every golden case and every shape above, with every loop nest on the pool: the
    same bits as the serial module, and the reference's values."""
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        _bits(Path(root))


def _bits(root: Path) -> None:
    rng = np.random.default_rng(17)
    parallel_cases = 0
    for case in [*CASES, *SHAPES]:
        externals = _externals(case)
        text = generate(externals, PARALLEL)
        parallel_cases += "byoc_parallel_for(" in text
        serial = compile_text(generate(externals, SERIAL), root / case / "serial")
        pooled = compile_text(text, root / case / "parallel")
        for fn in externals:
            inputs = [random_array(rng, p.type.shape, p.type.dtype) for p in fn.params]
            got = [np.full(t.shape, 99, dtype=t.dtype) for t in fn.output_types]
            want = [np.full(t.shape, 98, dtype=t.dtype) for t in fn.output_types]
            for _ in range(3):  # the first call starts the pool, later ones reuse it
                pooled[fn.name](*map(ffi_array, [*inputs, *got]))
                serial[fn.name](*map(ffi_array, [*inputs, *want]))
                for g, w in zip(got, want):
                    half = g.dtype.kind not in "biuf" or g.dtype == np.float16  # compared by their bits
                    g, w = (g.view(np.uint16), w.view(np.uint16)) if half else (g, w)
                    np.testing.assert_array_equal(g, w, err_msg=f"{case}: {fn.name}")
            reference = evaluate(fn, dict(zip((p.name for p in fn.params), inputs)))
            for g, r in zip(got, reference):
                if g.dtype.kind == "b":
                    np.testing.assert_array_equal(g, r, err_msg=case)
                else:  # the tolerance of float sums (both option sets keep float32_dots on)
                    check_close(g, r, case)
    assert parallel_cases >= len(SHAPES) + 5, parallel_cases
    print("ok", parallel_cases)


def test_parallel_nests_give_the_serial_bits():
    assert scenario("bits").startswith("ok")


# -------------------------------------------------------- threads, fork, unload

PROBE = """
/* test probe: the body of fused_0 without the FFI, for ctypes */
int pool_probe(const float* x, const float* b, float* out) {
  fused_0_(x, b, out);
  return 0;
}
"""
N = 1 << 16


def _probe_library(root: Path, name: str) -> Path:
    """A module with one parallel loop over N elements, and ``pool_probe`` to call it
    through ctypes (the TVM FFI runtime never unloads a module; ctypes can)."""
    externals = lower(parse(graph([N], [N]), "graph"), load_backend, load_catalog()).externals_for(BACKEND)
    text = generate(externals, {"openmp_threshold": "1"})
    return compile_library({f"{name}.c": text + PROBE, **SUPPORT}, f"{name}.c", root)


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _scenario_unload() -> None:
    """Load, call and unload the library again and again: each load starts its helpers
    at the first parallel loop, each unload stops and joins them."""
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        _unload(_probe_library(Path(root), "probe"))


def _unload(lib: Path) -> None:
    import _ctypes

    expect = int(os.environ.get("EXPECT_HELPERS", "0"))
    x = np.linspace(-3, 3, N, dtype=np.float32)
    b = np.linspace(5, -1, N, dtype=np.float32)
    want = (x + b) * x
    base = _threads()
    f32 = ctypes.POINTER(ctypes.c_float)
    for _ in range(5):
        handle = ctypes.CDLL(str(lib))
        assert _threads() == base, "no helper before the first parallel loop"
        for _ in range(3):
            out = np.zeros(N, np.float32)
            handle.pool_probe(*(a.ctypes.data_as(f32) for a in (x, b, out)))
            np.testing.assert_array_equal(out, want)
        assert _threads() == base + expect, (_threads(), base, expect)
        _ctypes.dlclose(handle._handle)
        del handle
        gc.collect()
        assert _threads() == base, "the destructor joined the helpers"
        assert str(lib) not in Path("/proc/self/maps").read_text(), "unloaded"
    print("ok")


def test_unload_joins_the_helpers():
    cpus = os.sysconf("SC_NPROCESSORS_ONLN")
    scenario("unload", {"EXPECT_HELPERS": str(cpus - 1), "BYOC_NUM_THREADS": "", "OMP_NUM_THREADS": ""})


@pytest.mark.parametrize("variable", ["BYOC_NUM_THREADS", "OMP_NUM_THREADS"])
def test_thread_count_follows_the_environment(variable):
    other = "OMP_NUM_THREADS" if variable == "BYOC_NUM_THREADS" else "BYOC_NUM_THREADS"
    scenario("unload", {variable: "1", other: "", "EXPECT_HELPERS": "0"})  # 1 thread: serial


def _model():
    n = 300001
    program = parse(graph([n], [n]), "graph")
    return program.functions[0], build(program, options={"openmp_threshold": "1"})


def _scenario_concurrent() -> None:
    """Four Python threads call the module at once (the FFI call releases the GIL): one
    holds the pool, the others run serially; every result is right."""
    fn, model = _model()
    rng = np.random.default_rng(5)
    cases = []
    for _ in range(8):
        inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
        cases.append((inputs, evaluate(fn, inputs)[0]))
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(40):
                inputs, want = cases[(k + i) % len(cases)]
                np.testing.assert_array_equal(model(**inputs)[0], want)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT / 2)
        assert not t.is_alive(), "a caller is stuck"
    assert not errors, errors
    print("ok")


def test_concurrent_callers():
    scenario("concurrent")


def _scenario_fork() -> None:
    """A child forked after the parent's pool started runs its loops serially: the
    helpers do not exist in it. The parent's pool keeps working afterwards."""
    fn, model = _model()
    rng = np.random.default_rng(6)
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    (want,) = evaluate(fn, inputs)
    np.testing.assert_array_equal(model(**inputs)[0], want)  # the pool now runs
    for _ in range(3):
        pid = os.fork()
        if pid == 0:  # the child never returns into pytest, even when a call raises
            ok = False
            try:
                ok = all(np.array_equal(model(**inputs)[0], want) for _ in range(3))
            finally:
                os._exit(0 if ok else 1)
        deadline = time.monotonic() + TIMEOUT / 4
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                raise AssertionError("the forked child hangs")
            time.sleep(0.01)
        assert os.waitstatus_to_exitcode(status) == 0
        np.testing.assert_array_equal(model(**inputs)[0], want)
    print("ok")


def test_forked_child_runs_serially():
    scenario("fork")


# ------------------------------------------------------------------------ text


@pytest.mark.parametrize("case", ["bias_add_relu", "split", "mlp"])
def test_golden_parallel(case, golden):
    """The text of a module with parallel nests: the pool once, one chunk function per nest."""
    assert generate(externals_of(case), PARALLEL) == golden("c")


def test_a_module_without_parallel_loops_has_no_pool():
    text = generate(externals_of("conv_bias_relu"))  # below the default thresholds
    assert "byoc_parallel_for" not in text and "pthread.h" not in text and "_POSIX_C_SOURCE" not in text


def test_parallel_text_compiles_warning_free(tmp_path):
    """-std=c99 -Wall -Wextra -Werror (compile_util), with and without target_clones."""
    for clones in ("true", "false"):
        options = {**PARALLEL, "host_isa": "false", "target_clones": clones}
        text = generate(externals_of("resnet_basic_block"), options)
        assert ("byoc_simd_clones" in text) == (clones == "true")
        assert text.count("byoc_parallel_for(fused_") == 2  # its two conv nests
        compile_library({"fused.c": text, **SUPPORT}, "fused.c", tmp_path / clones, link=False)
