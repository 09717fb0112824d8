"""A pattern's macro names a node's attribute as ``${<node>.<attr>}``, or as
``${<attr>}`` alone where one node of the pattern alone has it, so one macro serves an
op and the patterns of it with the same arguments (spec/patterns.py,
``Pattern.attribute``; generator/composite.py, ``composite_values``). An attribute that
several nodes have must be named: a located SpecError says which nodes have it."""

from __future__ import annotations

import numpy as np
import pytest

import byoc
from byoc.api import load_backend
from byoc.errors import SpecError

SPEC = """\
version: 1
name: leaky
kind: c_source
dtypes: [float32]
ranks: [2]
compile: {compiler: cc, language: c, std: c99, flags: [-O1, -Wall, -Wextra, -Werror]}
macros:
  LEAKY:
    inputs: 1
    params: {p_ID_: "${symbol}", p_N_: "${size}", p_ALPHA_: "@ALPHA@"}
    body: |
      static void p_ID_(const float* x, float* out) {
        for (int64_t k = 0; k < p_N_; ++k) out[k] = x[k] > 0 ? x[k] : (float)p_ALPHA_ * x[k];
      }
  ADD_LEAKY:
    inputs: 2
    params: {p_ID_: "${symbol}", p_N_: "${size}", p_ALPHA_: "@ALPHA@"}
    body: |
      static void p_ID_(const float* a, const float* b, float* out) {
        for (int64_t k = 0; k < p_N_; ++k) {
          const float s = a[k] + b[k];
          out[k] = s > 0 ? s : (float)p_ALPHA_ * s;
        }
      }
ops:
  leaky_relu: {macros: {2: LEAKY}}
patterns:
  add_leaky:
    inputs: [a, b]
    match: |
      return leaky_relu(add(a, b))
    macros: {2: ADD_LEAKY}
"""

GRAPH = """\
graph main(a: float32[3, 5], b: float32[3, 5]) {
  s = leaky_relu(add(a, b), alpha=0.25)
  return leaky_relu(s, alpha=0.5)
}
"""


def spec_dir(tmp_path, alpha: str, extra: str = ""):
    (tmp_path / "leaky.yaml").write_text(SPEC.replace("@ALPHA@", alpha) + extra)
    return [str(tmp_path)]


@pytest.mark.parametrize("alpha", ["${alpha}", "${leaky_relu.alpha}"])
def test_one_macro_argument_serves_the_op_and_the_pattern(tmp_path, rng, alpha):
    """``${alpha}`` and ``${leaky_relu.alpha}`` are the same value in the op's and in
    the pattern's macro: the graph's two leaky relus keep their own alphas."""
    path = spec_dir(tmp_path, alpha)
    program = byoc.parse(GRAPH, "graph")
    model = byoc.build(program, backends=["leaky"], spec_path=path)
    assert "ADD_LEAKY(leaky_0_0, 15, 0.25)" in model.text("leaky.c")
    assert "LEAKY(leaky_0_1, 15, 0.5)" in model.text("leaky.c")
    a, b = rng.standard_normal((3, 5), dtype=np.float32), rng.standard_normal((3, 5), dtype=np.float32)
    (got,) = model(a=a, b=b)
    np.testing.assert_array_equal(got, byoc.evaluate(program.functions[0], {"a": a, "b": b})[0])


def test_an_attribute_of_two_nodes_must_be_named(tmp_path):
    twice = """\
  leaky_twice:
    inputs: [x]
    match: |
      inner = leaky_relu(x)
      return leaky_relu(inner)
    macros: {2: LEAKY}
"""
    with pytest.raises(SpecError) as info:
        load_backend("leaky", spec_dir(tmp_path, "${alpha}", twice))
    error = info.value
    assert "2 nodes of the pattern have that attribute: ${inner.alpha}, node 1 (leaky_relu)" in error.message
    assert error.location.file.endswith("leaky.yaml") and error.location.line == 38
    assert "name the node" in error.hint
