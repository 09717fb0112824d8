"""c_source kernels that report failures (a macro's ``status: true``;
generator/c_source_body.py): such a kernel returns an int, the body stops at the first
one that is not 0 and releases its workspace, and the call raises RuntimeError naming
the kernel and the node it computes, with its source location. Kernels without a
status stay plain statements."""

from __future__ import annotations

import numpy as np
import pytest
import tvm_ffi
from conftest import module_library, random_array

import byoc
from byoc.api import evaluate, load_backend, parse
from byoc.errors import RuntimeFailure, SpecError
from byoc.generator import generator_for
from byoc.generator.lowering import lower

# CHECKED_SQRT refuses a negative input (returns 1) instead of writing NaN; NEGATE is
# a plain void kernel. The region's two sqrt nodes share one kernel.
CHECKED = """\
version: 1
name: checked
kind: c_source
dtypes: [float32]
ranks: [2]
compile: {compiler: cc, language: c, std: c99, flags: [-O1, -Wall, -Wextra, -Werror]}
prelude: |
  #include <math.h>
macros:
  CHECKED_SQRT:
    inputs: 1
    status: true
    params: {p_ID_: "${symbol}", p_N_: "${size}"}
    body: |
      static int p_ID_(const float* a, float* out) {
        for (int64_t k = 0; k < p_N_; ++k) {
          if (a[k] < 0) return 1;
          out[k] = sqrtf(a[k]);
        }
        return 0;
      }
  NEGATE:
    inputs: 1
    params: {p_ID_: "${symbol}", p_N_: "${size}"}
    body: |
      static void p_ID_(const float* a, float* out) {
        for (int64_t k = 0; k < p_N_; ++k) out[k] = -a[k];
      }
ops:
  sqrt: {macros: {default: CHECKED_SQRT}}
  negative: {macros: {default: NEGATE}}
"""

GRAPH = """\
graph main(x: float32[8, 4]) {
  y = @checked as roots {
    a = sqrt(x)
    b = negative(a)
    return sqrt(b)
  }
  return y
}
"""


@pytest.fixture
def spec_dir(tmp_path):
    d = tmp_path / "specs"
    d.mkdir()
    (d / "checked.yaml").write_text(CHECKED)
    return d


def roots(spec_dir, tmp_path):
    """The exported function of GRAPH's region, from a library file of its own."""
    model = byoc.build(parse(GRAPH, "graph", file="roots.graph"), spec_path=[str(spec_dir)])
    return tvm_ffi.load_module(str(module_library(model, tmp_path / "libroots.so")))["roots"], model


def test_a_failing_kernel_raises_with_its_node_and_location(spec_dir, tmp_path, rng):
    fn, _ = roots(spec_dir, tmp_path)
    x = np.abs(random_array(rng, (8, 4), "float32"))
    out = np.zeros_like(x)
    # The first sqrt succeeds on |x|; the second gets -sqrt(|x|), negative where x != 0.
    with pytest.raises(
        RuntimeError, match=r"roots: kernel roots_0 reported a failure; it computes a = sqrt"
    ) as info:
        fn(x, out)
    assert "roots.graph:3:5" in str(info.value) and "and 1 more node(s)" in str(info.value)
    # The failure released the workspace: later calls work, whatever failed before.
    with pytest.raises(RuntimeError, match="roots_0 reported a failure"):
        fn(-x - 1, out)


def test_a_kernel_that_reports_success_gives_the_reference(spec_dir, tmp_path):
    fn, _ = roots(spec_dir, tmp_path)
    x = np.zeros((8, 4), np.float32)  # sqrt(-0) = -0 is not negative: every kernel succeeds
    out = np.full_like(x, 7.0)
    fn(x, out)
    (want,) = evaluate(parse(GRAPH, "graph").functions[0], {"x": x})
    np.testing.assert_array_equal(out, want)


def test_the_model_call_raises_the_kernels_failure(spec_dir, tmp_path, rng):
    _, model = roots(spec_dir, tmp_path)
    x = np.abs(random_array(rng, (8, 4), "float32")) + 1
    with pytest.raises(RuntimeFailure, match="roots_0 reported a failure; it computes a = sqrt"):
        model(x=x)  # byoc's error, with the failing kernel's message
    np.testing.assert_array_equal(model(x=np.zeros_like(x))[0], np.zeros_like(x))


def test_the_generated_body_checks_only_status_kernels(spec_dir):
    spec = load_backend("checked", spec_path=[str(spec_dir)])
    program = parse(GRAPH, "graph", file="roots.graph")
    externals = lower(program, lambda name: load_backend(name, [str(spec_dir)]), byoc.load_catalog())
    (artifact,) = generator_for(spec.kind)(externals.externals_for("checked"), spec, byoc.load_catalog(), {})
    text = artifact.text
    assert text.count("goto done;") == 2  # the two sqrt calls; the negates are plain
    assert "  roots_1(" in text and "if (roots_1(" not in text
    assert 'return byoc_raise("RuntimeError", roots_failures_[failed - 1]);' in text


def test_a_failure_in_a_part_of_a_long_body_is_raised(spec_dir, tmp_path, rng, monkeypatch):
    """A body split into parts (generator/c_source_body.PART_CALLS) returns a failing part's status."""
    from byoc.generator import c_source_body

    monkeypatch.setattr(c_source_body, "PART_CALLS", 2)
    fn, _ = roots(spec_dir, tmp_path)
    x = np.abs(random_array(rng, (8, 4), "float32")) + 1
    with pytest.raises(RuntimeError, match="roots_0 reported a failure"):
        fn(x, np.zeros_like(x))
    zeros = np.zeros_like(x)
    out = np.ones_like(x)
    fn(zeros, out)
    np.testing.assert_array_equal(out, zeros)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("    status: true\n", "    status: yes please\n"), "macro CHECKED_SQRT: status must be"),
        (("    status: true\n", "    status: 1\n"), "macro CHECKED_SQRT: status must be"),
    ],
)
def test_a_bad_status_is_a_located_spec_error(spec_dir, edit, message):
    (spec_dir / "checked.yaml").write_text(CHECKED.replace(*edit))
    with pytest.raises(SpecError, match=message) as info:
        byoc.build(parse(GRAPH, "graph"), spec_path=[str(spec_dir)])
    assert "checked.yaml:" in str(info.value)
