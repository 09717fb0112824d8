"""The c_fused codegen (the `fused` backend): golden C, compiled and run against numpy.

Every golden case is generated, compared with its file under
tests/golden/test_gen_fused/, compiled under -std=c99 -Wall -Wextra -Werror
(tests/compile_util.py, without -fopenmp), loaded with tvm_ffi and called on seeded
random arrays; the outputs must equal the numpy reference (byoc.api.evaluate).
Beyond the goldens: the loop planner, every op at every dtype, integer wraparound,
and broadcasting through automatic partitioning. The options, the overlap check, fork
safety, spec validation and the CLI are in tests/test_fused_options.py; random
broadcasting graphs (hypothesis) in tests/test_fused_random.py.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import tvm_ffi
from compile_util import compile_library
from conftest import DATA, EXAMPLES, random_array, text_in_fresh_process
from gen_c_source_support import EDGE
from shipped_fused import SUPPORT, module_of

from byoc import cli
from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build
from byoc.errors import GraphError
from byoc.generator import generator_for
from byoc.generator.c_fused.loops import plan_loops
from byoc.generator.lowering import lower
from byoc.generator.partition import partition
from byoc.ir import CALL_OP, DTYPES, Function, is_integer
from byoc.runtime.module import bfloat16_tensor
from byoc.testing.compare import check_close

BACKEND = "fused"
REPO = Path(__file__).resolve().parent.parent
GEN = sorted((DATA / "gen").glob("*.graph"))

BIAS_ADD_RELU = """\
# A broadcasting bias add and relu: out[i, j] = relu(x[i, j] + b[j]).
graph main(x: float32[8, 16], b: float32[16]) {
  y = @fused {
    return relu(add(x, b))
  }
  return y
}
"""

# Outputs of four shapes (one loop nest each), a scalar, a value invariant in the
# inner loop (hoisted), a value two nests share, int32 and an empty output.
BROADCAST_MIX = """\
graph main(x: float32[4, 3, 5], b: float32[5], c: float32[3, 1], s: float32[],
           d: float32[1, 3, 5], e: int32[2, 1], f: int32[2, 6], z: float32[0, 5]) {
  y, v, w, q, n = @fused {
    u = add(x, b)
    v = multiply(c, s)
    r = relu(subtract(u, v))
    return r, v, add(d, b), maximum(negative(e), f), add(z, b)
  }
  return y, v, w, q, n
}
"""


def chain_graph(length: int = 64, shape: str = "8, 16") -> str:
    """A chain of ``length`` elementwise ops, cycling through the catalog's ops."""
    ops = ("add", "subtract", "multiply", "maximum", "minimum", "relu", "negative", "copy")
    lines = [
        f"graph main(x: float32[{shape}], y: float32[{shape}]) {{",
        "  s = @fused {",
        "    t0 = add(x, y)",
    ]
    for i in range(1, length):
        op = ops[i % len(ops)]
        args = f"t{i - 1}" if op in ("relu", "negative", "copy") else f"t{i - 1}, y"
        lines.append(f"    t{i} = {op}({args})")
    lines += [f"    return t{length - 1}", "  }", "  return s", "}", ""]
    return "\n".join(lines)


# conv -> bias_add -> relu: ONE loop nest, the accumulator feeding the epilogue.
CONV_BIAS_RELU = """\
graph main(x: float32[1, 3, 6, 6], w: float32[4, 3, 3, 3], b: float32[4]) {
  y = @fused {
    return relu(bias_add(conv(x, w, strides=[2, 1], pads=[1, 0, 1, 2]), b))
  }
  return y
}
"""

# split, a node of three outputs: one loop nest per part, each reading the input at its
# offset; relu and add fused into a part's nest; add(c, d) reads c from another nest,
# so c is also stored in a buffer.
SPLIT = """\
graph main(x: float32[2, 6, 3], b: float32[3]) {
  y, z, w = @fused {
    a, c, d = split(x, axis=1, sizes=[1, 2, 3])
    e, f = split(d, axis=-2)
    return a, relu(add(c, b)), add(c, f)
  }
  return y, z, w
}
"""

