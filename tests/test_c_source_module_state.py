"""Module state of c_source backends (the spec's ``module_state``, ``module_init`` and
``module_teardown``; generator/c_source/state.py): set up once per loaded library,
however many functions the library has and however many threads call them first;
shared by every function and kernel through ``${module_state}``, and by each function's
own init; a failed module init fails every call with what it said; the teardown runs
at unload, after the functions' teardowns, and only after a good init."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
import tvm_ffi
from compile_util import module_artifact
from conftest import module_library, random_array, run_threads

import byoc
from byoc.api import evaluate, load_backend, parse
from byoc.errors import SpecError
from byoc.generator import generator_for
from byoc.generator.lowering import lower

GAIN = 2.5
"""What the module init stores; the kernels scale by it, so a kernel that ran before the
init (statics start at zero) would write zeros."""

# A stand-in NPU: the module init "opens the device" (counts the opens in an exported
# counter, slowly, to widen the window in which racing first calls would open it
# twice). SCALE reads the module state itself; FLIP reads its function's state, which
# the function's init copies from the module state.
NPU = f"""\
version: 1
name: npu
kind: c_source
dtypes: [float32]
ranks: [1, 2]
compile: {{compiler: cc, language: c, std: c99, flags: [-O1, -pthread, -Wall, -Wextra, -Werror]}}
options:
  fail: {{type: int, default: 0, doc: 1 makes the module init fail.}}
prelude: |
  static int npu_opens = 0;
  int npu_open_count(void) {{ return __atomic_load_n(&npu_opens, __ATOMIC_SEQ_CST); }}
module_state: |
  int device;
  double gain;
module_init: |
  for (volatile long spin = 0; spin < 20000000; ++spin) {{
  }}
  state->device = __atomic_add_fetch(&npu_opens, 1, __ATOMIC_SEQ_CST);
  if (${{fail}}) return byoc_error("cannot open device %d", 7);
  state->gain = {GAIN};
module_teardown: |
  if (getenv("NPU_LOG") != NULL) fprintf(stderr, "close device %d\\n", state->device);
state: |
  double gain;
init: |
  state->gain = ${{module_state}}->gain;
teardown: |
  if (getenv("NPU_LOG") != NULL) fprintf(stderr, "teardown ${{symbol}}\\n");
macros:
  SCALE:
    inputs: 1
    params: {{p_ID_: "${{symbol}}", p_N_: "${{size}}", p_M_: "${{module_state}}"}}
    body: |
      static void p_ID_(const float* a, float* out) {{
        for (int64_t k = 0; k < p_N_; ++k) out[k] = a[k] * (float)(p_M_)->gain;
      }}
  FLIP:
    inputs: 1
    params: {{p_ID_: "${{symbol}}", p_N_: "${{size}}", p_S_: "${{state}}"}}
    body: |
      static void p_ID_(const float* a, float* out) {{
        for (int64_t k = 0; k < p_N_; ++k) out[k] = -a[k] * (float)(p_S_)->gain;
      }}
ops:
  copy: {{macros: {{default: SCALE}}}}
  negative: {{macros: {{default: FLIP}}}}
"""

GRAPH = """\
graph main(x: float32[64, 32], z: float32[8]) {
  y = @npu as first {
    return copy(x)
  }
  w = @npu as second {
    return negative(z)
  }
  v = @npu as third {
    return copy(negative(y))
  }
  return v, w
}
"""
FUNCTIONS = ("first", "second", "third")
THREADS = 6


@pytest.fixture
def spec_dir(tmp_path):
    d = tmp_path / "specs"
    d.mkdir()
    (d / "npu.yaml").write_text(NPU)
    return d


def build(spec_dir, tmp_path, **options):
    """The model of GRAPH and its one library, written to a file of its own."""
    model = byoc.build(parse(GRAPH, "graph"), spec_path=[str(spec_dir)], options=options)
    return model, module_library(model, tmp_path / f"libnpu{len(options)}.so")


def expected(x, z):
    """What the npu computes for GRAPH: numpy's outputs, each SCALE and FLIP scaled by GAIN
    (v is copy(negative(copy(x))), three kernels; w one)."""
    v, w = evaluate(parse(GRAPH, "graph").functions[0], {"x": x, "z": z})
    return v * np.float32(GAIN) ** 3, w * np.float32(GAIN)


def test_the_generated_c_has_one_module_state_and_every_wrapper_guards_it(spec_dir):
    spec = load_backend("npu", spec_path=[str(spec_dir)])
    externals = lower(
        parse(GRAPH, "graph"), lambda name: load_backend(name, [str(spec_dir)]), byoc.load_catalog()
    )
    artifact = module_artifact(
        generator_for(spec.kind)(externals.externals_for("npu"), spec, byoc.load_catalog(), {})
    )
    text = artifact.text
    assert text.count("} byoc_module_state_t;") == 1
    assert text.count("pthread_once(&byoc_module_once_, byoc_module_init_once_)") == len(FUNCTIONS)
    assert "SCALE(first_0, 2048, (&byoc_module_state))" in text
    assert "state->gain = (&byoc_module_state)->gain;" in text  # each function's init reads it
    # the module's state comes before every function, and its guard before the function's own
    assert text.index("} byoc_module_state_t;") < text.index("first_state_t")
    wrapper = text[text.index("static int first_wrapper_(") :]
    assert wrapper.index("byoc_module_once_") < wrapper.index("first_once_")


def test_one_init_per_module_for_every_function_and_thread(spec_dir, tmp_path, rng):
    model, path = build(spec_dir, tmp_path)
    opens = ctypes.CDLL(str(path)).npu_open_count
    assert opens() == 0
    module = tvm_ffi.load_module(str(path))
    fns = [module[name] for name in FUNCTIONS]
    x = random_array(rng, (64, 32), "float32")
    z = random_array(rng, (8,), "float32")
    v_want, w_want = expected(x, z)
    want = {"first": (x, x * np.float32(GAIN)), "second": (z, w_want)}

    def call(k: int) -> None:  # the threads' first calls race over two functions
        name = FUNCTIONS[k % 2]
        arg, expected = want[name]
        for _ in range(3):
            out = np.zeros_like(arg)
            fns[k % 2](arg, out)
            np.testing.assert_array_equal(out, expected)

    run_threads(call, THREADS)
    assert opens() == 1
    v, w = model(x=x, z=z)  # all three functions, in the model's own copy of the library
    np.testing.assert_allclose(v, v_want, rtol=1e-6)
    np.testing.assert_array_equal(w, w_want)


def test_a_failed_module_init_fails_every_call_with_what_it_said(spec_dir, tmp_path):
    _, path = build(spec_dir, tmp_path, fail="1")
    module = tvm_ffi.load_module(str(path))
    x, z = np.ones((64, 32), np.float32), np.ones(8, np.float32)
    for name, arg in [("first", x), ("second", z), ("first", x)]:
        with pytest.raises(
            RuntimeError, match=f"^{name}: the backend's module_init failed; it says: cannot open device 7$"
        ):
            module[name](arg, np.zeros_like(arg))
    assert ctypes.CDLL(str(path)).npu_open_count() == 1  # tried once, not once per call


TEARDOWN = """\
import numpy as np, sys, tvm_ffi
module = tvm_ffi.load_module(sys.argv[1])
x, z = np.ones((64, 32), np.float32), np.ones(8, np.float32)
for _ in range(int(sys.argv[2])):
    module["first"](x, np.zeros_like(x))
    module["second"](z, np.zeros_like(z))
