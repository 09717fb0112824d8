"""The c_source codegen (the ccompiler backend): golden C, compiled and run against numpy.

Every case is generated, compared with its golden file under
tests/golden/test_gen_c_source/, compiled under -std=c99 -Wall -Wextra -Werror,
loaded with tvm_ffi and called on seeded random numpy arrays; the outputs must equal
the numpy reference (byoc.api.evaluate) of the same external function.
"""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import tvm_ffi
from compile_util import compile_library
from conftest import DATA, EXAMPLES, random_array, text_in_fresh_process
from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import LiteralScalarString

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.errors import GraphError
from byoc.generator import generator_for
from byoc.generator.c_text import c_literals
from byoc.generator.lowering import lower, offload_whole
from byoc.generator.partition import partition
from byoc.ir import Constant, Function, Node, Param, TensorType
from byoc.runtime.module import bfloat16_tensor
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS

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
    (artifact,) = generator_for(spec.kind)(externals, spec, load_catalog(), {})
    assert (artifact.name, artifact.role, artifact.backend) == (f"{BACKEND}.c", "module", BACKEND)
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


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """case -> (externals, loaded module), compiled once per case."""
    cache = {}

    def get(case: str):
        if case not in cache:
            externals = externals_of(case)
            cache[case] = externals, build(generate(externals), tmp_path_factory.mktemp(case))
        return cache[case]

    return get


# ---------------------------------------------------------------------- golden files


@pytest.mark.parametrize("case", CASES)
def test_golden(case, golden):
    assert generate(externals_of(case)) == golden("c")


@pytest.mark.parametrize("case", CASES)
def test_compiles_and_matches_reference(case, compiled, rng):
    externals, module = compiled(case)
    assert externals
    for fn in externals:
        check_against_reference(module, fn, rng)


@pytest.mark.parametrize("case", list(NETWORKS))
def test_networks_run_every_op_on_ccompiler(case):
    """conv, batch_norm, dense, bias_add and softmax are offloaded, not left on the host;
    the chains of them run as the spec's composites (tests/test_composites.py)."""
    (fn,) = externals_of(case)
    ops = {n.op for node in fn.nodes for n in (node.callee.nodes if node.callee else (node,))}
    want = (
        {"conv", "batch_norm", "relu", "add"}
        if "resnet" in case
        else {"dense", "bias_add", "relu", "softmax"}
    )
    assert ops == want
    text = generate((fn,))
    macros = (
        ("CSOURCE_CONV2D_BN_RELU(", "CSOURCE_CONV2D_BN_ADD_RELU(")
        if "resnet" in case
        else ("CSOURCE_DENSE_BIAS(", "CSOURCE_SOFTMAX(")
    )
    for macro in macros:
        assert f"\n{macro}{fn.name}_" in text


def test_examplejson_symbols_are_the_subgraph_names(compiled):
    externals, module = compiled("ejson_tvm_external_runtime")
    assert [fn.name for fn in externals] == ["json_rt_0", "json_rt_1"]
    text = generate(externals)
    for sym in ("json_rt_0", "json_rt_1"):
        for name in (f"{sym}_0", f"{sym}_", f"{sym}_wrapper_", f"__tvm_ffi_{sym}"):
            assert f" {name}(" in text
        assert callable(module[sym])


def test_guide_structure():
    text = generate(externals_of("guide_subgraph"))
    assert "#define CSOURCE_BINARY_OP_2D(p_ID_, p_OP_, p_DIM1_, p_DIM2_, p_DTYPE_) \\\n" in text
    for k, op in enumerate("+-*"):
        assert f"\nCSOURCE_BINARY_OP_2D(ccompiler_0_{k}, {op}, 10, 10, float)\n" in text
    assert "float* const buf0 = (float*)(ws + 0);" in text
    assert "float* const buf1 = (float*)(ws + 448);" in text  # 400 bytes, rounded up to 64
    assert "ccompiler_0_2(buf1, in3, out0);" in text
    assert "static int ccompiler_0_wrapper_(\n    DLTensor* arg0,\n" in text
    assert "TVM_FFI_DLL_EXPORT int __tvm_ffi_ccompiler_0(" in text


