"""Constant folding at partitioning (generator/folding.py): nodes of constants only
become constants, computed by the numpy reference, after the backends' patterns had
their pick; what is folded, what is not, and that the folded graph computes what the
unfolded one does."""

from __future__ import annotations

import numpy as np
from partition_support import graph, part, summary

from byoc.api import evaluate, load_catalog
from byoc.building import build
from byoc.generator.folding import fold_constants

DEQUANTIZED = """
graph main(x: float32[2, 3]) {
  w = const int8[2, 3] [1, -2, 3, -4, 5, 127]
  s = const float32[2, 1] [0.5, 0.25]
  z = const int8[] [1]
  return matmul(x, transpose(dequantize_linear(w, s, z)))
}
"""


def test_a_dequantized_weight_and_its_transpose_fold_into_one_float_constant():
    fn = part(DEQUANTIZED, "fused").functions[0]
    ((backend, ops, _, _),) = summary(fn)
    assert (backend, ops) == ("fused", ("matmul",))
    region = fn.nodes[0].callee
    (weight,) = [c for c in region.constants]
    assert weight.type.dtype == "float32" and weight.type.shape == (3, 2)
    w = np.array([[1, -2, 3], [-4, 5, 127]], np.float32)
    want = ((w - 1) * np.array([[0.5], [0.25]], np.float32)).T
    np.testing.assert_array_equal(weight.array, want)
    assert weight.name == "transpose_0"  # an anonymous value gets a readable name


def test_the_folded_graph_computes_what_the_graph_does():
    program = graph(DEQUANTIZED)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    (want,) = evaluate(program.functions[0], {"x": x})
    # fused's double sums (float32_dots=false): the folded weight must give the bits
    for backends in (["json"], ["fused"], ["fused", "ccompiler"]):
        options = {"fused.float32_dots": "false"} if "fused" in backends else {}
        (got,) = build(program, backends=backends, options=options)(x=x)
        np.testing.assert_array_equal(got, want, err_msg=str(backends))


def test_what_only_folded_nodes_read_goes_and_an_unused_constant_stays():
    program = graph(
        """
        graph main(x: float32[3]) {
          a = const float32[3] [1, 2, 3]
          spare = const float32[3] [4, 5, 6]
          return add(x, negative(a))
        }
        """
    )
    fn = fold_constants(program.functions[0], load_catalog())
    assert [n.op for n in fn.nodes] == ["add"]
    assert {c.name for c in fn.constants} == {"spare", fn.nodes[0].inputs[1]}
    assert "a" not in {c.name for c in fn.constants}


def test_a_result_larger_than_its_inputs_and_an_output_are_not_folded():
    program = graph(
        """
        graph main(x: float32[64, 64]) {
          k = const float32[] [2]
          big = expand(k, newshape=[64, 64])
          two = add(k, k)
          return add(x, big), two
        }
        """
    )
    fn = fold_constants(program.functions[0], load_catalog())
    assert [n.op for n in fn.nodes] == ["expand", "add", "add"]


def test_explicit_regions_are_kept_as_they_are():
    program = graph(
        """
        graph main(x: float32[3]) {
          a = const float32[3] [1, 2, 3]
          y = @json { return negative(a) }
          return add(x, y)
        }
        """
    )
    fn = fold_constants(program.functions[0], load_catalog())
    assert fn == program.functions[0]
