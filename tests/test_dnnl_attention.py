"""dnnl's attention patterns (spec/backends/dnnl: DNNL_ATTENTION, DNNL_ATTENTION_BIAS):
softmax(q kt / c + bias) v as transformers imported from ONNX compute it (GPT-2's
Transpose, MatMul, Div, Add, Softmax, MatMul), one kernel of three oneDNN primitives.
Which chains become one composite of which pattern, golden C, runs against the numpy
reference (fixed cases, hypothesis's shapes and broadcasts, several threads at once),
and graphs the patterns must leave to the op-by-op path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm_ffi
from conftest import run_threads
from dnnl_support import assert_close, attention, pattern_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from libraries import missing_library
from test_gen_dnnl import generate

import byoc
from byoc.api import evaluate, load_backend, load_catalog, parse, print_program
from byoc.building import explain_over
from byoc.generator.partition import partition
from byoc.ir import Program

if missing_library("dnnl"):
    pytest.skip(missing_library("dnnl"), allow_module_level=True)

BACKENDS = ("dnnl", "fused")
"""GPT-2's attention runs on `--backend dnnl,fused`: before the patterns, its matmuls on
dnnl and the transpose, divide, add and softmax on fused."""


def offloaded(text: str, backends: tuple[str, ...] = BACKENDS) -> Program:
    return partition(parse(text, "graph"), [load_backend(b) for b in backends], load_catalog())


def kernels(program: Program) -> list[tuple[str, list[str]]]:
    """What each region of ``program``'s graph runs: its backend, and its composites'
    patterns and its ops."""
    regions = [n.callee for n in program.functions[0].nodes if n.callee is not None]
    return [
        (r.backend, [n.callee.composite if n.callee is not None else n.op for n in r.nodes]) for r in regions
    ]


def inputs_of(program: Program, rng: np.random.Generator, masked: float = 0.3) -> dict[str, np.ndarray]:
    """q, k and v of standard normal values; a bias of 0 and -inf (a padding mask: about
    ``masked`` of its values -inf); c, where it is a parameter, 2."""
    found = {}
    for p in program.functions[0].params:
        shape, dtype = p.type.shape, p.type.dtype
        if p.name == "bias":
            found[p.name] = np.where(rng.random(shape) < masked, -np.inf, 0.0).astype(dtype)
        elif p.name == "c":
            found[p.name] = np.full(shape, 2.0, dtype)
        else:
            found[p.name] = rng.standard_normal(shape).astype(dtype)
    return found


def runs_like_the_reference(
    program: Program, inputs: dict[str, np.ndarray], backends: tuple[str, ...] = BACKENDS
) -> np.ndarray:
    """``program``'s result built over ``backends``, checked against the reference
    (rows whose bias is all -inf are NaN in both)."""
    (got,) = byoc.build(program, backends=list(backends))(**inputs)
    (want,) = evaluate(program.functions[0], inputs)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert_close(got, want)
    return got


# --------------------------------------------------------------- one composite each


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("scale", ["divide", "multiply"])
@pytest.mark.parametrize("transposed", [True, False], ids=["k", "kt"])
def test_each_chain_is_one_composite_of_its_pattern(transposed, scale, bias, rng):
    """GPT-2's chain (its causal mask the bias) and the others of the family: all six or
    five ops are one kernel, the pattern's, in one dnnl region, and run as the chain."""
    k = (1, 2, 7, 4) if transposed else (1, 2, 4, 7)
    text = attention(
        (1, 2, 5, 4), k, (1, 2, 7, 3), "causal" if bias else None, transposed=transposed, scale=scale
    )
    name = pattern_of(transposed, scale, bias)
    program = offloaded(text)
    assert kernels(program) == [("dnnl", [name])]
    explained = explain_over(parse(text, "graph"), list(BACKENDS), load_backend).splitlines()
    (line,) = [line for line in explained if line.endswith(f"-> dnnl (pattern {name})")]
    ops = ["transpose"] * transposed + ["matmul", scale] + ["add"] * bias + ["softmax", "matmul"]
    assert f"= {', '.join(ops)} " in line
    runs_like_the_reference(program, inputs_of(program, rng))


GPT2 = attention((1, 2, 8, 4), (1, 2, 8, 4), (1, 2, 8, 4), "causal")


def test_golden_gpt2_attention(golden):
    """GPT-2's attention (tiny sizes): one DNNL_ATTENTION_BIAS kernel, k read transposed."""
    program = offloaded(GPT2)
    assert "@dnnl.attention_div_bias " in print_program(program)
    assert generate(program) == golden("c")


# ------------------------------------------------------------ against the reference

