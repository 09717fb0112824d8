"""The c_source codegen (the ccompiler backend): golden C, compiled and run against numpy.

Every case is generated, compared with its golden file under
tests/golden/test_gen_c_source/, compiled under -std=c99 -Wall -Wextra -Werror,
loaded with tvm_ffi and called on seeded random numpy arrays; the outputs must equal
the numpy reference (byoc.api.evaluate) of the same external function. The layout of
the generated C is tested in tests/test_gen_c_source_body.py.
"""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import replace

import numpy as np
import pytest
import tvm_ffi
from compile_util import module_artifact
from conftest import random_array, text_in_fresh_process
from gen_c_source_support import (
    BACKEND,
    CASES,
    NETWORKS,
    REPO,
    build,
    check_against_reference,
    externals_of,
    generate,
)
from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import LiteralScalarString

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.errors import GraphError
from byoc.generator import generator_for
from byoc.generator.c.text import c_literals
from byoc.generator.lowering import lower
from byoc.ir import Constant, Function, Node, Param, TensorType
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS


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
    artifact = module_artifact(
        generator_for(spec.kind)(externals, spec, load_catalog(), {"opt_level": 3, "fast_math": True})
    )
    assert artifact.text == base


def test_shipped_spec_is_named_without_machine_paths():
    text = generate(externals_of("nd"))
    assert "spec/backends/ccompiler.yaml (shipped with byoc)" in text
    assert str(REPO) not in text
