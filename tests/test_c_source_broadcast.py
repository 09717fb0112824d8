"""Broadcasting in ``c_source`` (a macro's ``broadcast: true``, issue 35): a node whose
inputs numpy-broadcast to its result goes to a macro that declares it takes them, which
reads how through ``${in<k>_stride<j>}`` / ``${in<k>_strides}``; a macro that does not
leaves the node to the next backend, with the reason (generator/c_source/values.py:
shape_refusal). A pattern's macro that reads a bias as a vector (``${in2_dim0}``) no
longer matches a full-shape tensor, which it would index as a vector; the spec's
declarations are checked when it loads (tests/test_c_source_broadcast_spec_errors.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from c_source_broadcast_support import COMPILE, VENDOR, write_spec
from compile_util import module_artifact
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from partition_support import placement, random_inputs

import byoc
from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build
from byoc.generator import generator_for
from byoc.generator.lowering import lower
from byoc.generator.partition import partition
from byoc.generator.partition.annotate import why_not_supported
from byoc.ir import ANON_PREFIX
from byoc.spec import ENV_VAR

# NPU_DENSE_BIAS_RELU reads its bias as a vector of one value per output column: its
# ${in2_dim0} is the number of columns. The vendor's pattern says nothing of b's shape.
NPU = f"""\
version: 1
name: npu
kind: c_source
dtypes: [float32]
ranks: [1, 2]
{COMPILE}
macros:
  NPU_RELU:
    inputs: 1
    params: {{p_ID_: "${{symbol}}", p_SIZE_: "${{size}}"}}
    body: |
      static void p_ID_(const float* a, float* out) {{
        for (long k = 0; k < p_SIZE_; ++k) out[k] = a[k] > 0 ? a[k] : 0;
      }}
  NPU_DENSE_BIAS_RELU:
    doc: relu(x . w^T + b), b a vector of one value per output column
    inputs: 3
    params: {{p_ID_: "${{symbol}}", p_M_: "${{in0_dim0}}", p_K_: "${{in0_dim1}}", p_N_: "${{in2_dim0}}"}}
    body: |
      static void p_ID_(const float* x, const float* w, const float* b, float* out) {{
        for (long i = 0; i < p_M_; ++i)
          for (long j = 0; j < p_N_; ++j) {{
            double v = 0;
            for (long k = 0; k < p_K_; ++k) v += (double)x[i * p_K_ + k] * (double)w[j * p_K_ + k];
            float y = (float)v + b[j];
            out[i * p_N_ + j] = y > 0 ? y : 0;
          }}
      }}
ops:
  relu: {{macros: {{default: NPU_RELU}}}}
patterns:
  dense_bias_relu:
    inputs: [x, w, b]
    match: |
      return relu(add(dense(x, w), b))
    macros: {{2: NPU_DENSE_BIAS_RELU}}
"""

FLAT = VENDOR.replace(
    "ops:\n  add: {macros: {default: VENDOR_ADD}}", "ops:\n  add: {macros: {default: VENDOR_ADD_FLAT}}"
)


@pytest.fixture
def spec_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.delenv(ENV_VAR, raising=False)
    d = tmp_path / "specs"
    d.mkdir()
    write_spec(d, VENDOR)
    write_spec(d, NPU)
    return d


def assert_matches_reference(program, spec_dir: Path, backends: list[str]) -> None:
    fn = program.functions[0]
    inputs = random_inputs(fn)
    got = build(program, backends=backends, spec_path=[str(spec_dir)])(**inputs)
    want = evaluate(fn, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def type_text(shape: tuple[int, ...]) -> str:
    return f"float32[{', '.join(map(str, shape))}]"


# ------------------------------------------------------------- broadcasting add


@st.composite
def partner(draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``shape`` in any way numpy allows: some leading axes
    missing, any other axis of extent 1."""
    lead = draw(st.integers(0, len(shape) - 1))
    return tuple(1 if draw(st.booleans()) else n for n in shape[lead:])


