"""The dnnl backend (spec/backends/dnnl.yaml, a c_source spec calling oneDNN's C API):
golden C, built by byoc's runtime with the library its spec requires, and run against
the numpy reference.

oneDNN computes in float32 and accumulates in its own order, where byoc's reference
computes in float64 and rounds once, so results are compared with a float32
tolerance scaled to the sums' length. Each kernel's primitive is created once, in its
function's init (a macro's own `init`); the thread test calls one loaded function from
several threads at once, which share the primitives (test_dnnl_reuse.py tests what
the calls reuse, with each thread's own arrays).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm_ffi
from conftest import EXAMPLES, random_array, run_threads
from dnnl_support import (
    assert_close,
    attention_family,
    const,
    gate,
    layer_norm_graph,
    linear,
    linear_gelu,
    rms_norm_graph,
    swiglu,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from libraries import missing_library
from test_ccompiler_int8 import qdq_gemm_model
from test_dnnl_int8 import PATTERN_OF, qdq_graph

import byoc
from byoc.api import evaluate, load_backend, load_catalog, parse, print_program
from byoc.generator import generator_for
from byoc.generator.artifacts import Role
from byoc.generator.lowering import lower
from byoc.generator.partition import partition
from byoc.ir import Program
from byoc.onnx.model_import import import_program

pytest.importorskip("onnx", reason="the light ResNet-50 comes with onnx")
if missing_library("dnnl"):
    pytest.skip(missing_library("dnnl"), allow_module_level=True)

BACKEND = "dnnl"
REPO = Path(__file__).resolve().parent.parent
# Every composite pattern of the spec, and the single ops, in one graph.
PATTERNS = """\
graph main(x: float32[2, 4, 9, 9], w: float32[6, 4, 3, 3], w2: float32[6, 2, 3, 3], b: float32[6], r: float32[2, 6, 9, 9],
           s: float32[6], t: float32[6], m: float32[6], v: float32[6], d: float32[2, 12],
           dw: float32[5, 12], db: float32[5]) {
  c1 = relu(bias_add(conv(x, w, pads=[1, 1, 1, 1]), b, axis=1))
  c2 = relu(add(conv(x, w, pads=[1, 1, 1, 1]), r))
  c3 = bias_add(conv(x, w, pads=[1, 1, 1, 1]), b, axis=1)
  c4 = relu(conv(x, w, strides=[2, 2], dilations=[2, 1], pads=[2, 1, 1, 0]))
  n1 = relu(batch_norm(c3, s, t, m, multiply(v, v), epsilon=0.001))
  n2 = batch_norm(c1, s, t, m, multiply(v, v))
  p1 = max_pool(n1, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=true)
  p2 = avg_pool(n2, kernel_shape=[2, 3], strides=[2, 2], pads=[1, 0, 1, 1], count_include_pad=true)
  p3 = avg_pool(c2, kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 1, 0], ceil_mode=true)
  e = sigmoid(tanh(c4))
  y1 = relu(bias_add(dense(d, dw), db, axis=1))
  y2 = softmax(bias_add(dense(d, dw), db, axis=1), axis=1)
  y3 = softmax(dense(d, dw), axis=0)
  k1 = relu(batch_norm(conv(x, w, pads=[1, 1, 1, 1]), s, t, m, multiply(v, v)))
  k2 = batch_norm(conv(x, w2, strides=[2, 2], groups=2, pads=[0, 1, 0, 1]), s, t, m, multiply(v, v), epsilon=0.01)
  k3 = relu(add(batch_norm(conv(x, w, pads=[1, 1, 1, 1]), s, t, m, multiply(v, v), epsilon=0.01), r))
  k4 = add(batch_norm(conv(x, w2, groups=2, pads=[1, 1, 1, 1]), s, t, m, multiply(v, v)), k3)
  q = concatenate(p1, p3, axis=1)
  return p1, p2, p3, e, y1, y2, y3, k1, k2, k4, q
}
"""


def const_patterns() -> str:
    """Every pattern of constant weights (packed at init), with 32 channels, where oneDNN
    picks blocked layouts on AVX2 and AVX-512 (so the source and the result are
    reordered), and weights past the .incbin threshold (a 32x32x3x3 conv). One chain,
    so that one region holds every use of the constants (see
    test_a_constant_two_regions_read_is_copied_into_each for one that several use)."""
    rng = np.random.default_rng(7)
    return f"""\