# A half-precision region of every kind of nest: elementwise with a constant (bit
# patterns), dense -> bias_add -> relu (a double accumulator, rounded once), softmax,
# a sum, transpose and a pad with a value; each value read as float and rounded to
# the dtype where it is defined (generator/c/dtypes.py).
HALF = """\
graph main(x: DTYPE[4, 8], w: DTYPE[6, 8], b: DTYPE[6]) {
  y, z, s, p = @fused {
    k = const DTYPE[8] [0.5, -1.25, 3, 0.1, 100, -0.001, 7, 2]
    h = relu(bias_add(dense(multiply(x, k), w), b))
    t = transpose(h)
    return softmax(h), exp(t), sum(h, axes=[1]), pad(x, pads=[0, 1, 0, 1], value=1.5)
  }
  return y, z, s, p
}
"""

# bool values: a comparison, logic with a bool input and a bool constant, where on the
# result, and casts (their byoc_cast_<from>_<to> functions defined once, where used).
BOOL = """\
graph main(x: float32[4, 8], y: float32[8], m: bool[4, 8]) {
  r, c, n = @fused {
    k = const bool[8] [true, false, true, true, false, false, true, false]
    g = logical_and(greater(x, y), logical_or(m, k))
    return where(g, x, y), cast(g, to="int8"), logical_not(cast(x, to="bool"))
  }
  return r, c, n
}
"""

# ONNX's QDQ conv (quantize_static's form), offloaded by `--backend fused`: uint8
# activations in and out, int8 weights with one scale per output channel, the int32
# bias, a relu. fused.yaml's pattern qdq_conv_bias_relu lowers it to an integer
# product (conv_integer: uint32 sums of the codes less their zero points) times the
# folded product of the scales; the bias' dequantization folds at build, and the
# requantization (byoc_saturate) runs in the integer nest's epilogue.
QDQ_CONV = """\
graph main(x: uint8[1, 3, 5, 5]) {
  xs = const float32[] [0.02]
  xz = const uint8[] [128]
  w = const int8[2, 3, 3, 3] [12, -7, 33, 5, -90, 18, 2, 0, -1, 64, 127, -128, 9, 9, -9, 40, -3, 7, 1, 2, 3, -4, -5, -6, 70, 11, -12, -20, 31, 8, -8, 100, -100, 6, 5, 4, 0, 1, -1, 2, -2, 3, -3, 4, -4, 50, 60, -70, 13, -13, 26, -26, 39, -39]
  ws = const float32[2, 1, 1, 1] [0.004, 0.0065]
  wz = const int8[2, 1, 1, 1] [0, 0]
  b = const int32[2] [-300, 1200]
  bs = const float32[2] [0.00008, 0.00013]
  bz = const int32[2] [0, 0]
  ys = const float32[] [0.03]
  yz = const uint8[] [0]
  c = conv(dequantize_linear(x, xs, xz), dequantize_linear(w, ws, wz), pads=[1, 1, 1, 1])
  return quantize_linear(relu(bias_add(c, dequantize_linear(b, bs, bz), axis=1)), ys, yz)
}
"""

EXTRA = {
    "bias_add_relu": BIAS_ADD_RELU,
    "qdq_conv": QDQ_CONV,
    "broadcast_mix": BROADCAST_MIX,
    "chain64": chain_graph(),
    "conv_bias_relu": CONV_BIAS_RELU,
    "split": SPLIT,
    "bool": BOOL,
    "float16": HALF.replace("DTYPE", "float16"),
    "bfloat16": HALF.replace("DTYPE", "bfloat16"),
}
PARTITIONED = ("resnet_basic_block", "mlp")
"""Examples offloaded by ``--backend fused`` (automatic partitioning)."""
OFFLOADED = ("qdq_conv",)
"""Cases of EXTRA offloaded likewise."""
CASES = [g.stem for g in GEN] + list(EXTRA) + ["edge", *PARTITIONED]


def label(path: Path) -> str:
    return path.resolve().relative_to(REPO).as_posix()


def source_of(case: str) -> tuple[str, str]:
    """(DSL text with @fused regions, the file name its locations name)."""
    if case in EXTRA:
        return EXTRA[case], f"{case}.graph"
    if case == "edge":
        return EDGE.replace("@ccompiler", f"@{BACKEND}"), "edge.graph"
    if case in PARTITIONED:
        path = EXAMPLES / f"{case}.graph"
        return path.read_text(), label(path)
    path = DATA / "gen" / f"{case}.graph"
    return path.read_text().replace("@BACKEND", f"@{BACKEND}"), label(path)


