"""One placeholder form for attributes: an op's macro may name the op's attribute as a
pattern's macro names its node's, ``${leaky_relu.alpha}`` as well as ``${alpha}``, so
that one macro serves the op and a pattern of it (dnnl's DNNL_CONV2D serves the op
conv and the pattern conv_relu). The values are the same; another op's prefix is a
located error."""

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
ops:
  leaky_relu: {macros: {2: LEAKY}}
"""

GRAPH = "graph main(x: float32[3, 5]) {\n  y = @forms { return leaky_relu(x, alpha=0.25) }\n  return y\n}\n"


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
