"""One placeholder form for attributes: an op's macro may name the op's attribute as a
pattern's macro names its node's, ``${leaky_relu.alpha}`` as well as ``${alpha}``, and
a pattern's macro may name an attribute that one node alone has as an op's macro does,
``${alpha}`` (spec/patterns.py, ``Pattern.attribute``; generator/composite.py,
``composite_values``), so that one macro serves the op and patterns of it (dnnl's
DNNL_CONV2D serves the op conv and the pattern conv_relu, DNNL_POOL2D the op max_pool
and the avg_pool patterns). The values are the same; another op's prefix is a located
error, and so is an attribute that several nodes of a pattern have, unnamed."""

from __future__ import annotations

import numpy as np
import pytest

import byoc
from byoc.api import load_backend
from byoc.errors import SpecError

SPEC = """\
version: 1
name: forms
kind: c_source
dtypes: [float32]
ranks: [2]
compile: {compiler: cc, language: c, std: c99, flags: [-O1, -Wall, -Wextra, -Werror]}
macros:
  LEAKY:
    inputs: 1
    params: {p_ID_: "${symbol}", p_N_: "${size}", p_A_: "${ALPHA}"}
    body: |
      static void p_ID_(const float* a, float* out) {
        for (int64_t k = 0; k < p_N_; ++k) out[k] = a[k] >= 0 ? a[k] : (float)(p_A_) * a[k];
      }
  ADD_LEAKY:
    inputs: 2
    params: {p_ID_: "${symbol}", p_N_: "${size}", p_A_: "${ALPHA}"}
    body: |
      static void p_ID_(const float* a, const float* b, float* out) {
        for (int64_t k = 0; k < p_N_; ++k) {
          const float s = a[k] + b[k];
          out[k] = s >= 0 ? s : (float)(p_A_) * s;
        }
      }
ops:
  leaky_relu: {macros: {2: LEAKY}}
"""

PATTERN = """\
patterns:
  add_leaky:
    inputs: [a, b]
    match: |
      return leaky_relu(add(a, b))
    macros: {2: ADD_LEAKY}
"""

GRAPH = "graph main(x: float32[3, 5]) {\n  y = @forms { return leaky_relu(x, alpha=0.25) }\n  return y\n}\n"
TWO = """\
graph main(a: float32[3, 5], b: float32[3, 5]) {
  s = leaky_relu(add(a, b), alpha=0.25)
  return leaky_relu(s, alpha=0.5)
}
"""


@pytest.mark.parametrize("form", ["${alpha}", "${leaky_relu.alpha}"])
def test_both_forms_name_the_ops_attribute(tmp_path, rng, form):
    (tmp_path / "forms.yaml").write_text(SPEC.replace("${ALPHA}", form))
    program = byoc.parse(GRAPH, "graph")
    model = byoc.build(program, spec_path=[str(tmp_path)])
    x = rng.standard_normal((3, 5)).astype(np.float32)
    (got,) = model.run(x=x)
    np.testing.assert_array_equal(got, byoc.evaluate(program.functions[0], {"x": x})[0])


def test_another_ops_prefix_is_a_located_error(tmp_path):
    text = SPEC.replace("${ALPHA}", "${relu.alpha}")
    (tmp_path / "forms.yaml").write_text(text)
    with pytest.raises(SpecError) as info:
        load_backend("forms", [str(tmp_path)])
    assert "undefined placeholder ${relu.alpha}" in info.value.message
    assert "${<op>.<attr>}" in (info.value.hint or "")
    assert (info.value.location.file, info.value.location.line) == (str(tmp_path / "forms.yaml"), 10)


@pytest.mark.parametrize("form", ["${alpha}", "${leaky_relu.alpha}"])
def test_one_macro_argument_serves_the_op_and_the_pattern(tmp_path, rng, form):
    """``${alpha}`` and ``${leaky_relu.alpha}`` are the same value in the op's and in
    the pattern's macro: the graph's two leaky relus keep their own alphas."""
    (tmp_path / "forms.yaml").write_text(SPEC.replace("${ALPHA}", form) + PATTERN)
    program = byoc.parse(TWO, "graph")
    model = byoc.build(program, backends=["forms"], spec_path=[str(tmp_path)])
    assert "ADD_LEAKY(forms_0_0, 15, 0.25)" in model.text("forms.c")
    assert "LEAKY(forms_0_1, 15, 0.5)" in model.text("forms.c")
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
    text = SPEC.replace("${ALPHA}", "${alpha}") + PATTERN + twice
    (tmp_path / "forms.yaml").write_text(text)
    with pytest.raises(SpecError) as info:
        load_backend("forms", [str(tmp_path)])
    error = info.value
    assert "2 nodes of the pattern have that attribute: ${inner.alpha}, node 1 (leaky_relu)" in error.message
    use = text.split("\n").index("    macros: {2: LEAKY}") + 1  # the pattern's use of the macro
    assert error.location.file.endswith("forms.yaml") and error.location.line == use
    assert "name the node" in error.hint