CASES = {
    # GPT-2 in a batch of 2: its causal [Sq, Sk] mask is spread to [2, 1, Sq, Sk] for oneDNN's brgemm matmul
    "gpt2_batch": dict(q=(2, 3, 6, 8), k=(2, 3, 6, 8), v=(2, 3, 6, 5), bias="causal"),
    # BERT's padding mask [B, 1, 1, Sk], of 0 and -inf
    "padding_mask": dict(q=(2, 3, 4, 8), k=(2, 3, 6, 8), v=(2, 3, 6, 5), bias=(2, 1, 1, 6), scale="multiply"),
    # ALiBi's [1, H, 1, Sk], which oneDNN's brgemm matmul does not broadcast as it is
    "per_head_bias": dict(q=(1, 3, 4, 8), k=(1, 3, 6, 8), v=(1, 3, 6, 5), bias=(1, 3, 1, 6)),
    "kt_no_bias": dict(q=(2, 2, 5, 3), k=(2, 2, 3, 7), v=(2, 2, 7, 4), transposed=False),
    # the bias makes the batch larger than q's, k's and v's: q is spread into it (k, v broadcast)
    "bias_batch": dict(q=(1, 2, 4, 8), k=(1, 2, 6, 8), v=(1, 2, 6, 5), bias=(3, 1, 4, 6)),
    # one row of q and one column of kt, the bias's rows and columns
    "bias_rows_columns": dict(q=(2, 1, 8), k=(2, 8, 1), v=(2, 1, 6, 5), bias=(2, 1, 5, 6), transposed=False),
    # q, kt and v of rank 3 and 2 (a batch of heads broadcast), the scale [1, 1, 1, 1]
    "low_ranks": dict(q=(3, 4, 8), k=(8, 5), v=(2, 1, 5, 6), bias=(4, 5), transposed=False, c=(1, 1, 1, 1)),
    # the scale a parameter: read by each call
    "scale_input": dict(q=(1, 2, 4, 8), k=(1, 2, 6, 8), v=(1, 2, 6, 5), bias=(1, 1, 4, 6), c=None),
}


@pytest.mark.parametrize("case", CASES)
def test_attention_runs_like_the_reference(case, rng):
    spec = dict(CASES[case])
    transposed, scale = spec.get("transposed", True), spec.get("scale", "divide")
    program = offloaded(attention(**spec))
    assert kernels(program) == [("dnnl", [pattern_of(transposed, scale, spec.get("bias") is not None)])]
    runs_like_the_reference(program, inputs_of(program, rng))


def test_a_row_masked_wholly_is_nan_as_the_chains():
    """A bias of -inf on a whole row: softmax's 0/0, NaN where the chain's is, not special-cased."""
    program = offloaded(attention((1, 1, 3, 4), (1, 1, 3, 4), (1, 1, 3, 2), (1, 1, 3, 3)))
    rng = np.random.default_rng(1)
    inputs = inputs_of(program, rng, masked=0.0)
    inputs["bias"][0, 0, 1] = -np.inf
    got = runs_like_the_reference(program, inputs)
    assert np.isnan(got[0, 0, 1]).all() and not np.isnan(got[0, 0, [0, 2]]).any()


def has_avx512() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.exists() and "avx512f" in cpuinfo.read_text()


@pytest.mark.skipif(not has_avx512(), reason="oneDNN's brgemm matmul needs AVX-512")
def test_no_matmul_runs_onednns_reference_code(tmp_path):
    """oneDNN's brgemm matmul does not broadcast a causal mask [1, 1, Sq, Sk] over a batch
    of 2, nor ALiBi's [1, H, 1, Sk]: its reference matmul would, 1000x slower. The
    kernel spreads the bias where that lets a brgemm matmul add it (ONEDNN_VERBOSE says
    which implementation each primitive runs, at its first call)."""
    texts = [
        attention((2, 4, 32, 16), (2, 4, 32, 16), (2, 4, 32, 16), "causal"),
        attention((1, 4, 32, 16), (1, 4, 32, 16), (1, 4, 32, 16), (1, 4, 1, 32)),
    ]
    script = tmp_path / "run.py"
    script.write_text(
        "import numpy as np, byoc\n"
        "from byoc.api import parse\n"
        f"for text in {texts!r}:\n"
        "    program = parse(text, 'graph')\n"
        "    rng = np.random.default_rng(0)\n"
        "    inputs = {p.name: rng.standard_normal(p.type.shape).astype(np.float32)\n"
        "              for p in program.functions[0].params}\n"
        "    byoc.build(program, backends=['dnnl'])(**inputs)\n"
    )
    env = {**os.environ, "ONEDNN_VERBOSE": "1"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, check=True)
    matmuls = [line for line in out.stdout.splitlines() if line.startswith("onednn_verbose,exec,cpu,matmul,")]
    assert len(matmuls) == 4, out.stdout[-2000:]
    assert not [line for line in matmuls if ",ref" in line], "\n".join(matmuls)