def externals_of(case: str) -> tuple[Function, ...]:
    text, file = source_of(case)
    program = parse(text, "graph", file=file)
    if case in PARTITIONED or case in OFFLOADED:
        program = partition(program, [load_backend(BACKEND)])
    return lower(program, load_backend, load_catalog()).externals_for(BACKEND)


def generate(externals, options=None, spec=None) -> str:
    spec = spec or load_backend(BACKEND)
    values = spec.option_values(options or {})
    artifact = module_of(generator_for(spec.kind)(externals, spec, load_catalog(), values))
    assert (artifact.name, artifact.role, artifact.backend) == (f"{BACKEND}.c", "module", BACKEND)
    return artifact.text


def compile_text(text: str, out_dir: Path):
    return tvm_ffi.load_module(
        str(compile_library({f"{BACKEND}.c": text, **SUPPORT}, f"{BACKEND}.c", out_dir))
    )


def ffi_array(array: np.ndarray):
    """``array`` as tvm_ffi takes it: numpy cannot export bfloat16 through DLPack, so a
    bfloat16 array goes through the runtime's zero-copy kDLBfloat tensor."""
    return bfloat16_tensor(array) if array.dtype == np.dtype("bfloat16") else array


def check_against_reference(module, fn: Function, rng: np.random.Generator, floats: bool = True) -> None:
    """Run ``module``'s ``fn`` on random inputs against the reference: elementwise
    regions bit for bit; others within the tolerance every float-summing backend meets
    (``check_close``) where the dot products sum in float (``floats``, the option
    float32_dots, on by default), else at 1e-5 (double sums, numpy's float64 order aside)."""
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    for p in fn.params:  # conftest's random_array has no False for bool
        if p.type.dtype == "bool":
            inputs[p.name] = rng.integers(0, 2, size=p.type.shape).astype(bool)
    outputs = [np.full(t.shape, 99, dtype=t.dtype) for t in fn.output_types]
    assert module[fn.name](*(ffi_array(a) for a in [*inputs.values(), *outputs])) is None
    for got, want in zip(outputs, evaluate(fn, inputs)):
        assert got.dtype == want.dtype and got.shape == want.shape
        if all(load_catalog()[n.op].rule.elementwise for n in fn.nodes):
            np.testing.assert_array_equal(got, want)  # the same IEEE operations, in the same order
        elif floats:
            check_close(got, want)
        else:  # sums in another order (double accumulators against numpy's float64 matmul)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- golden files


@pytest.mark.parametrize("case", CASES)
def test_golden(case, golden):
    assert generate(externals_of(case)) == golden("c")


@pytest.mark.parametrize("case", CASES)
def test_compiles_and_matches_reference(case, tmp_path, rng):
    """The default (float sums) and the double sums, each at its own tolerance."""
    externals = externals_of(case)
    for floats in (True, False):
        text = generate(externals, {"float32_dots": str(floats).lower()})
        module = compile_text(text, tmp_path / str(floats))
        for fn in externals:
            check_against_reference(module, fn, rng, floats)


def test_a_constant_with_no_elements_compiles_and_runs(tmp_path, rng):
    """A constant of no elements that a region reads (a concatenate's empty part) is an
    array no loop reads: it once failed the module's -Werror build as an unused static."""
    text = "graph main(x: float32[2, 3]) {\n  m = const float32[2, 0] []\n  return relu(concatenate(x, m, axis=1))\n}\n"
    program = partition(parse(text, "graph"), [load_backend(BACKEND)])
    externals = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    source = generate(externals)
    assert "(void)fused_0_const_0;  /* no elements: nothing reads it */" in source
    module = compile_text(source, tmp_path)
    for fn in externals:
        check_against_reference(module, fn, rng)


def test_one_loop_of_scalar_locals():
    text = generate(externals_of("guide_subgraph"))
    body = text[text.index("static void fused_0_(") :]
    body = body[: body.index("\n}\n")]
    assert body.count("for (") == 1 and "for (int64_t i = 0; i < 100; ++i) {" in body
    assert "const float t0 = in0[i] + in1[i];" in body and "out0[i] = t2;" in body
    assert "const float* restrict in0" in body and "float* restrict out0" in body
    assert "malloc" not in text and "free(" not in text


