"""The `fused` spec's dot-reduction update (conv, dense, matmul) as one fused multiply-add
for float32 inputs (its prelude's ``fused_madd_float32``): a float32 product is exact in
double, so ``fma(a, b, acc)`` rounds once where ``acc + a * b`` rounds, and the outputs are
the same bits.

Each case is built twice from the same graph, with the shipped spec and with a copy whose
prelude never takes the fused multiply-add (its ``#if`` made ``#if 0``), and run on the
same inputs: the outputs must be identical. The inputs spread over many binades, so that
the products carry their full 48 significand bits and the sums round often.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tvm_ffi
from compile_util import compile_library
from shipped_fused import FUSED_YAML, SUPPORT, module_of, write_fused_copy
from test_fused_anchors import shape_text

from byoc.api import load_backend, load_catalog, parse
from byoc.generator import generator_for
from byoc.generator.lowering import lower

CONDITION = "#if defined(FP_FAST_FMA) || defined(byoc_clones_have_fma)"


def _plain_spec(tmp_path: Path) -> Path:
    """A copy of the shipped spec whose prelude keeps the multiply and the add."""
    text = FUSED_YAML.read_text()
    assert CONDITION in text
    folder = tmp_path / "plain_spec"
    write_fused_copy(folder, text.replace(CONDITION, "#if 0"))
    return folder


def _run(text: str, spec_path: Path | None, tmp_path: Path, inputs: dict) -> tuple[str, list[np.ndarray]]:
    program = parse(text, "graph", file="fma.graph")

    externals = lower(program, lambda name: load_backend(name, spec_path), load_catalog()).externals_for(
        "fused"
    )
    spec = load_backend("fused", spec_path=spec_path)
    artifact = module_of(generator_for(spec.kind)(externals, spec, load_catalog(), spec.option_values()))
    lib = compile_library({"fused.c": artifact.text, **SUPPORT}, "fused.c", tmp_path)
    (fn,) = externals
    outputs = [np.full(t.shape, 99, dtype=t.dtype) for t in fn.output_types]
    tvm_ffi.load_module(str(lib))[fn.name](*(inputs[p.name] for p in fn.params), *outputs)
    return artifact.text, outputs


def _spread(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Values of both signs over 2**-20 .. 2**20, with every significand bit set at random."""
    return (rng.uniform(-1.0, 1.0, shape) * np.exp2(rng.integers(-20, 21, shape))).astype(dtype)


CASES = [
    ([("x", (1, 8, 5, 56)), ("w", (8, 8, 3, 3))], "conv(x, w, pads=[1, 1, 1, 1])"),
    ([("x", (2, 4, 6, 19)), ("w", (6, 2, 3, 2))], "conv(x, w, groups=2, strides=[1, 2], pads=[0, 1, 2, 1])"),
    ([("x", (1, 3, 5, 7)), ("w", (3, 2, 3, 3))], "conv_transpose(x, w, strides=[2, 2])"),
    ([("x", (5, 70)), ("w", (33, 70))], "dense(x, w)"),
    ([("a", (2, 3, 40)), ("b", (40, 24))], "matmul(a, b)"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("params", "expr"), CASES, ids=[c[1].split("(")[0] for c in CASES])
def test_fused_multiply_add_is_the_multiply_and_the_add(params, expr, dtype, tmp_path):
    args = ", ".join(f"{n}: {dtype}[{shape_text(s)}]" for n, s in params)
    text = f"graph main({args}) {{\n  r = @fused {{ return {expr} }}\n  return r\n}}\n"
    rng = np.random.default_rng(11)
    inputs = {n: _spread(rng, s, dtype) for n, s in params}
    fused, got = _run(text, None, tmp_path / "fma", inputs)
    plain, want = _run(text, _plain_spec(tmp_path), tmp_path / "plain", inputs)
    assert f"fused_madd_{dtype}(" in fused and CONDITION in fused and "#if 0" in plain
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w, err_msg=f"{expr} {dtype}: fma and multiply-add differ")