graph main(x: float32[2, 32, 7, 7], r: float32[2, 32, 7, 7], b: float32[32]) {{
  w = {const(rng, (32, 32, 3, 3), -0.1, 0.1)}
  wg = {const(rng, (32, 16, 1, 1), -0.3, 0.3)}
  s = {const(rng, (32,), 0.5, 1.5)}
  t = {const(rng, (32,), -0.2, 0.2)}
  m = {const(rng, (32,), -0.2, 0.2)}
  v = {const(rng, (32,), 0.5, 2.0)}
  q1 = relu(batch_norm(conv(x, w, pads=[1, 1, 1, 1]), s, t, m, v))
  q3 = batch_norm(conv(q1, w, dilations=[2, 1], pads=[2, 1, 2, 1]), s, t, m, v)
  q4 = relu(bias_add(conv(q3, w, pads=[1, 1, 1, 1]), b, axis=1))
  q5 = relu(add(conv(q4, w, pads=[1, 1, 1, 1]), r))
  q7 = relu(conv(q5, wg, groups=2))
  q2 = relu(batch_norm(conv(q7, wg, strides=[2, 2], groups=2, pads=[0, 1, 0, 1]), s, t, m, v, epsilon=0.01))
  q6 = bias_add(conv(q7, w, strides=[2, 1], pads=[0, 0, 1, 1]), b, axis=1)
  q8 = conv(q7, w, strides=[2, 2], pads=[1, 1, 1, 1])
  q9 = add(batch_norm(conv(q7, wg, groups=2), s, t, m, v, epsilon=0.01), q5)
  q10 = relu(add(batch_norm(conv(q9, w, pads=[1, 1, 1, 1]), s, t, m, v), r))
  mw = {const(rng, (4, 6), -0.5, 0.5)}
  q11 = matmul(q8, mw)
  return q2, q6, q8, q10, q11
}}
"""


CASES = {"net_mlp": "mlp.graph", "net_resnet_block": "resnet_basic_block.graph"}


def program_of(case: str) -> Program:
    path = EXAMPLES / CASES[case]
    source = parse(path.read_text(), "graph", file=path.resolve().relative_to(REPO).as_posix())
    specs = [load_backend(BACKEND)] + ([load_backend("fused")] if case == "net_resnet_block" else [])
    return partition(source, specs, load_catalog())


def generate(program: Program) -> str:
    spec = load_backend(BACKEND)
    externals = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    artifacts = generator_for(spec.kind)(externals, spec, load_catalog(), {})
    (source,) = [a for a in artifacts if a.role is Role.MODULE]
    return source.text


def run_against_reference(program: Program, rng, **build) -> None:
    model = byoc.build(program, **build)
    assert BACKEND in {m.backend for m in model.manifest.modules}
    fn = program.functions[0]
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    got = model(**inputs)
    want = evaluate(fn, inputs)
    assert len(got) == len(want) == len(fn.output_types)
    for g, w, t in zip(got, want, fn.output_types):
        assert g.shape == t.shape and g.dtype == t.dtype
        assert_close(g, w)


@pytest.mark.parametrize("case", CASES)
def test_golden(case, golden):
    assert generate(program_of(case)) == golden("c")


HALF_REGION = """\
graph main(x: {t}[4, 16], w: {t}[8, 16], b: {t}[8]) {{
  r = @dnnl {{
    y = @dnnl.dense_bias_relu {{
      return relu(bias_add(dense(x, w), b, axis=1))
    }}
    return softmax(sigmoid(y), axis=1)
  }}
  return r
}}
"""


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_golden_half_precision_region(dtype, golden):
    """A region of dense, eltwise and softmax in a 16-bit float: the same macros, with
    the storage type and oneDNN's data type as arguments; the text compiles with the
    spec's flags (-Wall -Wextra -Werror) whether or not this CPU computes the type
    (test_probe.py runs it where it does)."""
    from compile_util import BYOC_SUPPORT

    from byoc.runtime.build import build_spec_module

    text = generate(parse(HALF_REGION.format(t=dtype), "graph", file=f"{dtype}_region.graph"))
    assert text == golden("c")
    assert (
        f"DNNL_DENSE_BIAS(dnnl_0_0, (&dnnl_0_state), 4, 16, 8, 1, byoc_{dtype}, DNNL_BYOC_DT_{dtype})" in text
    )
    spec = load_backend(BACKEND)
    linkages = [r.locate() for r in spec.requires.values()]
    build_spec_module(
        spec, {"dnnl.c": text}, "dnnl.c", spec.template_values(), linkages=linkages, support=BYOC_SUPPORT
    )


@pytest.mark.parametrize("case", CASES)
def test_runs_like_the_reference(case, rng):
    run_against_reference(program_of(case), rng)


def test_the_whole_mlp_goes_to_dnnl_as_composites():
    (host,) = program_of("net_mlp").functions
    assert all(n.callee is not None and n.callee.backend == BACKEND for n in host.nodes)
    (region,) = [n.callee for n in host.nodes]
    assert [n.callee.composite for n in region.nodes if n.callee is not None] == [
        "dense_bias_relu",
        "dense_bias_relu",
        "dense_bias",
    ]


def test_every_pattern_and_op_runs_like_the_reference(rng):
    used = set()
    linear_gelus = (linear_gelu(op) for op in ("gelu", "gelu_tanh"))
    for graph in (
        PATTERNS,
        const_patterns(),
        layer_norm_graph(),
        rms_norm_graph(),
        linear(),
        *linear_gelus,
        gate(),
        swiglu(),
        swiglu(gate_first=False),
        *attention_family(),
    ):
        program = partition(
            parse(graph, "graph", file="patterns.graph"), [load_backend(BACKEND)], load_catalog()
        )
        text = print_program(program)
        used |= {name for name in load_backend(BACKEND).patterns if f"@{BACKEND}.{name} " in text}
        run_against_reference(program, rng)
    # the int8 ones: run against their integer reference in test_dnnl_int8.py
    int8 = [parse(qdq_graph(kind)[0], "graph") for kind in PATTERN_OF]
    int8 += [import_program(qdq_gemm_model(relu)[0]) for relu in (False, True)]
    for program in int8:
        text = print_program(partition(program, [load_backend(BACKEND)], load_catalog()))
        used |= {name for name in load_backend(BACKEND).patterns if f"@{BACKEND}.{name} " in text}
    assert used == set(load_backend(BACKEND).patterns)


# A transformer's products and activations: a linear layer's [B, S, K] by [K, N],
# attention's batched products, batch axes broadcast both ways, 1-D operands (a row, a
# column), an empty sum; then the eltwise algorithms (with their alpha and beta), and
# gelu (DNNL_GELU).
MATMUL_ELTWISE = """\
graph main(x: float32[2, 3, 5], w: float32[5, 4], q: float32[2, 3, 4, 6], k: float32[2, 3, 6, 4],
           p: float32[3, 1, 2, 5], r: float32[4, 5, 3], v: float32[5], s: float32[2, 5, 3],
           t: float32[3], e: float32[2, 3, 0], f: float32[0, 4]) {
  a, b, c, d, g, h = @dnnl {
    return matmul(x, w), matmul(q, k), matmul(p, r), matmul(v, s), matmul(s, t), matmul(e, f)
  }
  l1, l2, l3, l4, l5, l6 = @dnnl {
    return leaky_relu(a, alpha=0.1), elu(a, alpha=0.5), softplus(a), abs(a), square(a), gelu(a)
  }
  return l1, l2, l3, l4, l5, l6, b, c, d, g, h
}
"""


def test_golden_matmul_and_eltwise(golden):
    assert generate(parse(MATMUL_ELTWISE, "graph", file="matmul_eltwise.graph")) == golden("c")


def test_matmul_and_eltwise_run_like_the_reference(rng):
    program = parse(MATMUL_ELTWISE, "graph", file="matmul_eltwise.graph")
    run_against_reference(program, rng)
    assert {m.backend for m in byoc.build(program).manifest.modules} == {BACKEND}


def test_constant_weights_are_packed_by_the_init():
    """The packed patterns' kernels get their constants' arrays in the init (the large
    one .incbin'd), and their calls take the weights from the state, not the argument."""
    program = partition(parse(const_patterns(), "graph"), [load_backend(BACKEND)], load_catalog())
    text = generate(program)
    kernels = [line for line in text.splitlines() if "_PACKED(dnnl_0_" in line]
    inits = [line.strip() for line in text.splitlines() if "_create(&state->dnnl_0_" in line]
    assert len(kernels) == len(inits) == 11
    assert all(", dnnl_0_const_" in line for line in inits)
    assert "extern const float dnnl_0_const_0[9216]" in text
    assert "(void)w; /* packed by the init */" in text
    assert "(void)b; /* packed by the init */" in text  # the matmul


def test_each_kernel_creates_its_primitive_in_the_init():
    text = generate(program_of("net_resnet_block"))
    assert "dnnl_engine_create(&state->engine, dnnl_cpu, 0)" in text
    # each kernel's init is a function of its own, called by the function's init
    init = text[text.index("static int dnnl_0_0_init_(") :]
    init = init[: init.index("static void dnnl_0_init_once_(")]
    kernels = [line for line in text.splitlines() if line.startswith("DNNL_") and "(dnnl_0_" in line]
    creates = [line.strip() for line in init.splitlines() if "_create(&state->dnnl_0_" in line]
    assert len(creates) == len(kernels) > 0
    assert all(c.endswith("state->engine) != 0) return 1;") for c in creates)
    # the kernels only read the state: no primitive is created at call time
    body = text[text.index("static int dnnl_0_(") :]
    assert "_create(" not in body[: body.index("\n}\n")]


# ------------------------------------------------------------------ conv and pools

CONV = """\
graph main(x: float32[{n}, {c}, {h}, {w}], k: float32[{m}, {cg}, {kh}, {kw}]) {{
  y = @dnnl {{
    return conv(x, k, strides=[{sh}, {sw}], pads=[{pt}, {pl}, {pb}, {pr}], dilations=[{dh}, {dw}], groups={g})
  }}
  return y
}}
"""


@st.composite
def conv_cases(draw):
    return CONV.format(**draw(conv_geometries()))


@st.composite
def conv_geometries(draw):
    """The extents and attributes of a conv2d (CONV's fields), its result's height and
    width as oh and ow."""
    g = draw(st.sampled_from([1, 1, 2, 3]))
    p = {
        "n": draw(st.integers(1, 2)),
        "c": g * draw(st.integers(1, 3)),
        "m": g * draw(st.integers(1, 3)),
        "g": g,
        "kh": draw(st.integers(1, 3)),
        "kw": draw(st.integers(1, 3)),
        "sh": draw(st.integers(1, 3)),
        "sw": draw(st.integers(1, 3)),
        "dh": draw(st.integers(1, 2)),
        "dw": draw(st.integers(1, 2)),
    }
    p.update({k: draw(st.integers(0, 2)) for k in ("pt", "pl", "pb", "pr")})
    p["h"] = draw(st.integers((p["kh"] - 1) * p["dh"] + 1, 9))
    p["w"] = draw(st.integers((p["kw"] - 1) * p["dw"] + 1, 9))
    p["cg"] = p["c"] // g
    p["oh"] = (p["h"] + p["pt"] + p["pb"] - (p["kh"] - 1) * p["dh"] - 1) // p["sh"] + 1
    p["ow"] = (p["w"] + p["pl"] + p["pr"] - (p["kw"] - 1) * p["dw"] - 1) // p["sw"] + 1
    return p


# avg_pool is mapped by patterns, so the pools are offloaded by partitioning.
POOL = """\
graph main(x: float32[{n}, {c}, {h}, {w}]) {{
  return {op}(x, kernel_shape=[{kh}, {kw}], strides=[{sh}, {sw}], pads=[{pt}, {pl}, {pb}, {pr}], {extra})
}}
"""


def offloaded(graph: str) -> Program:
    """``graph`` partitioned for dnnl alone; every node must have gone there."""
    program = partition(parse(graph, "graph"), [load_backend(BACKEND)], load_catalog())
    assert all(n.callee is not None for n in program.functions[0].nodes)
    return program


@st.composite
def pool_cases(draw):
    op = draw(st.sampled_from(["max_pool", "avg_pool"]))
    p = {"op": op, "n": draw(st.integers(1, 2)), "c": draw(st.integers(1, 3))}
    p.update({k: draw(st.integers(1, 3)) for k in ("kh", "kw", "sh", "sw")})
    # pads below the kernel, as ONNX asks
    p.update({k: draw(st.integers(0, p["kh"] - 1)) for k in ("pt", "pb")})
    p.update({k: draw(st.integers(0, p["kw"] - 1)) for k in ("pl", "pr")})
    p["h"] = draw(st.integers(p["kh"], 9))
    p["w"] = draw(st.integers(p["kw"], 9))
    include = draw(st.booleans()) if op == "avg_pool" else False
    # an avg_pool counting the padding is mapped only when its size rounds down
    ceil = draw(st.booleans()) and not include
    extra = f"ceil_mode={str(ceil).lower()}"
    if op == "avg_pool":
        extra += f", count_include_pad={str(include).lower()}"
    p["extra"] = extra
    return POOL.format(**p)


SLOW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SLOW
@given(graph=conv_cases())
def test_conv_matches_the_reference(graph):
    run_against_reference(parse(graph, "graph"), np.random.default_rng(0))


# the weights k are a constant (DNNL_CONV2D_SUM_PACKED, packed at init) or an input
# (DNNL_CONV2D_SUM, reordered by each call)
CONV_RESIDUAL = """\
graph main(x: float32[{n}, {c}, {h}, {w}], {k_param}r: float32[{n}, {m}, {oh}, {ow}]) {{
{k_const}  y = conv(x, k, strides=[{sh}, {sw}], pads=[{pt}, {pl}, {pb}, {pr}], dilations=[{dh}, {dw}], groups={g})
  return relu(add(y, r))
}}
"""


@pytest.mark.parametrize("constant", [True, False], ids=["constant_weights", "input_weights"])
@SLOW
@given(p=conv_geometries(), seed=st.integers(0, 2**16))
def test_conv_adds_a_residual_also_passed_as_its_output(constant, p, seed):
    """A convolution plus a residual: oneDNN adds it by a binary post-op that reads it
    where it is when it has the result's layout, and by a sum post-op on a copy in the
    result otherwise. Either way a caller may pass the residual's own array as the
    output, and gets the same result: then the conv adds it where it is, by the sum
    post-op of its in-place primitive (or, without one, from a copy)."""
    rng = np.random.default_rng(seed)
    shape = (p["m"], p["cg"], p["kh"], p["kw"])
    if constant:
        p.update(k_param="", k_const=f"  k = {const(rng, shape, -0.5, 0.5)}\n")
    else:
        p.update(k_param=f"k: float32[{', '.join(map(str, shape))}], ", k_const="")
    program = offloaded(CONV_RESIDUAL.format(**p))
    fn = program.functions[0]
    inputs = {q.name: random_array(rng, q.type.shape, q.type.dtype) for q in fn.params}
    (want,) = evaluate(fn, inputs)
    model = byoc.build(program)
    (got,) = model(**inputs)
    assert_close(got, want)
    (module,) = [m for m in model.modules if m.kind == "library"]
    (symbol,) = module.symbols()
    args = [inputs[q.name].copy() for q in fn.params]
    module.get_function(symbol)(*args, args[-1])  # the residual r, last, is the output too
    assert_close(args[-1], want)


@SLOW
@given(graph=pool_cases())
def test_pools_match_the_reference(graph):
    run_against_reference(offloaded(graph), np.random.default_rng(0))


def test_avg_pool_counting_padding_with_ceil_mode_stays_off_dnnl():
    """oneDNN would count the overhang of the last window too: not mapped, so --backend
    leaves it on the host."""
    dims = dict(n=1, c=1, h=6, w=6, kh=3, kw=3, sh=2, sw=2, pt=1, pl=1, pb=1, pr=1)
    graph = POOL.format(op="avg_pool", extra="ceil_mode=true, count_include_pad=true", **dims)
    program = partition(parse(graph, "graph"), [load_backend(BACKEND)], load_catalog())
    assert all(n.callee is None for n in program.functions[0].nodes)


# ------------------------------------------------------------------------- threads


@pytest.mark.parametrize("case", ["net_mlp", "packed_convs"])
def test_a_prepared_function_runs_from_several_threads(case, tmp_path, rng):
    """Several threads call one loaded function at once: dense primitives, and packed
    convolutions whose calls reorder into scratch of their own."""
    if case == "net_mlp":
        program = program_of(case)
    else:
        program = partition(parse(const_patterns(), "graph"), [load_backend(BACKEND)], load_catalog())
    model = byoc.build(program)
    (entry,) = [m for m in model.manifest.modules if m.backend == BACKEND]
    path = tmp_path / "dnnl.so"
    path.write_bytes(model.members[entry.file])
    module = tvm_ffi.load_module(str(path))
    (region,) = [
        n for n in program.functions[0].nodes if n.callee is not None and n.callee.backend == BACKEND
    ]
    callee = region.callee
    fn = module[f"{BACKEND}_0"]  # the first (and only) function of the module
    inputs = [random_array(rng, p.type.shape, p.type.dtype) for p in callee.params]
    wants = evaluate(callee, {p.name: a for p, a in zip(callee.params, inputs)})
    outs = [[np.zeros(w.shape, np.float32) for w in wants] for _ in range(6)]

    def call(k: int) -> None:
        for _ in range(5):
            fn(*inputs, *outs[k])
            for got, want in zip(outs[k], wants):
                assert_close(got, want)

    run_threads(call, len(outs))


# ------------------------------------------------------------------- light ResNet-50


def test_the_light_resnet50_matches_the_reference():
    import onnx

    model = Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "byoc",
            "run",
            str(model),
            "--backend",
            "dnnl,fused",
            "--rtol",
            "1e-4",
            "--atol",
            "1e-5",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "result: every output matches the numpy reference" in out.stdout
