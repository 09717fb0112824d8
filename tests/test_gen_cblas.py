"""The cblas backend (spec/backends/cblas.yaml, a c_source spec calling OpenBLAS):
golden C, built by byoc's runtime with the library its spec requires, and run
against the numpy reference.

Every case is generated and compared with its golden file under
tests/golden/test_gen_cblas/, then built through ``byoc.build`` (the spec's flags:
-Wall -Wextra -Werror; the library's -I, -L, -rpath and -l from ``requires:``) and
run on seeded random inputs. gemm computes in the tensors' type, so float32 results
are compared with a float32 tolerance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from compile_util import module_artifact
from conftest import EXAMPLES, random_array
from libraries import missing_library

import byoc
from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.generator import generator_for
from byoc.generator.lowering import lower
from byoc.generator.partition import partition
from byoc.ir import Program

if missing_library("cblas"):
    pytest.skip(missing_library("cblas"), allow_module_level=True)

BACKEND = "cblas"
REPO = Path(__file__).resolve().parent.parent
RTOL = {"float32": 2e-5, "float64": 1e-12}

GEMMS = """\
graph main(x: float64[5, 7], w: float64[3, 7], a: float32[4, 6], b: float32[6, 2],
           c: float32[4, 2]) {
  d = @cblas {
    return log_softmax(tanh(dense(x, w)), axis=1)
  }
  m = @cblas {
    p = matmul(a, b)
    return multiply(sigmoid(subtract(p, c)), relu(add(p, c)))
  }
  return d, m
}
"""

# Empty gemms: K == 0 (an empty sum, zeros) and B == 0 (no rows) never reach BLAS.
EMPTY = """\
graph main(x: float32[3, 0], w: float32[4, 0], z: float64[0, 5], v: float64[2, 5]) {
  e = @cblas {
    return dense(x, w)
  }
  n = @cblas {
    return dense(z, v)
  }
  return e, n
}
"""

# N-D matmul as numpy has it: a linear layer's [B, S, K] by [K, N] (one gemm over
# all rows), attention's batched products, batch axes broadcast both ways, 1-D operands
# (a row, a column), and an empty sum.
BATCHED = """\
graph main(x: float32[2, 3, 5], w: float32[5, 4], q: float32[2, 3, 4, 6], k: float32[2, 3, 6, 4],
           p: float64[3, 1, 2, 5], r: float64[4, 5, 3], v: float32[5], s: float32[2, 5, 3],
           t: float32[3], e: float32[2, 3, 0], f: float32[0, 4]) {
  a, b, c, d, g, h = @cblas {
    return matmul(x, w), matmul(q, k), matmul(p, r), matmul(v, s), matmul(s, t), matmul(e, f)
  }
  return a, b, c, d, g, h
}
"""

CASES = {
    "net_mlp": None,
    "gemms": GEMMS,
    "empty": EMPTY,
    "batched": BATCHED,
}


def program_of(case: str) -> Program:
    if CASES[case] is None:
        path = EXAMPLES / "mlp.graph"
        source = parse(path.read_text(), "graph", file=path.resolve().relative_to(REPO).as_posix())
        return partition(source, [load_backend(BACKEND)], load_catalog())
    return parse(CASES[case], "graph", file=f"{case}.graph")


def generate(program: Program) -> str:
    spec = load_backend(BACKEND)
    externals = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    artifact = module_artifact(generator_for(spec.kind)(externals, spec, load_catalog(), {}))
    return artifact.text


@pytest.mark.parametrize("case", CASES)
def test_golden(case, golden):
    assert generate(program_of(case)) == golden("c")


@pytest.mark.parametrize("case", CASES)
def test_runs_like_the_reference(case, rng):
    program = program_of(case)
    model = byoc.build(program)
    assert [m.backend for m in model.manifest.modules] == [BACKEND]
    fn = program.functions[0]
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    got = model(**inputs)
    want = evaluate(fn, inputs)
    assert len(got) == len(want) == len(fn.output_types)
    for g, w, t in zip(got, want, fn.output_types):
        assert g.shape == t.shape and g.dtype == t.dtype
        np.testing.assert_allclose(g, w, rtol=RTOL[t.dtype], atol=RTOL[t.dtype])


def test_the_whole_mlp_goes_to_cblas():
    program = program_of("net_mlp")
    (host,) = program.functions
    assert [n.callee.backend for n in host.nodes if n.callee is not None] == [BACKEND]
    assert all(n.callee is not None for n in host.nodes)


def test_the_resnet_block_runs_on_cblas_and_fused(rng):
    """conv and batch_norm go to fused; the residual add and relu to cblas. fused sums
    in double here (float32_dots=false), so the result is held at cblas's tolerance."""
    options = {"fused.float32_dots": "false"}
    model = byoc.build(EXAMPLES / "resnet_basic_block.graph", backends=[BACKEND, "fused"], options=options)
    assert sorted(m.backend for m in model.manifest.modules) == [BACKEND, "fused"]
    program = parse((EXAMPLES / "resnet_basic_block.graph").read_text(), "graph")
    fn = program.functions[0]
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    (got,) = model(**inputs)
    (want,) = evaluate(fn, inputs)
    np.testing.assert_allclose(got, want, rtol=RTOL["float32"], atol=RTOL["float32"])


def test_gemm_calls_the_prefixed_symbols():
    """scipy-openblas32 exports scipy_cblas_sgemm; the spec's cblas_prefix option says so."""
    text = generate(program_of("gemms"))
    assert "#define CBLAS_GEMM_float scipy_cblas_sgemm" in text
    assert "#define CBLAS_GEMM_double scipy_cblas_dgemm" in text
    assert "CBLAS_GEMM_ ## p_DTYPE_" in text