def test_bias_add_indexes_the_bias_by_the_inner_counter():
    text = generate(externals_of("bias_add_relu"))
    assert "for (int64_t i0 = 0; i0 < 8; ++i0) {" in text
    assert "const float t0 = in0[i0 * 16 + i1] + in1[i1];" in text
    assert "out0[i0 * 16 + i1] = t1;" in text
    body = re.sub(r"/\*.*?\*/", "", text[text.index("static void fused_0_(") :].split("\n}\n")[0], flags=re.S)
    assert "%" not in body and "/" not in body, "no division or modulo in the index arithmetic"


def test_colliding_c_names_are_a_graph_error():
    """As for c_source: region f's wrapper ``f_wrapper_`` is also the body of a region
    named ``f_wrapper``; a generator called without lower() still reports it."""
    text = "graph main(x: float32[2]) {\n  a = @fused as f { return add(x, x) }\n  return a\n}\n"
    (fn,) = lower(parse(text, "graph", file="names.graph"), load_backend, load_catalog()).externals
    with pytest.raises(GraphError, match="f_wrapper_") as info:
        generate([fn, replace(fn, name="f_wrapper")])
    assert info.value.location.line == 2


def test_every_statement_names_its_source():
    text = generate(externals_of("dag"))
    statements = [line for line in text.splitlines() if line.strip().startswith("const float t")]
    assert len(statements) == 4
    for line in statements:
        assert "tests/data/gen/dag.graph:" in line.split("/*")[1], line


def test_deterministic_in_process_and_across_processes():
    first = generate(externals_of("broadcast_mix"))
    assert generate(externals_of("broadcast_mix")) == first
    assert (
        text_in_fresh_process("test_gen_fused", "t.generate(t.externals_of('broadcast_mix'))", "4242")
        == first
    )


# ---------------------------------------------------------------------- loop planning


@pytest.mark.parametrize(
    "shape, operands, extents, indices, depths",
    [
        ((10, 10), [(10, 10)], (100,), ["i"], [1]),
        ((4, 3, 5), [(5,)], (12, 5), ["i1"], [2]),
        ((4, 3, 5), [(5,), (3, 1)], (4, 3, 5), ["i2", "i1"], [3, 2]),
        ((4, 3), [(4, 1)], (4, 3), ["i0"], [1]),
        ((2, 1, 3), [(2, 1, 3), ()], (6,), ["i", "0"], [1, 0]),
        ((), [()], (), ["0"], [0]),
        ((3, 1, 4), [(1, 1, 4)], (3, 4), ["i1"], [2]),
    ],
)
def test_plan_loops(shape, operands, extents, indices, depths):
    loops = plan_loops(shape, operands)
    assert loops.extents == extents
    assert [loops.index(s) for s in operands] == indices
    assert [loops.depth(s) for s in operands] == depths
    assert loops.size == int(np.prod(shape))


def test_plan_loops_index_is_numpy_broadcasting():
    """Every operand index the planner writes reads what np.broadcast_to would."""
    rng = np.random.default_rng(1)
    for _ in range(50):
        rank = int(rng.integers(0, 5))
        shape = tuple(int(d) for d in rng.integers(1, 4, size=rank))
        operands = []
        for _ in range(3):
            k = int(rng.integers(0, rank + 1))
            operands.append(tuple(d if rng.integers(0, 2) else 1 for d in shape[rank - k :]))
        loops = plan_loops(shape, operands)
        counters = np.indices(loops.extents).reshape(len(loops.extents), -1) if loops.extents else None
        for s in operands:
            flat = np.arange(int(np.prod(s))).reshape(s)
            want = np.broadcast_to(flat, shape).reshape(-1)
            env = {v: counters[k] for k, v in enumerate(loops.variables)} if counters is not None else {}
            got = eval(loops.index(s), {}, env)  # the C index is also a Python expression
            np.testing.assert_array_equal(np.broadcast_to(got, want.shape), want)