@st.composite
def broadcast_graphs(draw) -> str:
    """Two adds: ``d = add(a, b)``, then ``add(e, d)``, each operand drawn to broadcast
    against a common shape (so either side of either add may be the smaller)."""
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=4)))
    a, b, e = (draw(partner(shape)) for _ in range(3))
    return (
        f"graph main(a: {type_text(a)}, b: {type_text(b)}, e: {type_text(e)}) {{\n"
        "  d = add(a, b)\n"
        "  f = add(e, d)\n"
        "  return f\n"
        "}\n"
    )


def broadcasting(fn) -> set[str]:
    """The nodes of ``fn`` with an input of another shape than the result."""
    types = fn.types()
    return {n.name for n in fn.nodes if any(types[i].shape != n.type.shape for i in n.inputs)}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=broadcast_graphs())
def test_broadcasting_adds_run_on_the_macro_that_declares_it(text, spec_dir):
    program = parse(text, "graph")
    placed = placement(partition(program, [load_backend("vendor", spec_path=[spec_dir])]))
    assert placed == {"d": "vendor", "f": "vendor"}
    assert_matches_reference(program, spec_dir, ["vendor"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=broadcast_graphs())
def test_a_macro_without_broadcast_leaves_broadcasting_adds_to_the_next_backend(text, spec_dir):
    write_spec(spec_dir, FLAT)
    program = parse(text, "graph")
    (fn,) = program.functions
    specs = [load_backend(name, spec_path=[spec_dir]) for name in ("vendor", "fused")]
    placed = placement(partition(program, specs))
    moved = broadcasting(fn)
    assert placed == {name: "fused" if name in moved else "vendor" for name in ("d", "f")}
    types, catalog = fn.types(), load_catalog()
    for node in fn.nodes:
        why = why_not_supported(specs[0], node, types, catalog)
        if node.name not in moved:
            assert why is None
            continue
        k = next(k for k, i in enumerate(node.inputs) if types[i].shape != node.type.shape)
        name = node.inputs[k]
        assert why == (
            f"input {k} ({name}) is {types[name]}, broadcast to {node.type}, and macro VENDOR_ADD_FLAT does not broadcast"
        )


def test_the_flat_macro_runs_what_it_takes_and_fused_the_rest(spec_dir):
    write_spec(spec_dir, FLAT)
    program = parse(
        "graph main(a: float32[4, 8], b: float32[8], c: float32[4, 8]) {\n"
        "  d = add(a, b)\n  e = add(d, c)\n  return e\n}\n",
        "graph",
    )
    specs = [load_backend(name, spec_path=[spec_dir]) for name in ("vendor", "fused")]
    assert placement(partition(program, specs)) == {"d": "fused", "e": "vendor"}
    assert_matches_reference(program, spec_dir, ["vendor", "fused"])


def test_an_explicit_region_of_a_broadcast_on_a_flat_macro_is_a_located_error(spec_dir):
    write_spec(spec_dir, FLAT)
    text = "graph main(a: float32[4, 8], b: float32[8]) {\n  y = @vendor {\n    return add(a, b)\n  }\n  return y\n}\n"
    with pytest.raises(byoc.errors.GraphError) as info:
        build(parse(text, "graph", file="explicit.graph"), spec_path=[str(spec_dir)])
    assert "but b is float32[8]" in info.value.message
    assert info.value.location is not None and info.value.location.line == 3
    hint = info.value.hint
    assert (
        hint is not None and "macro VENDOR_ADD_FLAT does not broadcast" in hint and "broadcast: true" in hint
    )


def test_an_explicit_region_of_a_broadcast_runs_on_a_macro_that_declares_it(spec_dir):
    text = "graph main(a: float32[4, 8], b: float32[4, 1]) {\n  y = @vendor {\n    return add(b, a)\n  }\n  return y\n}\n"
    assert_matches_reference(parse(text, "graph"), spec_dir, [])


def test_the_readme_example_generates_the_use_it_shows_and_runs(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    readme = (Path(byoc.spec.__file__).parent / "README.md").read_text(encoding="utf-8")
    marker = "<!-- the block below and the use after it are checked by tests/test_c_source_broadcast.py -->"
    section = readme[readme.index(marker) :]
    block = re.findall(r"```yaml\n(.*?)```", section, flags=re.S)[0]
    use = re.search(r"`(NPU_ADD\(npu_0_0, .*?\))`", section)
    assert use is not None
    header = f"version: 1\nname: npu\nkind: c_source\ndtypes: [float32]\nranks: [1, 2]\n{COMPILE}\n"
    prelude = "prelude: |\n  #include <stdint.h>\n  #define NPU_ITEMS(...) __VA_ARGS__\n"
    write_spec(tmp_path, header + prelude + block + "ops:\n  add: {macros: {default: NPU_ADD}}\n")
    text = "graph main(x: float32[4, 8], b: float32[8]) {\n  return add(x, b)\n}\n"
    assert f"\n{use.group(1)}\n" in generated_c(tmp_path, text, "npu")
    assert_matches_reference(parse(text, "graph"), tmp_path, ["npu"])


# ------------------------------------------------------------------ the golden C


def generated_c(spec_dir: Path, text: str, backend: str = "vendor") -> str:
    """The C module of ``backend`` (of ``spec_dir``) for ``text``, partitioned over it."""
    catalog = byoc.load_catalog()
    spec = load_backend(backend, spec_path=[str(spec_dir)])
    program = partition(parse(text, "graph", file="broadcast.graph"), [spec], catalog)
    externals = lower(program, lambda name: load_backend(name, [str(spec_dir)]), catalog)
    artifact = module_artifact(generator_for(spec.kind)(externals.externals_for(backend), spec, catalog, {}))
    return artifact.text


GOLDEN_GRAPH = """\
graph main(a: float32[2, 1, 4], b: float32[3, 1], c: float32[4]) {
  d = add(a, b)
  return add(c, d)
}
"""


def test_golden_broadcast_strides(spec_dir, golden):
    text = generated_c(spec_dir, GOLDEN_GRAPH)
    assert text == golden("c")
    assert_matches_reference(parse(GOLDEN_GRAPH, "graph"), spec_dir, ["vendor"])  # -Werror, and right
    # each use passes the inputs' strides along its result's axes, 0 where broadcast
    from byoc.generator.c_source.values import broadcast_strides

    (fn,) = parse(GOLDEN_GRAPH, "graph").functions
    types = fn.types()
    for node in fn.nodes:
        strides = [broadcast_strides(types[i].shape, node.type.shape) for i in node.inputs]
        assert all(s is not None for s in strides) and any(0 in s for s in strides if s is not None)
        shown = ", ".join("(" + ", ".join(map(str, s)) + ")" for s in strides if s is not None)
        assert f"{shown})\n" in text


def test_broadcast_strides_follow_numpy():
    from byoc.generator.c_source.values import broadcast_strides

    rng = np.random.default_rng(3)
    for shape, out in [
        ((3, 1), (2, 3, 4)),
        ((4,), (2, 3, 4)),
        ((1, 3, 1), (2, 3, 4)),
        ((2, 3, 4), (2, 3, 4)),
    ]:
        strides = broadcast_strides(shape, out)
        assert strides is not None
        x = rng.standard_normal(shape)
        view = np.broadcast_to(x, out)
        flat = x.ravel()
        for index in np.ndindex(*out):
            assert flat[sum(i * s for i, s in zip(index, strides))] == view[index]
    assert broadcast_strides((3,), (2, 4)) is None  # 3 is neither 4 nor 1
    assert broadcast_strides((1, 2, 4), (2, 4)) is None  # more axes than the result


# ------------------------------------------------- a bias vector's macro (issue 35)


def bias_graph(bias: tuple[int, ...]) -> str:
    return (
        f"graph main(x: float32[4, 3], w: float32[8, 3], b: {type_text(bias)}) {{\n"
        "  y = relu(add(dense(x, w), b))\n"
        "  return y\n"
        "}\n"
    )


@pytest.mark.parametrize(
    ("bias", "reason"),
    [
        (
            (4, 8),
            "input 1 (b) is float32[4, 8], but macro NPU_DENSE_BIAS_RELU reads it as a rank-1 tensor "
            "(${in2_dim0} is the last extent it reads, and it reads neither its rank nor its shape)",
        ),
        (
            (8,),
            "input 1 (b) is float32[8], broadcast to float32[4, 8], and macro NPU_DENSE_BIAS_RELU does not broadcast",
        ),
    ],
)
def test_a_bias_vector_macro_takes_no_other_bias_and_the_graph_runs(bias, reason, spec_dir, capsys, tmp_path):
    """The silent mismatch: the pattern matched a full-shape b, which the macro indexed
    as a vector. Now neither a full-shape b nor (the macro does not broadcast) a vector
    b is taken; the add goes to fused, and --explain says why."""
    program = parse(bias_graph(bias), "graph")
    specs = [load_backend(name, spec_path=[spec_dir]) for name in ("npu", "fused")]
    placed = partition(program, specs)
    composites = [
        n for c in placed.functions[0].nodes if c.callee for n in c.callee.nodes if n.callee is not None
    ]
    assert composites == []
    assert_matches_reference(program, spec_dir, ["npu", "fused"])
    path = tmp_path / "bias.graph"
    path.write_text(bias_graph(bias), encoding="utf-8")
    rc, out, _ = run_cli(
        capsys, "partition", path, "--spec-path", spec_dir, "--backend", "npu,fused", "--explain"
    )
    assert rc == 0
    assert f"npu pattern dense_bias_relu: add {ANON_PREFIX}" in out
    assert reason in out


def test_a_broadcasting_bias_macro_with_a_rank_condition_takes_the_vector_only(spec_dir):
    """The documented way: the macro declares broadcasting, the pattern says that b is a
    vector (``when: ["b.rank == 1"]``)."""
    text = NPU.replace("    inputs: 3\n", "    inputs: 3\n    broadcast: true\n").replace(
        "    macros: {2: NPU_DENSE_BIAS_RELU}",
        '    when: ["b.rank == 1"]\n    macros: {2: NPU_DENSE_BIAS_RELU}',
    )
    write_spec(spec_dir, text)
    specs = [load_backend(name, spec_path=[spec_dir]) for name in ("npu", "fused")]
    vector, full = parse(bias_graph((8,)), "graph"), parse(bias_graph((4, 8)), "graph")
    assert placement(partition(vector, specs))["y"] == "npu.dense_bias_relu"
    assert placement(partition(full, specs))["y"] == "npu"  # the relu alone
    for program in (vector, full):
        assert_matches_reference(program, spec_dir, ["npu", "fused"])
    # without the condition, the full-shape b is still refused: the macro reads it as a vector
    write_spec(spec_dir, text.replace('    when: ["b.rank == 1"]\n', ""))
    specs = [load_backend(name, spec_path=[spec_dir]) for name in ("npu", "fused")]
    assert placement(partition(full, specs))["y"] == "npu"


# --------------------------------------------------------------- ONNX Gemm's bias


@pytest.mark.parametrize("bias", [(4, 1), (1, 8), (1,), (4, 8)])
def test_an_onnx_gemm_bias_reaches_a_broadcasting_macro(bias, spec_dir):
    """ONNX Gemm with a C that is not one value per column imports as dense + add,
    a broadcasting add, which the vendor's gemm pattern takes (VENDOR_GEMM reads C's
    strides)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from byoc.onnx.model_import import import_onnx, parse_imported

    rng = np.random.default_rng(11)
    weights = [
        numpy_helper.from_array(rng.standard_normal((8, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(bias).astype(np.float32), "c"),
    ]
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)],
        "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (4, 3))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (4, 8))],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    program = parse_imported(import_onnx(model, where="gemm.onnx"))
    (fn,) = program.functions
    assert [n.op for n in fn.nodes] == ["dense", "add"]
    placed = partition(program, [load_backend("vendor", spec_path=[spec_dir])])
    (region,) = [n for n in placed.functions[0].nodes if n.callee is not None]
    (composite,) = region.callee.nodes
    assert composite.callee is not None and composite.callee.composite == "gemm"
    assert_matches_reference(program, spec_dir, ["vendor"])
