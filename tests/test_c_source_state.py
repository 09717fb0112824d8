"""Per-function state of c_source backends (the spec's ``state``, ``init`` and
``teardown``; generator/c_source/state.py): the init runs exactly once per loaded
library, even when the first calls come from several threads at once; kernels read
the state through ``${state}``; a failed init makes every call a clean error; the
teardown runs at unload, and only after a good init."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import tvm_ffi
from compile_util import module_artifact
from conftest import module_library, random_array

import byoc
from byoc.api import evaluate, load_backend, parse
from byoc.errors import SpecError
from byoc.generator import generator_for
from byoc.generator.lowering import lower

# `copy` multiplies by the state's `one`, which only the init sets (statics start at
# zero), so a kernel that ran before its init would write zeros. The init is slow on
# purpose, to widen the window in which racing first calls would run it twice.
STATEFUL = """\
version: 1
name: stateful
kind: c_source
dtypes: [float32, float64]
ranks: [1, 2]
compile: {compiler: cc, language: c, std: c99, flags: [-O1, -pthread, -Wall, -Wextra, -Werror]}
options:
  fail: {type: int, default: 0, doc: 1 makes the init fail; 2 makes it fail saying why.}
prelude: |
  static int stateful_inits = 0;
  int stateful_init_count(void) { return __atomic_load_n(&stateful_inits, __ATOMIC_SEQ_CST); }
state: |
  double one;
  const char* name;
init: |
  for (volatile long spin = 0; spin < 20000000; ++spin) {
  }
  __atomic_fetch_add(&stateful_inits, 1, __ATOMIC_SEQ_CST);
  if (${fail} == 2) return byoc_error("no device queue %d", 3);
  if (${fail}) return 1;
  state->one = 1.0;
  state->name = "${symbol}";
teardown: |
  if (getenv("STATEFUL_TEARDOWN_LOG") != NULL) {
    fprintf(stderr, "teardown %s\\n", state->name != NULL ? state->name : "(unnamed)");
  }
macros:
  SCALED_COPY:
    inputs: 1
    params: {p_ID_: "${symbol}", p_N_: "${size}", p_T_: "${ctype}", p_S_: "${state}"}
    body: |
      static void p_ID_(const p_T_* a, p_T_* out) {
        for (int64_t k = 0; k < p_N_; ++k) out[k] = (p_T_)((double)a[k] * (p_S_)->one);
      }
ops:
  copy: {macros: {default: SCALED_COPY}}
