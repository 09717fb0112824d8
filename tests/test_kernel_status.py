"""c_source kernels that report failures (a macro's ``status: true``;
generator/c_source/body.py): such a kernel returns an int, the body stops at the first
one that is not 0 and releases its workspace, and the call raises RuntimeError naming
the kernel and the node it computes, with its source location. Kernels without a
status stay plain statements. A kernel may say why it fails (``byoc_error``, a printf
format): the message follows the kernel and node in the error, from Python and from
``byoc run``. A spec's top-level ``status: true`` is every macro's default."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tvm_ffi
from compile_util import module_artifact
from conftest import module_library, random_array, run_cli

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


def generated(spec_dir) -> tuple[str, list[str]]:
    """The C module that backend ``checked`` of ``spec_dir`` generates for GRAPH, and the
    names of the files beside it."""
    spec = load_backend("checked", spec_path=[str(spec_dir)])
    program = parse(GRAPH, "graph", file="roots.graph")
    externals = lower(program, lambda name: load_backend(name, [str(spec_dir)]), byoc.load_catalog())
    artifacts = generator_for(spec.kind)(externals.externals_for("checked"), spec, byoc.load_catalog(), {})
    module = module_artifact(artifacts)
    return module.text, [a.name for a in artifacts if a is not module]


def test_the_generated_body_checks_only_status_kernels(spec_dir):
    text, beside = generated(spec_dir)
    assert text.count("goto done;") == 2  # the two sqrt calls; the negates are plain
    assert "  roots_1(" in text and "if (roots_1(" not in text
    assert "return byoc_raise_failure(roots_failures_[failed - 1], byoc_error_message_);" in text
    assert "byoc_errors.c" in beside  # byoc_error's definition, linked
    # the header that declares the message helper comes before the prelude, whose helpers may call it
    assert text.index('#include "byoc_module.h"') < text.index("#include <math.h>")


def test_a_module_without_status_kernels_has_no_message_helper(spec_dir):
    (spec_dir / "checked.yaml").write_text(CHECKED.replace("    status: true\n", ""))
    text, beside = generated(spec_dir)
    assert "byoc_error" not in text and "byoc_errors.c" not in beside and "goto done;" not in text


def test_a_failure_in_a_part_of_a_long_body_is_raised(spec_dir, tmp_path, rng, monkeypatch):
    """A body split into parts (generator/c_source/body.py's PART_CALLS) returns a failing part's status."""
    from byoc.generator.c_source import body as c_source_body

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


# SAYING_SQRT says why it fails, with the offending value and index, unless the value
# is below -100: then it fails without a word, which shows that a message never
# outlives the call that set it.
SAYING = CHECKED.replace(
    "          if (a[k] < 0) return 1;\n",
    "          if (a[k] < -100) return 1;\n"
    '          if (a[k] < 0) return byoc_error("negative input %g at index %lld", (double)a[k], (long long)k);\n',
)


def negative_at(x: np.ndarray, index: int, value: float) -> np.ndarray:
    """``x`` (all positive) with ``value`` at flat position ``index``."""
    x = x.copy()
    x.flat[index] = value
    return x


def said(x: np.ndarray) -> str:
    """What SAYING_SQRT says about ``x``: its first negative value and where, as C's %g prints it."""
    k = int(np.flatnonzero(x < 0)[0])
    return "negative input %g at index %d" % (x.flat[k], k)  # noqa: UP031 - C's printf format


def test_a_kernel_says_why_it_fails(spec_dir, tmp_path, rng):
    (spec_dir / "checked.yaml").write_text(SAYING)
    fn, model = roots(spec_dir, tmp_path)
    positive = np.abs(random_array(rng, (8, 4), "float32")) + 1
    x = negative_at(positive, 3, -1.5)
    expected = re.escape(
        f"roots: kernel roots_0 reported a failure; it computes a = sqrt(...) at roots.graph:3:5 and 1 more node(s); it says: {said(x)}"
    )
    with pytest.raises(RuntimeError, match=f"^{expected}$"):
        fn(x, np.zeros_like(x))
    with pytest.raises(RuntimeFailure, match=expected):
        model(x=x)
    # a failure without a message, after one with a message: only the kernel and node
    quiet = negative_at(positive, 5, -200.0)
    with pytest.raises(RuntimeError, match="roots_0 reported a failure") as info:
        fn(quiet, np.zeros_like(x))
    assert "it says" not in str(info.value)
    # and a message again, from another thread: each thread has its own
    from concurrent.futures import ThreadPoolExecutor

    other = negative_at(positive, 17, -2.25)
    with ThreadPoolExecutor(1) as pool, pytest.raises(RuntimeError, match=re.escape(said(other))):
        pool.submit(fn, other, np.zeros_like(x)).result()
    out = np.zeros_like(x)
    fn(np.zeros_like(x), out)  # and a good call after them all
    np.testing.assert_array_equal(out, np.zeros_like(x))


def test_byoc_run_reports_what_the_kernel_says(spec_dir, tmp_path, rng, capsys):
    (spec_dir / "checked.yaml").write_text(SAYING)
    graph = tmp_path / "roots.graph"
    graph.write_text(GRAPH)
    x = negative_at(np.abs(random_array(rng, (8, 4), "float32")) + 1, 3, -1.5)
    np.savez(tmp_path / "inputs.npz", x=x)
    rc, _, err = run_cli(capsys, "run", graph, "--spec-path", spec_dir, "--inputs", tmp_path / "inputs.npz")
    assert rc != 0
    assert f"kernel roots_0 reported a failure; it computes a = sqrt(...) at {graph}:3:5" in err
    assert f"it says: {said(x)}" in err
    assert "Traceback" not in err


# Every macro returns a status by default; NEGATE says it does not.
DEFAULTED = (
    CHECKED.replace("    status: true\n", "")
    .replace("macros:\n", "status: true\nmacros:\n")
    .replace("  NEGATE:\n    inputs: 1\n", "  NEGATE:\n    inputs: 1\n    status: false\n")
)


def test_status_true_at_the_top_is_every_macros_default(spec_dir, tmp_path, rng):
    (spec_dir / "checked.yaml").write_text(DEFAULTED)
    text, _ = generated(spec_dir)
    assert text.count("goto done;") == 2  # the sqrt calls check a status; NEGATE said false
    assert "if (roots_1(" not in text
    fn, _ = roots(spec_dir, tmp_path)
    x = np.abs(random_array(rng, (8, 4), "float32")) + 1
    with pytest.raises(RuntimeError, match="roots_0 reported a failure"):
        fn(x, np.zeros_like(x))
    out = np.ones_like(x)
    fn(np.zeros_like(x), out)
    (want,) = evaluate(parse(GRAPH, "graph").functions[0], {"x": np.zeros_like(x)})
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("value", ["yes please", "1", "[true]"])
def test_a_bad_default_status_is_a_located_spec_error(spec_dir, value):
    text = DEFAULTED.replace("status: true\nmacros:", f"status: {value}\nmacros:")
    (spec_dir / "checked.yaml").write_text(text)
    line = text.splitlines().index(f"status: {value}") + 1
    with pytest.raises(SpecError, match="status must be") as info:
        load_backend("checked", spec_path=[str(spec_dir)])
    assert f"checked.yaml:{line}:" in str(info.value)
