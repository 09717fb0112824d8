"""How far `byoc run` lets an output lie from the numpy reference in steps of a
quantization (byoc/output_steps.py): a quantize_linear's result one step, its
dequantize_linear one scale, anything else none; and the comparison that uses it."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import run_cli

from byoc.api import load_catalog, parse
from byoc.cli.compare import compare
from byoc.output_steps import output_steps

GRAPH = """\
graph main(x: float32[2, 4], q: int8[2, 4], s: float32[]) {
  xs = const float32[] [0.05]
  xz = const int8[] [3]
  y = quantize_linear(x, xs, xz)
  return y, dequantize_linear(y, xs, xz), dequantize_linear(q, xs, xz), relu(y), dequantize_linear(y, s, xz)
}
"""


def test_a_quantization_steps_and_its_dequantization_scales_it():
    (fn,) = parse(GRAPH, "graph").functions
    steps = output_steps(fn, load_catalog())
    # quantized: one step; dequantized: one scale (float32's 0.05, widened); a graph
    # input's dequantization, an op without a step rule, a scale computed at run time: none
    assert steps == [1.0, float(np.float32(0.05)), 0.0, 0.0, 0.0]


def test_steps_pass_through_regions():
    text = GRAPH.replace(
        "  y = quantize_linear(x, xs, xz)", "  y = @json { return quantize_linear(x, xs, xz) }"
    )
    (fn,) = parse(text, "graph").functions
    assert output_steps(fn, load_catalog())[:2] == [1.0, float(np.float32(0.05))]


@pytest.mark.parametrize(
    ("got", "step", "status"),
    [([5, 7], 0.0, "MISMATCH"), ([5, 7], 1.0, "ok"), ([5, 8], 1.0, "MISMATCH"), ([4, 6], 1.0, "ok")],
)
def test_integers_may_lie_within_their_step(got, step, status):
    want = np.array([5, 6], np.uint8)
    assert compare(np.array(got, np.uint8), want, None, None, step)[0] == status


def test_floats_may_lie_one_scale_off():
    want = np.array([0.1, 0.25], np.float32)
    one_off = want + np.float32(0.05) * np.array([0, 1], np.float32)
    assert compare(one_off, want, None, None)[0] == "MISMATCH"
    assert compare(one_off, want, None, None, float(np.float32(0.05)))[0] == "ok"
    assert compare(want + np.float32(0.1), want, None, None, float(np.float32(0.05)))[0] == "MISMATCH"


def test_byoc_run_of_an_int8_kernel_passes_within_one_step(capsys, tmp_path):
    """ccompiler's int8 conv sums the codes exactly in int32; the reference sums
    dequantized float32 values. Wherever they land one step apart, the run still
    passes and says so."""
    from test_ccompiler_int8 import qconv_case

    text, x, _ = qconv_case(np.random.default_rng(1), relu=False, bias=True, per_channel=True)
    path = tmp_path / "q.graph"
    path.write_text(text)
    code, out, err = run_cli(capsys, "run", path, "--seed", "3")
    assert code == 0, out + err
    assert "result: every output matches the numpy reference" in out
    error = int(re.search(r"\]  uint8\s+(\d+)\s+ok", out).group(1))
    assert error <= 1
    assert ("within one step of a quantization: output 0" in out) == (error == 1)
