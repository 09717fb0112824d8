"""Shared cases and helpers of the c_source codegen tests (test_gen_c_source*.py): the
graphs generated for ccompiler, generating their C, compiling it and checking a call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tvm_ffi
from compile_util import BYOC_SUPPORT, compile_library
from conftest import DATA, EXAMPLES, random_array

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.generator import generator_for
from byoc.generator.lowering import lower, offload_whole
from byoc.generator.partition import partition
from byoc.ir import Function
from byoc.runtime.module import bfloat16_tensor

BACKEND = "ccompiler"
REPO = Path(__file__).resolve().parent.parent
GEN = sorted((DATA / "gen").glob("*.graph"))
EJSON = {
    "ejson_guide_subgraph": EXAMPLES / "guide_subgraph.examplejson",
    "ejson_tvm_external_runtime": EXAMPLES / "tvm_external_runtime.examplejson",
}

# Beyond the shared graphs: int32 and int64 (with their extreme constants), float64
# rank 0, float32 rank 5 with constants that are hard to print exactly, an empty
# tensor, outputs that are a parameter, a constant, or returned twice, and a region
# named in the DSL.
EDGE = """\
graph main(a: int32[2, 3], b: int32[2, 3], c: int64[5], d: float64[], e: float32[2, 1, 2, 1, 3],
           z: float32[0, 4]) {
  p, q, r, s, t = @ccompiler {
    extreme = const int32[2, 3] [-2147483648, 2147483647, 0, -1, 7, 100]
    k = const int32[2, 3] [3, -4, 5, 0, 12, -7]
    u = add(a, k)
    v = multiply(u, b)
    return u, v, a, extreme, v
  }
  m, n, w = @ccompiler as edge {
    extreme = const int64[5] [-9223372036854775808, 9223372036854775807, 0, -1, 1]
    k = const int64[5] [10000000000, -3, 4, 5, 6]
    w = subtract(c, k)
    return w, multiply(w, c), extreme
  }
  o = @ccompiler {
    h = const float64[] 0.1
    return add(multiply(d, h), d)
  }
  f, g = @ccompiler {
    kf = const float32[2, 1, 2, 1, 3] [0.1, -0.0, 1e-45, 3.4028234e38, 16777217, 1e-8, 2, 3, 4, 5, 6, 7]
    return subtract(e, kf), kf
  }
  y = @ccompiler {
    return add(z, z)
  }
  return p, q, r, s, t, m, n, w, o, f, g, y
}
"""

# The shipped networks, partitioned automatically onto ccompiler: every op goes there.
NETWORKS = {
    "net_resnet_basic_block": EXAMPLES / "resnet_basic_block.graph",
    "net_mlp": EXAMPLES / "mlp.graph",
}

# The dtypes of issue 29 on ccompiler's macros: comparisons giving bool, logic, where on
# a bool condition and casts; the half types are only loaded (byoc_load_<dtype>),
# copied by where and converted by cast; int16 and uint32 take the arithmetic macros.
TYPED = """\
graph main(x: DTYPE[2, 5], y: DTYPE[2, 5], m: bool[2, 5], i: int16[2, 5], u: uint32[2, 5]) {
  w, c, b, s, v = @ccompiler {
    k = const DTYPE[2, 5] [0.5, -1, 2, 0, 3.25, -0.125, 100, 7, -3, 1]
    g = logical_or(greater(x, y), logical_and(m, less_equal(y, k)))
    w = where(g, x, k)
    return w, cast(w, to="int8"), logical_not(g), cast(i, to="DTYPE"), add(u, cast(x, to="uint32"))
  }
  return w, c, b, s, v
}
"""
DTYPE_CASES = {f"types_{d}": TYPED.replace("DTYPE", d) for d in ("float32", "float16", "bfloat16")}

CASES = [g.stem for g in GEN] + list(EJSON) + ["edge"] + list(NETWORKS) + list(DTYPE_CASES)
RTOL = {"float32": 1e-6, "float64": 1e-12}


def label(path: Path) -> str:
    """The file name recorded in locations: relative to the repository, so the golden
    text is the same wherever the tests run."""
    return path.resolve().relative_to(REPO).as_posix()


def externals_of(case: str, loader=load_backend) -> tuple[Function, ...]:
    if case in EJSON:
        path = EJSON[case]
        program = offload_whole(parse(path.read_bytes(), "examplejson", file=label(path)), BACKEND)
    elif case == "edge":
        program = parse(EDGE, "graph", file="edge.graph")
    elif case in DTYPE_CASES:
        program = parse(DTYPE_CASES[case], "graph", file=f"{case}.graph")
    elif case in NETWORKS:
        path = NETWORKS[case]
        source = parse(path.read_text(), "graph", file=label(path))
        program = partition(source, [load_backend(BACKEND)], load_catalog())
    else:
        path = DATA / "gen" / f"{case}.graph"
        program = parse(path.read_text().replace("@BACKEND", f"@{BACKEND}"), "graph", file=label(path))
    return lower(program, loader, load_catalog()).externals_for(BACKEND)


def generate(externals, spec=None) -> str:
    spec = spec or load_backend(BACKEND)
    artifact, *support = generator_for(spec.kind)(externals, spec, load_catalog(), {})
    assert (artifact.name, artifact.role, artifact.backend) == (f"{BACKEND}.c", "module", BACKEND)
    assert {a.name for a in support} <= set(BYOC_SUPPORT) and all(a.role != "module" for a in support)
    return artifact.text


def build(text: str, out_dir: Path):
    return tvm_ffi.load_module(str(compile_library({f"{BACKEND}.c": text}, f"{BACKEND}.c", out_dir)))


def check_against_reference(module, fn: Function, rng: np.random.Generator) -> None:
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    for p in fn.params:  # conftest's random_array gives bool only True
        if p.type.dtype == "bool":
            inputs[p.name] = rng.integers(0, 2, size=p.type.shape).astype(bool)
    outputs = [np.full(t.shape, 99, dtype=t.dtype) for t in fn.output_types]
    arrays = [*inputs.values(), *outputs]  # numpy exports no bfloat16: the runtime's kDLBfloat tensor
    assert (
        module[fn.name](*(bfloat16_tensor(a) if a.dtype == np.dtype("bfloat16") else a for a in arrays))
        is None
    )
    expected = evaluate(fn, inputs)
    for got, want, t in zip(outputs, expected, fn.output_types):
        if t.dtype in RTOL:
            np.testing.assert_allclose(got, want, rtol=RTOL[t.dtype], atol=0)
        else:
            np.testing.assert_array_equal(got, want)