def test_a_prepared_function_runs_from_several_threads(tmp_path):
    """Calls from several threads at once: one takes the kernel's kept scratch (the
    scores, the spread bias), the others allocate their own."""
    program = offloaded(attention(**CASES["gpt2_batch"]))
    model = byoc.build(program)
    (entry,) = [m for m in model.manifest.modules if m.backend == "dnnl"]
    path = tmp_path / "dnnl.so"
    path.write_bytes(model.members[entry.file])
    fn = tvm_ffi.load_module(str(path))["dnnl_0"]
    (region,) = [n.callee for n in program.functions[0].nodes if n.callee is not None]
    rngs = [np.random.default_rng(k) for k in range(4)]
    inputs = [[rng.standard_normal(p.type.shape).astype(np.float32) for p in region.params] for rng in rngs]
    wants = [evaluate(region, {p.name: a for p, a in zip(region.params, ins)})[0] for ins in inputs]

    def call(k: int) -> None:
        out = np.zeros(wants[k].shape, np.float32)
        for _ in range(20):
            fn(*inputs[k], out)
            assert_close(out, wants[k])

    run_threads(call, 4)


# -------------------------------------------------------------------- hypothesis


@st.composite
def attention_cases(draw) -> tuple[str, int]:
    """A chain of random small extents (Sq, Sk, D, Dv in 1..17, 1 to 3 heads, a batch of
    1 or 2) whose inputs each broadcast along the batch axes or not, q of one row or kt
    of one column against the bias's, the inputs' leading axes sometimes left out, the
    bias of any such shape or none; and a seed for the values."""
    sq, sk, d, dv = (draw(st.integers(1, 17)) for _ in range(4))
    batch = (draw(st.integers(1, 2)), draw(st.integers(1, 3)))
    transposed = draw(st.booleans())

    def lead() -> tuple[int, ...]:
        return tuple(e if draw(st.booleans()) else 1 for e in batch)

    def trimmed(shape: tuple[int, ...], least: int) -> tuple[int, ...]:
        """``shape`` without some of its leading extents of 1 (at least ``least`` axes kept)."""
        ones = 0
        while ones < len(shape) - least and shape[ones] == 1:
            ones += 1
        return shape[draw(st.integers(0, ones)) :]

    has_bias = draw(st.booleans())
    rows = draw(st.sampled_from([sq, 1])) if has_bias else sq
    cols = draw(st.sampled_from([sk, 1])) if has_bias else sk
    q = trimmed((*lead(), rows, d), 2)
    k = (*lead(), cols, d) if transposed else trimmed((*lead(), d, cols), 2)
    v = trimmed((*lead(), sk, dv), 2)
    bias = None
    if has_bias:  # where q has one row (kt one column), the bias has them all
        b_rows = sq if rows == 1 else draw(st.sampled_from([sq, 1]))
        b_cols = sk if cols == 1 else draw(st.sampled_from([sk, 1]))
        bias = trimmed((*lead(), b_rows, b_cols), 0)
    c = draw(st.sampled_from([(), (1,), (1, 1, 1, 1)]))
    if max(len(q), len(k), len(bias or ()), len(c)) < 4:
        q = (1,) * (4 - len(q)) + q  # the scores are rank 4 (softmax.axis == 3), whatever v's rank
    scale = draw(st.sampled_from(["divide", "multiply"]))
    text = attention(q, k, v, bias, transposed=transposed, scale=scale, c=c)
    return text, draw(st.integers(0, 2**16))


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=attention_cases())
def test_random_attention_runs_like_the_reference(case):
    text, seed = case
    program = offloaded(text)
    ((backend, (name,)),) = kernels(program)
    assert backend == "dnnl" and name.startswith("attention"), print_program(program)
    runs_like_the_reference(program, inputs_of(program, np.random.default_rng(seed), masked=0.2))


# ------------------------------------------------------------- not the patterns'

REFUSED = {
    # softmax over the queries, not the keys
    "softmax_axis": (
        attention((1, 2, 5, 4), (1, 2, 5, 4), (1, 2, 5, 3), "causal", axis=2),
        "softmax.axis == 3 is false",
    ),
    # a scale per head: several values
    "scale_per_head": (
        attention((1, 2, 5, 4), (1, 2, 6, 4), (1, 2, 6, 3), (1, 1, 5, 6), c=(1, 2, 1, 1)),
        "c.shape in",
    ),
    # float64: the patterns are float32 only
    "float64": (attention((1, 2, 5, 4), (1, 2, 6, 4), (1, 2, 6, 3), (1, 1, 5, 6), dtype="float64"), None),
}


@pytest.mark.parametrize("case", REFUSED)
def test_what_the_patterns_refuse_runs_op_by_op(case, rng):
    """Such a chain is no attention composite: its matmuls (and softmax) run as dnnl's
    ops, the rest on the host, as the chain computes it."""
    text, why = REFUSED[case]
    program = offloaded(text)
    assert "@dnnl.attention" not in print_program(program)
    if why is not None:
        assert why in explain_over(parse(text, "graph"), list(BACKENDS), load_backend)
    runs_like_the_reference(program, inputs_of(program, rng))