def test_every_function_names_its_source():
    text = generate(externals_of("dag"))
    text = text[text.index("/* ---- ccompiler_0: ") :]  # after the shared helpers
    functions = [line for line in text.splitlines() if line.startswith(("static int", "TVM_FFI_DLL_EXPORT"))]
    kernels = [line for line in text.splitlines() if line.startswith("CSOURCE_BINARY_OP_2D(")]
    assert len(kernels) == 3 and functions  # the two multiplies share a kernel
    for line in kernels + functions:
        before = text[: text.index(line)].rsplit("*/", 1)[0].rsplit("/*", 1)[1]
        assert "tests/data/gen/dag.graph:" in before, line


# --------------------------------------------------------------------- calling it


@pytest.fixture
def guide(compiled):
    (fn,), module = compiled("ejson_guide_subgraph")
    inputs = [np.ones(p.type.shape, np.float32) for p in fn.params]
    return module[fn.name], inputs, np.zeros((10, 10), np.float32)


def test_contiguous_views_with_offsets(guide, rng):
    f, _, _ = guide
    big = random_array(rng, (5, 10, 10), "float32")
    out = np.zeros((3, 10, 10), np.float32)
    f(big[1], big[2], big[3], big[4], out[1])
    np.testing.assert_allclose(out[1], ((big[1] + big[2]) - big[3]) * big[4], rtol=1e-6)
    assert not out[0].any() and not out[2].any()


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (
            lambda i, o: (*i, o, o),
            TypeError,
            r"expected 5 arguments \(4 input\(s\), then 1 output\(s\)\), got 6",
        ),
        (lambda i, o: (*i,), TypeError, "expected 5 arguments .* got 4"),
        (
            lambda i, o: (*i[:3], i[3].astype(np.float64), o),
            TypeError,
            r"argument 3 \(input v3\) must be float32",
        ),
        (lambda i, o: (*i, o.astype(np.int32)), TypeError, r"argument 4 \(output 0\) must be float32"),
        (
            lambda i, o: (np.ones((10, 9), np.float32), *i[1:], o),
            ValueError,
            r"must have shape \[10, 10\], got \[10, 9\]",
        ),
        (lambda i, o: (*i, np.zeros(100, np.float32)), ValueError, "must have rank 2"),
        (lambda i, o: (*i[:3], np.ones((10, 20), np.float32)[:, ::2], o), ValueError, "must be contiguous"),
        (lambda i, o: (*i, np.ones((10, 10), np.float32).T.copy().T), ValueError, "must be contiguous"),
        (lambda i, o: (1.5, *i[1:], o), TypeError, r"argument 0 \(input v0\) must be a tensor"),
    ],
    ids=["too_many", "too_few", "dtype", "out_dtype", "shape", "rank", "strided", "transposed", "not_tensor"],
)
def test_bad_calls_raise(guide, bad, error, message):
    f, inputs, out = guide
    with pytest.raises(error, match=message):
        f(*bad(inputs, out))
    assert not out.any(), "a rejected call must not write its outputs"


def test_tvm_ffi_tensors_are_accepted(guide, rng):
    f, _, _ = guide
    arrays = [random_array(rng, (10, 10), "float32") for _ in range(4)]
    out = np.zeros((10, 10), np.float32)
    f(*(tvm_ffi.from_dlpack(a) for a in arrays), tvm_ffi.from_dlpack(out))
    np.testing.assert_allclose(out, ((arrays[0] + arrays[1]) - arrays[2]) * arrays[3], rtol=1e-6)


# ------------------------------------------------------------------------ constants