# ---------------------------------------------------------------- ops and dtypes


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_op_at_every_dtype(dtype, tmp_path, rng):
    catalog = load_catalog()
    ops = [op for op in ("add", "subtract", "multiply", "maximum", "minimum") if dtype in catalog[op].dtypes]
    unary = [op for op in ("negative", "relu", "copy") if dtype in catalog[op].dtypes]  # relu: no uint8
    if not is_integer(dtype) and dtype in catalog["divide"].dtypes:
        ops.append("divide")
    if not ops:  # bool: no arithmetic; where and copy
        text = """graph main(a: bool[2, 3, 4], b: bool[3, 1], c: bool[]) {
  r, s = @fused { return copy(a), where(b, copy(c), a) }
  return r, s
}"""
        if "bool" not in catalog["where"].dtypes:
            text = text.replace(", where(b, copy(c), a)", ", copy(b)")
        (fn,) = lower(parse(text, "graph", file="bool.graph"), load_backend, catalog).externals_for(BACKEND)
        check_against_reference(compile_text(generate([fn]), tmp_path), fn, rng)
        return
    lines = [f"graph main(a: {dtype}[2, 3, 4], b: {dtype}[3, 1], c: {dtype}[]) {{", "  r = @fused {"]
    names = []
    for k, op in enumerate(ops):
        lines.append(f"    b{k} = {op}(a, b)")
        lines.append(f"    c{k} = {op}(c, b{k})")
        names += [f"b{k}", f"c{k}"]
    for k, op in enumerate(unary):
        lines.append(f"    u{k} = {op}(c{k})")
        names.append(f"u{k}")
    lines += [f"    return add({', add('.join(names[:-1])}, {names[-1]}{')' * (len(names) - 1)}", "  }"]
    lines += ["  return r", "}"]
    program = parse("\n".join(lines), "graph", file=f"{dtype}.graph")
    (fn,) = lower(program, load_backend, catalog).externals_for(BACKEND)
    check_against_reference(compile_text(generate([fn]), tmp_path), fn, rng)


def test_rank_8_and_integer_wraparound_match_numpy(tmp_path):
    """-fwrapv (the spec's flags) makes int overflow wrap, as numpy's does."""
    text = (
        "graph main(a: int32[2, 1, 2, 1, 2, 1, 2, 3], b: int32[3], c: int64[2]) {\n"
        "  p, q = @fused { return multiply(add(a, b), b), negative(multiply(c, c)) }\n"
        "  return p, q\n}\n"
    )
    model = build(parse(text, "graph", file="wrap.graph"))
    a = np.full((2, 1, 2, 1, 2, 1, 2, 3), 2**31 - 5, np.int32)
    b = np.array([3, 7, 65536], np.int32)
    c = np.array([2**40, -(2**62)], np.int64)
    got = model(a=a, b=b, c=c)
    with np.errstate(over="ignore"):
        want = evaluate(parse(text, "graph").functions[0], {"a": a, "b": b, "c": c})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# ------------------------------------------------------------ partitioning, build, run


def test_partition_puts_broadcasting_ops_into_fused_regions():
    text = (
        "graph main(x: float32[4, 8], b: float32[8], k: float32[4, 1]) {\n"
        "  h = relu(add(x, b))\n"
        "  g = multiply(h, k)\n"
        "  return concatenate(h, g, axis=0), subtract(g, b)\n}\n"
    )
    program = parse(text, "graph", file="bcast.graph")
    parted = partition(program, [load_backend(BACKEND)])
    fn = parted.functions[0]
    host = [n.op for n in fn.nodes if n.op != CALL_OP]
    regions = [n.callee for n in fn.nodes if n.op == CALL_OP]
    assert host == []  # concatenate too: fused maps every catalog op
    assert [r.backend for r in regions] == [BACKEND]
    assert [n.op for n in regions[0].nodes] == ["add", "relu", "multiply", "concatenate", "subtract"]
    model = build(program, backends=[BACKEND])
    rng = np.random.default_rng(5)
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in program.functions[0].params}
    for got, want in zip(model(**inputs), evaluate(program.functions[0], inputs)):
        np.testing.assert_array_equal(got, want)


def test_byoc_run_guide_plain_graph(capsys):
    rc = cli.main(["run", str(EXAMPLES / "guide_plain_graph.graph"), "--backend", BACKEND])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "(backends: fused)" in out and "every output matches the numpy reference" in out