"""

GRAPH = """\
graph main(x: float32[64, 32]) {
  y = @stateful as scaled {
    return copy(x)
  }
  return y
}
"""
THREADS = 8


@pytest.fixture
def spec_dir(tmp_path):
    d = tmp_path / "specs"
    d.mkdir()
    (d / "stateful.yaml").write_text(STATEFUL)
    return d


def library(spec_dir, tmp_path, **options):
    """The built library of GRAPH, written to a file of its own."""
    model = byoc.build(parse(GRAPH, "graph"), spec_path=[str(spec_dir)], options=options)
    return module_library(
        model, tmp_path / f"lib{'_'.join(f'{k}{v}' for k, v in options.items()) or 'ok'}.so"
    )


def test_the_generated_c_has_the_state_and_the_guarded_init(spec_dir):
    spec = load_backend("stateful", spec_path=[str(spec_dir)])
    program = parse(GRAPH, "graph", file="state.graph")
    externals = lower(program, lambda name: load_backend(name, [str(spec_dir)]), byoc.load_catalog())
    artifact = module_artifact(
        generator_for(spec.kind)(externals.externals_for("stateful"), spec, byoc.load_catalog(), {})
    )
    text = artifact.text
    assert "#include <pthread.h>" in text
    assert "static scaled_state_t scaled_state;" in text
    assert "pthread_once(&scaled_once_, scaled_init_once_)" in text
    assert "SCALED_COPY(scaled_0, 2048, float, (&scaled_state))" in text
    assert 'state->name = "scaled";' in text


def test_the_init_runs_once_for_racing_threads(spec_dir, tmp_path, rng):
    path = library(spec_dir, tmp_path)
    counter = __import__("ctypes").CDLL(str(path)).stateful_init_count
    assert counter() == 0
    fn = tvm_ffi.load_module(str(path))["scaled"]
    x = random_array(rng, (64, 32), "float32")
    outs = [np.zeros_like(x) for _ in range(THREADS)]
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def call(k: int) -> None:
        try:
            start.wait()
            for _ in range(3):
                fn(x, outs[k])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert counter() == 1
    (want,) = evaluate(parse(GRAPH, "graph").functions[0], {"x": x})
    for out in outs:
        np.testing.assert_array_equal(out, want)


def test_a_failed_init_fails_every_call(spec_dir, tmp_path):
    path = library(spec_dir, tmp_path, fail="1")
    fn = tvm_ffi.load_module(str(path))["scaled"]
    x = np.ones((64, 32), np.float32)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="scaled: the backend's init failed"):
            fn(x, np.zeros_like(x))
    assert __import__("ctypes").CDLL(str(path)).stateful_init_count() == 1


def test_a_failed_init_says_why_on_every_call(spec_dir, tmp_path):
    """An init that fails through byoc_error: every call's error ends with its message
    (kept for the function, since the init runs once, on the first call's thread)."""
    fn = tvm_ffi.load_module(str(library(spec_dir, tmp_path, fail="2")))["scaled"]
    x = np.ones((64, 32), np.float32)
    errors = []

    def call() -> None:
        try:
            fn(x, np.zeros_like(x))
        except RuntimeError as exc:
            errors.append(str(exc))

    first = threading.Thread(target=call)  # the init runs, and fails, on this thread
    first.start()
    first.join()
    call()  # the message reaches a call on another thread too
    assert len(errors) == 2
    assert all(e.endswith("scaled: the backend's init failed; it says: no device queue 3") for e in errors), (
        errors
    )


@pytest.mark.parametrize("calls", [0, 2])
def test_the_teardown_runs_at_unload_after_a_good_init(spec_dir, tmp_path, calls):
    path = library(spec_dir, tmp_path)
    code = (
        "import numpy as np, tvm_ffi\n"
        f"fn = tvm_ffi.load_module({str(path)!r})['scaled']\n"
        "x = np.ones((64, 32), np.float32)\n"
        f"for _ in range({calls}):\n"
        "    fn(x, np.zeros_like(x))\n"
    )
    env = {**os.environ, "STATEFUL_TEARDOWN_LOG": "1"}  # the teardown reports itself only then
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("teardown scaled") == (1 if calls else 0)


def test_state_placeholder_needs_a_declared_state(spec_dir):
    text = STATEFUL.split("state: |")[0] + "macros:" + STATEFUL.split("\nmacros:", 1)[1]
    (spec_dir / "stateful.yaml").write_text(text)
    with pytest.raises(SpecError, match=r"uses \$\{state\}, but the spec declares no state"):
        load_backend("stateful", spec_path=[str(spec_dir)])


# A macro's own state, init and teardown, per kernel: each kernel's scale is its own
# member, set by its own init after the spec's; the teardowns run in reverse kernel
# order, then the spec's.
KERNEL_STATE = STATEFUL.replace(
    '    params: {p_ID_: "${symbol}", p_N_: "${size}", p_T_: "${ctype}", p_S_: "${state}"}\n',
    '    params: {p_ID_: "${symbol}", p_N_: "${size}", p_T_: "${ctype}", p_S_: "${state}"}\n'
    '    state: "double ${symbol};"\n'
    '    init: "state->${symbol} = state->one * 3;"\n'
    "    teardown: |\n"
    '      if (getenv("STATEFUL_TEARDOWN_LOG") != NULL) fprintf(stderr, "teardown ${symbol}\\n");\n',
).replace("(p_S_)->one);", "(p_S_)->p_ID_);")

TWO_KERNELS = """\
graph main(x: float32[64, 32], z: float32[8]) {
  y, w = @stateful as scaled {
    return copy(copy(x)), copy(z)
  }
  return y, w
}
"""
"""Two kernels: the copies of x share one (the same op, type and attributes), z's is its own."""


def test_a_macro_adds_state_init_and_teardown_per_kernel(spec_dir, tmp_path, rng):
    (spec_dir / "stateful.yaml").write_text(KERNEL_STATE)
    model = byoc.build(parse(TWO_KERNELS, "graph"), spec_path=[str(spec_dir)])
    path = module_library(model, tmp_path / "libkernels.so")
    x = random_array(rng, (64, 32), "float32")
    z = random_array(rng, (8,), "float32")
    got = model(x=x, z=z)
    want = evaluate(parse(TWO_KERNELS, "graph").functions[0], {"x": x, "z": z})
    np.testing.assert_allclose(got[0], want[0] * 9, rtol=1e-6)  # the shared kernel, run twice
    np.testing.assert_allclose(got[1], want[1] * 3, rtol=1e-6)
    code = (
        "import numpy as np, tvm_ffi\n"
        f"fn = tvm_ffi.load_module({str(path)!r})['scaled']\n"
        "x, z = np.ones((64, 32), np.float32), np.ones(8, np.float32)\n"
        "fn(x, z, np.zeros_like(x), np.zeros_like(z))\n"
    )
    env = {**os.environ, "STATEFUL_TEARDOWN_LOG": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stderr.split() == ["teardown", "scaled_1", "teardown", "scaled_0", "teardown", "scaled"]


def test_a_kernel_state_template_takes_only_the_kernel_symbol(spec_dir):
    (spec_dir / "stateful.yaml").write_text(KERNEL_STATE.replace("double ${symbol};", "double ${size};"))
    with pytest.raises(
        SpecError, match=r"undefined placeholder \$\{size\} in the state of macro SCALED_COPY"
    ):
        load_backend("stateful", spec_path=[str(spec_dir)])


def test_a_failed_kernel_init_tears_down_the_kernels_before_it(spec_dir, tmp_path):
    """The second kernel's init fails: the first kernel's teardown and then the spec's
    run at once (nothing leaks), and none again at unload."""
    failing = KERNEL_STATE.replace(
        '    init: "state->${symbol} = state->one * 3;"\n',
        "    init: |\n"
        "      state->${symbol} = state->one * 3;\n"
        '      if (strcmp("${symbol}", "scaled_1") == 0) return 1;\n',
    ).replace("prelude: |\n", "prelude: |\n  #include <string.h>\n")
    (spec_dir / "stateful.yaml").write_text(failing)
    model = byoc.build(parse(TWO_KERNELS, "graph"), spec_path=[str(spec_dir)])
    path = module_library(model, tmp_path / "libfailing.so")
    code = (
        "import numpy as np, sys, tvm_ffi\n"
        f"fn = tvm_ffi.load_module({str(path)!r})['scaled']\n"
        "x, z = np.ones((64, 32), np.float32), np.ones(8, np.float32)\n"
        "try:\n"
        "    fn(x, z, np.zeros_like(x), np.zeros_like(z))\n"
        "except RuntimeError as exc:\n"
        "    print(exc)\n"
        "sys.stderr.write('unloading\\n')\n"
    )
    env = {**os.environ, "STATEFUL_TEARDOWN_LOG": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "scaled: the backend's init failed" in out.stdout
    assert out.stderr.split() == ["teardown", "scaled_0", "teardown", "scaled", "unloading"]


# A pattern whose input w must be a constant: its macro's init reads the constant's
# C array through ${in1_const}, and the kernel multiplies by the state's copy of that
# pointer, ignoring its own argument.
CONST_INPUT = STATEFUL.replace(
    "macros:\n",
    "macros:\n"
    "  SCALED_BY_CONSTANT:\n"
    "    inputs: 2\n"
    '    params: {p_ID_: "${symbol}", p_N_: "${size}", p_S_: "${state}"}\n'
    '    state: "const float* ${symbol};"\n'
    '    init: "state->${symbol} = ${in1_const};"\n'
    "    body: |\n"
    "      static void p_ID_(const float* a, const float* w, float* out) {\n"
    "        (void)w;\n"
    "        for (int64_t k = 0; k < p_N_; ++k) out[k] = a[k] * (p_S_)->p_ID_[k];\n"
    "      }\n",
) + (
    "patterns:\n"
    "  scaled_by_constant:\n"
    "    inputs: [x, w]\n"
    "    constants: [w]\n"
    "    dtypes: [float32]\n"
    "    match: |\n"
    "      return multiply(x, w)\n"
    "    macros: {default: SCALED_BY_CONSTANT}\n"
)


def test_a_macro_init_reads_a_constant_input(spec_dir, rng):
    """Two uses of the macro of one text but other constants are two kernels, each
    with its own constant (kernels are shared per distinct use otherwise)."""
    (spec_dir / "stateful.yaml").write_text(CONST_INPUT)

    def constant(name: str) -> str:
        values = ", ".join(repr(float(v)) for v in rng.uniform(-2, 2, 32).astype(np.float32))
        return f"  {name} = const float32[4, 8] [{values}]\n"

    graph = (
        "graph main(x: float32[4, 8]) {\n"
        + constant("w")
        + constant("v")
        + "  return multiply(multiply(x, w), v)\n}\n"
    )
    program = parse(graph, "graph")
    model = byoc.build(program, backends=["stateful"], spec_path=[str(spec_dir)])
    text = model.members["stateful.c"].decode()
    assert "state->stateful_0_0 = stateful_0_const_0;" in text
    assert "state->stateful_0_1 = stateful_0_const_1;" in text
    x = random_array(rng, (4, 8), "float32")
    (got,) = model(x=x)
    (want,) = evaluate(program.functions[0], {"x": x})
    np.testing.assert_array_equal(got, want)