def test_constants_round_trip_exactly(tmp_path):
    """Constants of every dtype, printed as C literals, read back bit for bit."""
    rng = np.random.default_rng(7)
    f32 = rng.integers(0, 2**32, size=64, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f64 = rng.integers(0, 2**63, size=64, dtype=np.uint64).view(np.float64) * rng.choice([-1, 1], 64)
    tiny = [5e-324, 2.2250738585072014e-308, 1.401298464324817e-45, 1.1754942e-38, -0.0, 0.1, 1 / 3]
    values = {
        "float32": [float(v) for v in f32 if np.isfinite(v)] + tiny[2:],
        "float64": [float(v) for v in f64 if np.isfinite(v)] + tiny,
        "int32": [-(2**31), 2**31 - 1, 0, -1, *rng.integers(-(2**31), 2**31, 32).tolist()],
        "int64": [-(2**63), 2**63 - 1, 0, -1, *rng.integers(-(2**63), 2**63 - 1, 32).tolist()],
    }
    constants = tuple(Constant(f"k_{d}", TensorType((len(v),), d), tuple(v)) for d, v in values.items())
    fn = Function("consts", (), constants, (), tuple(c.name for c in constants), BACKEND)
    module = build(generate([fn]), tmp_path)
    outputs = [np.zeros(c.type.shape, c.type.dtype) for c in constants]
    module["consts"](*outputs)
    for got, c in zip(outputs, constants):
        want = np.array(c.values, dtype=c.type.dtype)
        assert got.tobytes() == want.tobytes(), c.type.dtype


def test_non_finite_constants_and_unused_inputs(tmp_path):
    t = TensorType((4,), "float32")
    k = Constant("k", t, (math.inf, -math.inf, math.nan, 1.5))
    add = Node(("y",), "add", ("x", "k"), (t,))
    fn = Function("nonfinite", (Param("x", t), Param("unused", t)), (k,), (add,), ("y", "k"), BACKEND)
    text = generate([fn])
    assert "#include <math.h>" in text and "(void)in1;" in text
    assert "{INFINITY, -INFINITY, NAN, 1.5f}" in text
    module = build(text, tmp_path)
    x = np.arange(4, dtype=np.float32)
    y, kk = np.zeros(4, np.float32), np.zeros(4, np.float32)
    module["nonfinite"](x, x, y, kk)
    for got, want in zip((y, kk), evaluate(fn, {"x": x, "unused": x})):
        np.testing.assert_array_equal(got, want)


def test_c_literals():
    assert c_literals((0.1, -0.0, 3.0, 1e20), "float32") == (["0.1f", "-0.0f", "3.0f", "1e+20f"], False)
    assert c_literals((0.1, 1 / 3, 5e-324), "float64") == (["0.1", "0.3333333333333333", "5e-324"], False)
    assert c_literals((math.nan, -math.inf), "float64") == (["NAN", "-INFINITY"], True)
    assert c_literals((-(2**31), 5), "int32") == (["INT32_MIN", "5"], False)
    assert c_literals((-(2**63), 2**63 - 1), "int64") == (["INT64_MIN", "9223372036854775807"], False)


# ----------------------------------------------------------------- errors


def test_broadcasting_region_is_a_located_graph_error():
    text = "graph main(x: float32[2, 3], y: float32[3]) {\n  s = @ccompiler {\n    return add(x, y)\n  }\n  return s\n}\n"
    externals = lower(parse(text, "graph", file="bcast.graph"), load_backend, load_catalog()).externals
    with pytest.raises(GraphError) as info:
        generate(externals)
    err = info.value
    assert (err.location.file, err.location.line, err.location.column) == ("bcast.graph", 3, 12)
    assert "y is float32[3]" in err.message and "float32[2, 3]" in err.message
    assert "broadcast" in err.hint


def test_colliding_c_names_are_a_graph_error():
    """The guide's naming lets user-named regions collide: region f's wrapper is
    ``f_wrapper_``, which is also the body of a region named ``f_wrapper``. lower()
    rejects such names; the generator checks its own names too, as a last line."""
    text = "graph main(x: float32[2]) {\n  a = @ccompiler as f { return add(x, x) }\n  return a\n}\n"
    (fn,) = lower(parse(text, "graph", file="names.graph"), load_backend, load_catalog()).externals
    with pytest.raises(GraphError, match="f_wrapper_") as info:
        generate([fn, replace(fn, name="f_wrapper")])
    assert info.value.location.line == 2


def test_no_externals_no_artifact():
    spec = load_backend(BACKEND)
    assert generator_for(spec.kind)((), spec, load_catalog(), {}) == ()


# ----------------------------------------------------------- determinism, spec edits


def test_deterministic_in_process_and_across_processes():
    first = generate(externals_of("whole_graph"))
    assert generate(externals_of("whole_graph")) == first
    assert (
        text_in_fresh_process("test_gen_c_source", "t.generate(t.externals_of('whole_graph'))", "12345")
        == first
    )


def test_editing_one_macro_changes_only_its_lines(tmp_path, monkeypatch):
    """The snapshot-reviewed codegen change: edit one macro of a spec, regenerate, and
    the diff is exactly the edited lines of that macro's #define."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    spec_file = tmp_path / f"{BACKEND}.yaml"
    spec_file.write_bytes((SHIPPED_BACKENDS / f"{BACKEND}.yaml").read_bytes())

    def loader(name):
        return load_backend(name, spec_path=[tmp_path])

    externals = externals_of("guide_subgraph", loader)
    before = generate(externals, loader(BACKEND))

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    doc = yaml.load(spec_file.read_text(encoding="utf-8"))
    macro = doc["macros"]["CSOURCE_BINARY_OP_2D"]
    old = "      int64_t k = i * p_DIM2_ + j;\n"
    assert old in macro["body"]
    new = "      const int64_t k = i * p_DIM2_ + j; /* row-major */\n"
    macro["body"] = LiteralScalarString(macro["body"].replace(old, new))
    with spec_file.open("w", encoding="utf-8") as out:
        yaml.dump(doc, out)
    stat = spec_file.stat()
    os.utime(spec_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))

    after = generate(externals, loader(BACKEND))
    diff = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if not line.startswith(("---", "+++", "@@"))
    ]
    assert diff == ["-" + old.rstrip() + " \\", "+" + new.rstrip() + " \\"]
    # The edited macro still compiles and computes the same thing.
    module = build(after, tmp_path / "build")
    check_against_reference(module, externals[0], np.random.default_rng(3))


def test_options_do_not_change_the_text():
    spec = load_backend(BACKEND)
    externals = externals_of("nd")
    base = generate(externals)
    (artifact,) = generator_for(spec.kind)(
        externals, spec, load_catalog(), {"opt_level": 3, "fast_math": True}
    )
    assert artifact.text == base


def test_shipped_spec_is_named_without_machine_paths():
    text = generate(externals_of("nd"))
    assert "spec/backends/ccompiler.yaml (shipped with byoc)" in text
    assert str(REPO) not in text


def test_one_kernel_per_distinct_use_called_in_topological_order():
    (fn,) = externals_of("dag")
    text = generate([fn])
    body = text[text.index(f"static int {fn.name}_(") :]
    calls = [line.split("(")[0].strip() for line in body.splitlines()[1:] if line.startswith(f"  {fn.name}_")]
    # add, multiply, subtract, then the second multiply (same op, type and attributes).
    assert calls == [f"{fn.name}_{k}" for k in (0, 1, 2, 1)]
    assert text.count(f"\nCSOURCE_BINARY_OP_2D({fn.name}_") == 3


def test_a_shared_kernel_names_the_nodes_it_serves(tmp_path, rng):
    """Ten identical adds are one kernel, whose comment names the first four nodes and
    counts the rest; softmax over another axis is a kernel of its own."""
    lines = ["graph main(x: float32[3, 5], y: float32[3, 5]) {", "  s = @ccompiler {", "    t0 = add(x, y)"]
    lines += [f"    t{i} = add(t{i - 1}, y)" for i in range(1, 10)]
    lines += ["    u = softmax(t9, axis=0)", "    return softmax(u, axis=1)", "  }", "  return s", "}"]
    program = parse("\n".join(lines), "graph", file="shared.graph")
    (fn,) = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    text = generate((fn,))
    assert (
        "/* ccompiler_0_0: float32[3, 5], for 10 nodes:\n"
        "     t0 = add(...) at shared.graph:3:5\n"
        "     t1 = add(...) at shared.graph:4:5\n"
        "     t2 = add(...) at shared.graph:5:5\n"
        "     t3 = add(...) at shared.graph:6:5\n"
        "     ... and 6 more */\n"
        "CSOURCE_BINARY_OP_2D(ccompiler_0_0, +, 3, 5, float)\n"
    ) in text
    assert "/* ccompiler_0_1: u = softmax(...) at shared.graph:13:5, float32[3, 5] */" in text
    assert "/* ccompiler_0_2: (nested call) = softmax(...) at shared.graph:14:12, float32[3, 5] */" in text
    assert "ccompiler_0_3" not in text
    assert text.count("  ccompiler_0_0(") == 10
    check_against_reference(build(text, tmp_path), fn, rng)


def test_intermediates_share_buffers_by_lifetime(tmp_path, rng):
    """A chain of 40 ops needs two intermediate buffers, not 39 (the memory plan)."""
    lines = ["graph main(x: float32[3, 3], y: float32[3, 3]) {", "  s = @ccompiler {", "    t0 = add(x, y)"]
    lines += [f"    t{i} = {('subtract', 'multiply', 'add')[i % 3]}(t{i - 1}, y)" for i in range(1, 40)]
    lines += ["    return t39", "  }", "  return s", "}"]
    program = parse("\n".join(lines), "graph", file="chain.graph")
    (fn,) = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    text = generate((fn,))
    assert text.count("= (float*)(ws + ") == 2
    assert "byoc_workspace(128, &spare);" in text  # two buffers of 36 bytes, each 64-byte aligned
    assert "holds t0, t2, t4, ... t38 (20 values)" in text
    check_against_reference(build(text, tmp_path), fn, rng)


def test_a_long_body_calls_its_kernels_in_parts(tmp_path, rng, monkeypatch):
    """A body of more than PART_CALLS calls is split into noinline parts of at most that
    many, each taking exactly the pointers its calls pass; the results are the same."""
    from byoc.generator import c_source_body

    monkeypatch.setattr(c_source_body, "PART_CALLS", 4)
    lines = ["graph main(x: float32[3, 3], y: float32[3, 3]) {", "  s = @ccompiler {", "    t0 = add(x, y)"]
    lines += [f"    t{i} = {('subtract', 'multiply', 'add')[i % 3]}(t{i - 1}, x)" for i in range(1, 10)]
    lines += ["    return t9", "  }", "  return s", "}"]
    program = parse("\n".join(lines), "graph", file="parts.graph")
    (fn,) = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    text = generate((fn,))
    assert "ccompiler_0_part2_" in text and "ccompiler_0_part3_" not in text
    assert (
        "/* ccompiler_0_part1_: kernel calls 4 to 7 of ccompiler_0_ (nodes t4 to t7);\n"
        "   the body's calls in parts of at most 4, each optimised on its own. */\n"
        "__attribute__((noinline)) static void ccompiler_0_part1_(float* buf1, float* in0, float* buf0) {\n"
    ) in text
    body = text[text.index("static int ccompiler_0_(") :]
    body = body[: body.index("\n}\n")]
    assert "  ccompiler_0_part2_(buf1, in0, buf0, out0);" in body
    assert not [
        line for line in body.splitlines() if line.startswith("  ccompiler_0_") and "part" not in line
    ]
    check_against_reference(build(text, tmp_path), fn, rng)


def test_a_cplusplus_compiler_keeps_the_entry_names(tmp_path, rng):
    """TVM builds a C-source module with a C++ compiler: the guards around the exported
    entries give them C linkage, so they are found under their names (and run)."""
    externals = externals_of("dag")
    text = generate(externals)
    assert text.count('#ifdef __cplusplus\nextern "C"\n#endif\nTVM_FFI_DLL_EXPORT int __tvm_ffi_') == len(
        externals
    )
    module = tvm_ffi.load_module(
        str(compile_library({f"{BACKEND}.cc": text}, f"{BACKEND}.cc", tmp_path, cplusplus=True))
    )
    for fn in externals:
        check_against_reference(module, fn, rng)


def test_a_listed_parameter_order_is_the_entry_argument_order(tmp_path, rng):
    """`@ccompiler as blk(b, w, x)`: the exported entry takes b, w, x in that order."""
    program = parse(
        """graph main(x: float32[3, 4], w: float32[3, 4], b: float32[3, 4]) {
          s = @ccompiler as blk(b, w, x) { return add(subtract(x, w), multiply(b, b)) }
          return s
        }""",
        "graph",
    )
    (fn,) = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    assert [p.name for p in fn.params] == ["b", "w", "x"]
    text = generate((fn,))
    assert "0: input b: float32[3, 4]" in text and "2: input x: float32[3, 4]" in text
    check_against_reference(build(text, tmp_path), fn, rng)
