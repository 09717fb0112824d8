"""The real-network ops of the macro backends (ccompiler's C macros, engine's layers),
against independent computations, and the rank rules that keep the rest on the host.

Hypothesis draws, for every op a backend maps and every dtype it runs, a few cases of
tests/catalog_cases.py (the nested-loop definitions of conv and pooling, with strides,
asymmetric pads, dilations, groups, ceil_mode, count_include_pad, batches of 1 and 2).
All cases of one example go into ONE graph, one explicit region each, so one compile
checks them all; every output must match the case's own computation, and the
reference evaluator's result.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from catalog_cases import CASES
from catalog_cases_integer import conv_integer_case, matmul_integer_case
from catalog_cases_networks import conv_op_case, dense_case, matmul_case
from catalog_cases_support import OpCase, attr_text
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from test_catalog_ops import HEALTH
from test_catalog_ops import check as check_close

import byoc
from byoc.api import parse
from byoc.building import build
from byoc.errors import GraphError
from byoc.generator.partition import partition
from byoc.spec import load_catalog

CATALOG = load_catalog()
BACKENDS = ["ccompiler", "engine"]
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)
"""Each example compiles a library: shrinking one would take minutes, and the failing
example's cases are printed in full anyway."""
CASES_PER_OP = 3
"""Cases drawn per (op, dtype) in each example."""

AT_MAPPED_RANK = {
    "conv": partial(conv_op_case, spatial=2),
    "max_pool": partial(CASES["max_pool"], spatial=2),
    "avg_pool": partial(CASES["avg_pool"], spatial=2),
    "dense": partial(dense_case, rank=2),
    "matmul": partial(matmul_case, batched=False),
    "conv_integer": partial(conv_integer_case, spatial=2),
    "matmul_integer": partial(matmul_integer_case, batched=False),
}
"""The cases of ops the backends map at one rank only: 2-D windows (rank 4), matrices."""


def draw_cases(data, backend: str) -> list[tuple[str, OpCase]]:
    """A few cases of every (op, dtype) ``backend`` runs, each at a rank it maps (a
    pooling window over padding only is no case). Elementwise ops of several inputs
    are left to the generator's own tests: their cases broadcast, these backends do not."""
    spec = byoc.load_backend(backend)
    cases = []
    for op in spec.ops:
        if CATALOG[op].rule.elementwise and CATALOG[op].min_inputs > 1:
            continue
        for dtype in (d for d in CATALOG[op].dtypes if spec.supports(op, d)):  # the op's own dtypes too
            strategy = AT_MAPPED_RANK.get(op, CASES[op])(dtype).filter(lambda c: c.expected is not None)
            for _ in range(CASES_PER_OP):
                case = data.draw(strategy, label=f"{op} {dtype}")
                out = case.out_dtype or dtype  # a cast's result
                assert spec.supports(op, out, np.ndim(case.expected)), (op, out, case.expected.shape)
                cases.append((op, case))
    return cases


def graph_of(backend: str, cases: list[tuple[str, OpCase]]) -> str:
    """One graph: case k's inputs are parameters c<k>_<j>, its op one @backend region."""
    params, lines, outs = [], [], []
    for k, (op, case) in enumerate(cases):
        names = [f"c{k}_{j}" for j in range(len(case.inputs))]
        params += [f"{n}: {a.dtype}[{', '.join(map(str, a.shape))}]" for n, a in zip(names, case.inputs)]
        args = names + [f"{key}={attr_text(v)}" for key, v in case.attrs.items()]
        lines.append(f"  r{k} = @{backend} {{ return {op}({', '.join(args)}) }}")
        outs.append(f"r{k}")
    return f"graph main({', '.join(params)}) {{\n" + "\n".join(lines) + f"\n  return {', '.join(outs)}\n}}\n"


def run_cases(backend: str, cases: list[tuple[str, OpCase]]) -> None:
    program = parse(graph_of(backend, cases), "graph")
    inputs = {f"c{k}_{j}": a for k, (_, case) in enumerate(cases) for j, a in enumerate(case.inputs)}
    got = build(program)(**inputs)
    want = byoc.evaluate(program.functions[0], inputs)
    assert len(got) == len(want) == len(cases)
    for (op, case), out, ref in zip(cases, got, want):
        assert out.shape == ref.shape == np.shape(case.expected), op
        assert out.dtype == ref.dtype, op
        check_close(out, np.asarray(case.expected))
        check_close(out, np.asarray(ref, dtype=np.float64) if out.dtype.kind == "f" else ref)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=3, deadline=None, suppress_health_check=HEALTH, phases=NO_SHRINK)
@given(data=st.data())
def test_every_mapped_op_matches_its_definition(backend, data):
    run_cases(backend, draw_cases(data, backend))


# ---------------------------------------------------------------- what stays on the host

CONV1D = """\
graph main(x: float32[1, 2, 7], w: float32[3, 2, 3], y: float32[1, 2, 6, 6], v: float32[2, 2, 3, 3]) {
  a = conv(x, w, strides=[2])
  b = conv(y, v, pads=[1, 0, 0, 1])
  return a, b
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rank_without_a_macro_stays_on_the_host(backend):
    spec = byoc.load_backend(backend)
    (fn,) = partition(parse(CONV1D, "graph"), [spec], CATALOG).functions
    assert [n.op for n in fn.nodes] == ["conv", "call"]  # the 1-D conv on the host, the 2-D one offloaded
    assert [n.op for n in fn.nodes[1].callee.nodes] == ["conv"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rank_without_a_macro_in_an_explicit_region_is_located(backend):
    text = CONV1D.replace(
        "a = conv(x, w, strides=[2])", f"a = @{backend} {{ return conv(x, w, strides=[2]) }}"
    )
    with pytest.raises(GraphError) as info:
        build(parse(text, "graph", file="conv1d.graph"))
    err = info.value
    assert f"backend {backend} cannot run conv on float32[1, 3, 3]" in err.message
    assert (err.location.file, err.location.line) == ("conv1d.graph", 2)
