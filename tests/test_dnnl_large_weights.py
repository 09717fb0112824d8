"""Packed weights of 2 MB or more (spec/backends/dnnl/dnnl_support.c,
dnnl_byoc_weights_alloc): on 2 MB boundaries, rounded up to them, and marked for
transparent huge pages. The layout oneDNN packs them into must not care where they
sit: a conv, a conv with a folded batch_norm and a matmul by constant weights past
2 MB, each run against the numpy reference, twice (the packed copy is read again).
"""

from __future__ import annotations

import numpy as np
import pytest
from libraries import missing_library

import byoc
from byoc.api import evaluate, load_backend, load_catalog, parse, print_program
from byoc.generator.partition import partition

if missing_library("dnnl"):
    pytest.skip(missing_library("dnnl"), allow_module_level=True)

from conftest import random_array  # noqa: E402
from test_gen_dnnl import BACKEND, assert_close, const  # noqa: E402 - after the skip


def program_of(text: str):
    return partition(parse(text, "graph", file="large.graph"), [load_backend(BACKEND)], load_catalog())


def run_twice(program, rng) -> None:
    """Two calls of one build, on new inputs each, against the reference."""
    model = byoc.build(program)
    fn = program.functions[0]
    for _ in range(2):
        inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
        (got,), (want,) = model(**inputs), evaluate(fn, inputs)
        assert_close(got, want)


def conv_graph(channels: int, batch_norm: bool) -> str:
    """A 3x3 conv of ``channels`` in and out (256: 2.25 MB of weights), then relu."""
    rng = np.random.default_rng(5)
    c = channels
    norm = ""
    y = "conv(x, w, pads=[1, 1, 1, 1])"
    if batch_norm:
        norm = "".join(f"  {n} = {const(rng, (c,), lo, hi)}\n" for n, lo, hi in PARAMS)
        y = f"batch_norm({y}, s, t, m, v)"
    return f"""\
graph main(x: float32[1, {c}, 6, 6]) {{
  w = {const(rng, (c, c, 3, 3), -0.05, 0.05)}
{norm}  return relu({y})
}}
"""


PARAMS = (("s", 0.5, 1.5), ("t", -0.2, 0.2), ("m", -0.2, 0.2), ("v", 0.5, 2.0))


@pytest.mark.parametrize("batch_norm", [False, True], ids=["conv", "conv_bn"])
def test_a_conv_of_weights_past_2_mb_runs_like_the_reference(batch_norm, rng):
    program = program_of(conv_graph(256, batch_norm))
    assert "_const " in print_program(program)  # packed at init
    run_twice(program, rng)


def test_a_matmul_by_constant_weights_past_2_mb_runs_like_the_reference(rng):
    w = const(np.random.default_rng(6), (1024, 520), -0.05, 0.05)  # 2.03 MB
    program = program_of(f"graph main(x: float32[2, 3, 1024]) {{\n  w = {w}\n  return matmul(x, w)\n}}\n")
    assert "@dnnl.matmul_const " in print_program(program)
    run_twice(program, rng)
