"""The half-precision examples end to end, and backends that do not declare a dtype.

examples/mlp_float16.graph and examples/mlp_bfloat16.graph run on ``--backend fused``
and match the numpy reference within ``byoc run``'s default tolerance for their dtype,
on several seeds; the measured errors are compared with one ulp of the dtype. cblas
declares only float32 and float64, and dnnl float32 and the 16-bit floats only where
oneDNN computes them on this CPU (its probe; tests/test_probe.py runs them where it
does): partitioning leaves a float16 or bool op those lack to the next backend in
``--backend`` order instead of failing.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conftest import EXAMPLES, run_cli

import byoc
from byoc.api import parse
from byoc.building import build
from byoc.generator.partition import partition
from byoc.runtime.probe import for_machine


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_half_mlp_runs_on_fused(dtype, seed, capsys):
    path = EXAMPLES / f"mlp_{dtype}.graph"
    rc, out, err = run_cli(capsys, "run", path, "--backend", "fused", "--seed", str(seed))
    assert rc == 0, err
    assert "(backends: fused)" in out
    assert "result: every output matches the numpy reference" in out


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_mlp_is_within_an_ulp_of_the_reference(dtype):
    """The fused module's softmax rows against the float64-then-rounded reference:
    at most one ulp of the dtype apart (each node rounded once, from float32 or double)."""
    program = parse((EXAMPLES / f"mlp_{dtype}.graph").read_text(), "graph")
    fn = program.functions[0]
    rng = np.random.default_rng(7)
    inputs = {p.name: rng.uniform(-1, 1, size=p.type.shape).astype(dtype) for p in fn.params}
    (got,) = build(program, backends=["fused"])(**inputs)
    (want,) = byoc.evaluate(fn, inputs)
    assert got.dtype == want.dtype == np.dtype(dtype)
    eps = float(ml_dtypes.finfo(dtype).eps)
    error = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert float(error.max()) <= eps * float(np.abs(want.astype(np.float64)).max())
    np.testing.assert_allclose(got.astype(np.float64).sum(axis=-1), 1.0, atol=10 * eps)


HALF_GRAPH = """\
graph main(x: DTYPE[2, 8], w: DTYPE[4, 8], b: DTYPE[4]) {
  h = relu(bias_add(dense(x, w), b))
  m = greater(h, b)
  return softmax(h), where(m, h, b), m
}
"""


@pytest.mark.parametrize("library", ["dnnl", "cblas"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_library_backends_leave_other_dtypes_to_the_next_backend(library, dtype):
    text = HALF_GRAPH.replace("DTYPE", dtype)
    program = parse(text, "graph")
    spec = for_machine(byoc.load_backend(library), {dtype, "bool"})
    if dtype in spec.dtypes:
        pytest.skip(f"{library} computes {dtype} on this CPU (tests/test_probe.py runs it)")
    assert "bool" not in spec.dtypes
    (fn,) = partition(program, [spec, byoc.load_backend("fused")]).functions
    regions = [n.callee for n in fn.nodes if n.callee is not None]
    assert [n.op for n in fn.nodes] == ["call"] and regions[0].backend == "fused"
    (alone,) = partition(program, [spec]).functions  # nothing offloads; no error either
    assert all(n.callee is None for n in alone.nodes)
    # and it runs: built with the library first, everything on fused
    rng = np.random.default_rng(3)
    inputs = {
        p.name: rng.uniform(-1, 1, size=p.type.shape).astype(dtype) for p in program.functions[0].params
    }
    got = build(program, backends=[library, "fused"])(**inputs)
    want = byoc.evaluate(program.functions[0], inputs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        if g.dtype == np.bool_:
            np.testing.assert_array_equal(g, w)
        else:
            eps = float(ml_dtypes.finfo(dtype).eps)
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=eps, atol=eps)
