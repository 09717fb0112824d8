"""The examplejson codegen: one ExampleJSON text module per backend, in the guide's exact
layout, that parses back to the same computation. What ExampleJSON cannot express
fails with a located GraphError."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DATA, GUIDE_SUBGRAPH, TVM_EXTERNAL_RUNTIME, random_array

import byoc
from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.catalog import RuleError, infer_type
from byoc.errors import ByocError, GraphError
from byoc.generator import generator_for
from byoc.generator.lowering import lower, offload_whole
from byoc.ir import TensorType

BACKEND = "examplejson"
GEN = DATA / "gen"
EXPRESSIBLE = ("guide_subgraph", "whole_graph", "nd", "dag")
"""Float32, single-output, constant-free graphs: the ones ExampleJSON can say."""
INEXPRESSIBLE = {
    "constants": ("no constants", 4),
    "multi_output": ("one result per subgraph", 3),
    "float64": ("float32", 4),
}
"""Graph -> (what the error says, the line it points at)."""


def gen_program(name: str, backend: str = BACKEND):
    text = (GEN / f"{name}.graph").read_text().replace("@BACKEND", f"@{backend}")
    return parse(text, "graph", file=f"{name}.graph")


def generate(externals, **options):
    spec = load_backend(BACKEND)
    values = spec.option_values(options)
    (artifact,) = generator_for(spec.kind)(externals, spec, load_catalog(), values)
    assert artifact.name == "examplejson.examplejson"
    assert artifact.role == "module" and artifact.backend == BACKEND
    return artifact.text


def module_for(program, **options) -> tuple[str, tuple]:
    externals = lower(program, load_backend, load_catalog()).externals
    return generate(externals, **options), externals


def check_roundtrip(text: str, externals, rng, **options) -> None:
    """The module parses back (with the spec's tokens) to functions that compute what
    the externals compute, and prints back to the same text."""
    parsed = parse(text, "examplejson", file="module.examplejson")
    assert [fn.name for fn in parsed.functions] == [fn.name for fn in externals]
    for fn, original in zip(parsed.functions, externals):
        assert [p.type for p in fn.params] == [p.type for p in original.params]
        args = [random_array(rng, p.type.shape, p.type.dtype) for p in original.params]
        got = evaluate(fn, {p.name: a for p, a in zip(fn.params, args)})
        want = evaluate(original, {p.name: a for p, a in zip(original.params, args)})
        np.testing.assert_array_equal(got[0], want[0])
    assert generate(parsed.functions, **options) == text


@pytest.mark.parametrize("name", EXPRESSIBLE)
def test_gen_graph(name, golden, rng):
    text, externals = module_for(gen_program(name))
    assert text == golden("examplejson")
    check_roundtrip(text, externals, rng)


def test_guide_subgraph_reproduces_the_guide_text(golden, rng):
    program = parse(GUIDE_SUBGRAPH.read_bytes(), "examplejson", file="guide_subgraph.examplejson")
    text, externals = module_for(offload_whole(program, BACKEND))
    assert text == GUIDE_SUBGRAPH.read_text()
    assert text == golden("examplejson")
    check_roundtrip(text, externals, rng)


def test_tvm_external_runtime_reproduces_tvm_text_with_indent_0(golden, rng):
    source = TVM_EXTERNAL_RUNTIME.read_text()
    program = parse(source, "examplejson", file="tvm_external_runtime.examplejson")
    text, externals = module_for(offload_whole(program, BACKEND), indent="0")
    assert text == source.replace("\n\n", "\n") + "\n"
    assert text == golden("examplejson")
    check_roundtrip(text, externals, rng, indent="0")


def test_indent_option():
    text, _ = module_for(gen_program("guide_subgraph"), indent="4")
    lines = text.splitlines()
    assert lines[0] == "subgraph_0"
    assert lines[1] == "    input 0 10 10"
    assert lines[-1] == "    mul 6 inputs: 5 3 shape: 10 10"


def test_symbols_are_the_subgraph_headers():
    text, externals = module_for(gen_program("whole_graph"))
    headers = [line for line in text.splitlines() if not line.startswith(" ")]
    assert headers == ["subgraph_0", "subgraph_1"] == [fn.name for fn in externals]


@pytest.mark.parametrize("name", sorted(INEXPRESSIBLE))
def test_inexpressible_graphs_fail_with_a_location(name):
    """Through the pipeline (lowering checks dtypes first) and straight into the
    generator with externals lowered for another backend."""
    words, line = INEXPRESSIBLE[name]
    with pytest.raises(GraphError) as info:
        module_for(gen_program(name))
    assert info.value.location is not None
    assert info.value.location.file == f"{name}.graph"
    externals = lower(gen_program(name, "json"), load_backend, load_catalog()).externals
    with pytest.raises(GraphError, match=words) as info:
        generate(externals)
    assert info.value.location is not None
    assert (info.value.location.file, info.value.location.line) == (f"{name}.graph", line)
    assert "error" in info.value.render()


@pytest.mark.parametrize(
    ("body", "words", "line"),
    [
        ("return softmax(x, axis=1)", "no ExampleJSON token for op softmax", 3),
        ("return concatenate(x, y, axis=1)", "no ExampleJSON token for op concatenate", 3),
        ("a = add(x, y)\n    return x", "its result x is an input", 2),
    ],
)
def test_inexpressible_ops_fail_with_a_location(body, words, line):
    text = f"graph main(x: float32[2, 2], y: float32[2, 2]) {{\n  s = @json {{\n    {body}\n  }}\n  return s\n}}\n"
    externals = lower(parse(text, "graph", file="ops.graph"), load_backend, load_catalog()).externals
    with pytest.raises(GraphError, match=words) as info:
        generate(externals)
    assert info.value.location is not None and info.value.location.line == line
    assert info.value.hint is None or "add" in info.value.hint


def test_unused_ops_are_dropped_and_the_result_comes_last(rng):
    text = """graph main(x: float32[3], y: float32[3]) {
  s = @examplejson {
    r = subtract(add(x, y), y)
    dead = multiply(r, x)
    return r
  }
  return s
}
"""
    module, externals = module_for(parse(text, "graph", file="dead.graph"))
    assert (
        module
        == "subgraph_0\n  input 0 3\n  input 1 3\n  add 2 inputs: 0 1 shape: 3\n  sub 3 inputs: 2 1 shape: 3\n"
    )
    check_roundtrip(module, externals, rng)


def test_several_functions_make_one_module():
    text, externals = module_for(gen_program("nd"))
    assert len(externals) == 3
    assert [line for line in text.splitlines() if not line.startswith(" ")] == [
        "subgraph_0",
        "subgraph_1",
        "subgraph_2",
    ]
    assert "input 0 2 1 3 2" in text


def test_deterministic():
    program = gen_program("dag")
    assert module_for(program)[0] == module_for(gen_program("dag"))[0]


def test_errors_are_byoc_errors_not_crashes():
    with pytest.raises(ByocError):
        generate(lower(gen_program("constants", "json"), load_backend, load_catalog()).externals)


def _float32_only(op) -> bool:
    """Whether an op computes float32 from float32 operands alone (an elementwise one is
    checked by its shape rule; the others keep their inputs' dtype)."""
    if not op.rule.elementwise:
        return True
    try:
        return infer_type(op, [TensorType((2,), "float32")] * op.min_inputs, ()).dtype == "float32"
    except RuleError:
        return False


def test_offers_every_attribute_free_op():
    """A line of ExampleJSON has no place for attributes or a second output, and the
    format has no dtype (every value is float32): every other op of the catalog that
    takes float32 operands and gives a float32 result is offered (not the comparisons'
    bool results, nor where's bool condition)."""
    wanted = {
        op.name
        for op in load_catalog().values()
        if not op.attrs and op.max_outputs == 1 and "float32" in op.dtypes and _float32_only(op)
    }
    assert set(load_backend("examplejson").ops) == wanted


def test_network_ops_run_through_the_interpreter(tmp_path, rng):
    """dense, a broadcast bias, tanh and matmul in one ExampleJSON subgraph, run by the
    examplejson module against the reference."""
    source = tmp_path / "mlp.examplejson"
    source.write_text(
        "subgraph_0\n"
        "  input 0 4 8\n"
        "  input 1 3 8\n"
        "  input 2 3\n"
        "  input 3 3 5\n"
        "  dense 4 inputs: 0 1 shape: 4 3\n"
        "  add 5 inputs: 4 2 shape: 4 3\n"
        "  tanh 6 inputs: 5 shape: 4 3\n"
        "  matmul 7 inputs: 6 3 shape: 4 5\n"
    )
    model = byoc.build(str(source), backends=["examplejson"])
    args = [random_array(rng, shape, "float32") for shape in ((4, 8), (3, 8), (3,), (3, 5))]
    fn = parse(source.read_bytes(), "examplejson", file=source.name).functions[0]
    named = {p.name: a for p, a in zip(fn.params, args)}
    (got,) = model(**named)
    (want,) = evaluate(fn, named)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