"""


@pytest.mark.parametrize("calls", [0, 2])
def test_the_module_teardown_runs_last_at_unload_after_a_good_init(spec_dir, tmp_path, calls):
    _, path = build(spec_dir, tmp_path)
    env = {**os.environ, "NPU_LOG": "1"}
    out = subprocess.run(
        [sys.executable, "-c", TEARDOWN, str(path), str(calls)], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    if not calls:
        assert lines == []
        return
    assert sorted(lines[:-1]) == ["teardown first", "teardown second"]  # the functions called
    assert lines[-1] == "close device 1"


def test_no_teardown_after_a_failed_module_init(spec_dir, tmp_path):
    _, path = build(spec_dir, tmp_path, fail="1")
    code = TEARDOWN.replace('    module["first"]', '    try:\n        module["first"]').replace(
        "(x, np.zeros_like(x))\n", "(x, np.zeros_like(x))\n    except RuntimeError:\n        pass\n", 1
    )
    code = code.replace('    module["second"](z, np.zeros_like(z))\n', "")
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), "1"],
        capture_output=True,
        text=True,
        env={**os.environ, "NPU_LOG": "1"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""


@pytest.mark.parametrize(
    ("edit", "message", "key"),
    [
        (
            ("module_state: |\n  int device;\n  double gain;\n", "module_state: {device: int}\n"),
            "module_state must be a string",
            "module_state:",
        ),
        (
            ("  if (${fail}) return", "  if (${symbol}) return"),
            r"undefined placeholder \$\{symbol\} in module_init",
            "  if (${symbol}) return",
        ),
        (
            ("module_state: |\n  int device;\n  double gain;\n", ""),
            r"the argument of p_M_ in macro SCALE uses \$\{module_state\}, but the spec declares no module state",
            '    params: {p_ID_: "${symbol}", p_N_: "${size}", p_M_',
        ),
    ],
)
def test_malformed_module_state_is_a_located_spec_error(spec_dir, edit, message, key):
    text = NPU.replace(*edit)
    (spec_dir / "npu.yaml").write_text(text)
    line = next(n for n, t in enumerate(text.splitlines(), 1) if t.startswith(key))
    with pytest.raises(SpecError, match=message) as info:
        load_backend("npu", spec_path=[str(spec_dir)])
    assert f"npu.yaml:{line}:" in str(info.value)


def test_a_function_init_reading_an_undeclared_module_state_is_located(spec_dir):
    text = NPU.replace("module_state: |\n  int device;\n  double gain;\n", "").replace(
        'p_M_: "${module_state}"}', 'p_M_: "${state}"}'
    )
    (spec_dir / "npu.yaml").write_text(text)
    line = next(n for n, t in enumerate(text.splitlines(), 1) if t.startswith("init:")) + 1
    with pytest.raises(
        SpecError, match=r"init uses \$\{module_state\}, but the spec declares no module state"
    ) as info:
        load_backend("npu", spec_path=[str(spec_dir)])
    assert f"npu.yaml:{line}:" in str(info.value)


# Module state alone: no per-function state, and FLIP reads the module's state too.
MODULE_ONLY = (
    NPU.split("state: |\n  double gain;\n")[0]
    + "macros:"
    + NPU.split("\nmacros:", 1)[1].replace('p_S_: "${state}"', 'p_S_: "${module_state}"')
)


def test_module_state_without_function_state(spec_dir, tmp_path, rng):
    (spec_dir / "npu.yaml").write_text(MODULE_ONLY)
    model, path = build(spec_dir, tmp_path)
    text = model.members["npu.c"].decode()
    assert "first_state_t" not in text and "first_once_" not in text  # only the module's guard
    x = random_array(rng, (64, 32), "float32")
    z = random_array(rng, (8,), "float32")
    v, w = model(x=x, z=z)
    v_want, w_want = expected(x, z)
    np.testing.assert_allclose(v, v_want, rtol=1e-6)
    np.testing.assert_array_equal(w, w_want)
