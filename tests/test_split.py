"""split, the catalog's op of several outputs, through every layer: the DSL binds one
name per part, the reference evaluator, partitioning (a split inside a json or fused region
whose parts are used inside and outside it; on the host for ccompiler and engine), the JSON codegen (one kernel node of several outputs, golden) and its runtime,
bundles, ``byoc dot`` and ``byoc run``. The op against numpy.split on random shapes is
tests/test_catalog_ops.py's (tests/catalog_cases_layout.py, ``split_case``); the host graph's
golden is tests/test_gen_host_graph.py's ``split``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import random_array, run_cli
from e2e_support import assert_run_ok

import byoc
import byoc.runtime
from byoc.api import load_backend, load_catalog, parse, print_program
from byoc.building import build
from byoc.errors import GraphError, RuntimeFailure
from byoc.generator import generator_for
from byoc.generator.dot import dot_program
from byoc.generator.lowering import lower
from byoc.generator.partition import partition
from byoc.ir import Function, Node, Param, Program, TensorType
from byoc.runtime.json_module import JsonRuntimeModule
from byoc.validate import validate_program

CATALOG = load_catalog()

# Parts used inside the region (b, c), returned from it (a) and unused (d).
GRAPH = """\
graph main(x: float32[4, 8], y: float32[4, 3]) {
  h = relu(x)
  a, b, c, d = split(h, axis=1, sizes=[2, 3, 2, 1])
  e = add(b, y)
  return multiply(e, concatenate(c, d, axis=1)), a
}
"""


def inputs(rng) -> dict[str, np.ndarray]:
    return {"x": random_array(rng, (4, 8), "float32"), "y": random_array(rng, (4, 3), "float32")}


def expected(values: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """GRAPH computed with numpy.split, independently of byoc."""
    a, b, c, d = np.split(np.maximum(values["x"], 0), [2, 5, 7], axis=1)
    return (b + values["y"]) * np.concatenate([c, d], axis=1), a


def check(outputs, values) -> None:
    assert len(outputs) == 2
    for got, want in zip(outputs, expected(values)):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- the DSL


def test_a_split_binds_one_name_per_part_and_round_trips(rng):
    program = parse(GRAPH, "graph", file="split.graph")
    (node,) = [n for n in program.functions[0].nodes if n.op == "split"]
    assert node.outputs == ("a", "b", "c", "d")
    assert [t.shape for t in node.types] == [(4, 2), (4, 3), (4, 2), (4, 1)]
    assert node.attrs == (("axis", 1), ("sizes", (2, 3, 2, 1)))
    text = print_program(program, "graph")
    assert "  a, b, c, d = split(h, axis=1, sizes=[2, 3, 2, 1])\n" in text
    assert parse(text, "graph") == program
    values = inputs(rng)
    check(byoc.evaluate(program.functions[0], values), values)


def test_equal_parts_come_from_the_number_of_names(rng):
    fn = parse("graph g(x: int32[7, 2]) { p, q, r = split(x) return r, q, p }", "graph").functions[0]
    assert [t.shape for t in fn.output_types] == [(1, 2), (3, 2), (3, 2)]
    x = random_array(rng, (7, 2), "int32")
    got = byoc.evaluate(fn, {"x": x})
    for g, w in zip(got, reversed(np.split(x, [3, 6]))):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("return relu(split(x))", "split has several outputs, so it cannot be used inside an expression"),
        ("a, b = split(x, sizes=[1, 1, 2])\n  return a", r"sizes \[1, 1, 2\] give 3 parts, but there are 2"),
        ("a, b, c, d, e = split(x)\n  return a", "5 outputs cannot split size 4 into non-empty parts"),
        ("a, b = relu(x)\n  return a", "relu gives 1 output, but the node has 2"),
        ("a, b = const float32[4] 0\n  return a", "only a region or an op of several outputs"),
    ],
)
def test_located_errors(statement, message):
    with pytest.raises(GraphError, match=message) as info:
        parse(f"graph g(x: float32[4]) {{\n  {statement}\n}}\n", "graph", file="bad.graph")
    assert info.value.location.line == 2 and info.value.hint


def test_validate_checks_the_output_count():
    t = TensorType((4,), "float32")
    half = TensorType((2,), "float32")
    attrs = (("axis", 0), ("sizes", ()))
    good = Node(("a", "b"), "split", ("x",), (half, half), attrs)
    fn = Function("g", (Param("x", t),), (), (good,), ("a", "b"))
    validate_program(Program((fn,)), CATALOG)
    wrong = Node(("a", "b"), "split", ("x",), (half,), attrs)
    with pytest.raises(GraphError, match="declared types"):
        validate_program(Program((Function("g", (Param("x", t),), (), (wrong,), ("a",)),)), CATALOG)


# ---------------------------------------------------------------- partitioning


def test_a_split_joins_a_json_or_fused_region_and_stays_on_the_host_for_the_others():
    program = parse(GRAPH, "graph", file="split.graph")
    for backend in ("json", "fused"):
        (region,) = partition(program, [load_backend(backend)]).functions[0].nodes
        assert region.callee is not None and region.callee.backend == backend
        assert "split" in [n.op for n in region.callee.nodes]
        assert region.outputs == ("a", "multiply_0")  # a part returned from the region
    for backend in ("ccompiler", "engine"):
        assert "split" not in load_backend(backend).ops
        fn = partition(program, [load_backend(backend)]).functions[0]
        assert "split" in [n.op for n in fn.nodes], backend  # on the host


# ------------------------------------------------------------------ JSON codegen


def _json_module(program: Program) -> str:
    spec = load_backend("json")
    externals = lower(program, load_backend, CATALOG).externals
    (artifact,) = generator_for(spec.kind)(externals, spec, CATALOG, spec.option_values({}))
    return artifact.text


def test_json_split_is_one_kernel_node_of_several_outputs(golden, rng):
    program = partition(parse(GRAPH, "graph", file="split.graph"), [load_backend("json")])
    text = _json_module(program)
    assert text == golden("json")
    graph = json.loads(text)["functions"]["json_0"]["graph"]
    nodes = graph["nodes"]
    split = nodes[3]
    assert (split["op"], split["name"]) == ("kernel", "split")
    assert split["attrs"]["num_outputs"] == "4"
    assert split["attrs"]["sizes"] == [["2", "3", "2", "1"]]
    assert split["attrs"]["shape"] == [[[4, 2], [4, 3], [4, 2], [4, 1]]]
    assert graph["node_row_ptr"][3:5] == [3, 7]  # four entries
    add, concat = nodes[4], nodes[5]
    assert add["inputs"] == [[3, 1, 0], [1, 0, 0]] and concat["inputs"] == [[3, 2, 0], [3, 3, 0]]
    assert [3, 0, 0] in graph["heads"]
    module = JsonRuntimeModule.from_text(text, catalog=CATALOG)
    values = inputs(rng)
    a, result = np.empty((4, 2), np.float32), np.empty((4, 3), np.float32)
    module.get_function("json_0")(values["x"], values["y"], a, result)
    check([result, a], values)


def test_the_json_runtime_checks_a_split_node(rng):
    program = partition(parse(GRAPH, "graph", file="split.graph"), [load_backend("json")])
    document = json.loads(_json_module(program))
    split = document["functions"]["json_0"]["graph"]["nodes"][3]
    split["attrs"]["sizes"] = [["2", "3", "3"]]
    with pytest.raises(
        RuntimeFailure, match=r"node 3: kernel split: sizes \[2, 3, 3\] give 3 parts, but there are 4 outputs"
    ):
        JsonRuntimeModule.from_text(json.dumps(document), catalog=CATALOG)
    split["attrs"]["sizes"] = [["2", "3", "2", "1"]]
    split["attrs"]["shape"][0][1] = [4, 2]
    with pytest.raises(RuntimeFailure, match=r"kernel split computes .*float32\[4, 3\]"):
        JsonRuntimeModule.from_text(json.dumps(document), catalog=CATALOG)


# ------------------------------------------------------------ run, bundle, dot


@pytest.mark.parametrize("backend", ["json", "ccompiler"])
def test_byoc_run(backend, capsys, tmp_path):
    path = tmp_path / "split.graph"
    path.write_text(GRAPH)
    rc, out, err = run_cli(capsys, "run", path, "--backend", backend, "--seed", "5")
    assert_run_ok(rc, out, err, n_rows=2)


@pytest.mark.parametrize("backends", [("json",), ("ccompiler",)])
def test_a_bundle_runs_as_the_build(backends, rng, tmp_path):
    model = build(parse(GRAPH, "graph", file="split.graph"), backends=backends)
    values = inputs(rng)
    check(model(**values), values)
    model.save(tmp_path / "split.byoc")
    check(byoc.runtime.load(tmp_path / "split.byoc")(**values), values)


def test_dot_labels_every_part():
    program = partition(parse(GRAPH, "graph", file="split.graph"), [load_backend("json")])
    text = dot_program(program)
    assert 'label="a, b, c, d = split\\naxis=1, sizes=(2, 3, 2, 1)"' in text


def test_a_split_into_more_parts_than_elements_is_refused_at_once():
    """num_outputs beyond the axis' size leaves a part empty: refused without listing
    a billion parts first."""
    import time

    from byoc import shape_layout

    started = time.perf_counter()
    with pytest.raises(ValueError, match="cannot split size 8 into non-empty parts"):
        shape_layout.split_sizes((8, 3), axis=0, num_outputs=10**9)
    with pytest.raises(ValueError, match="cannot split size 8 into non-empty parts"):
        shape_layout.split_sizes((8, 3), axis=0, num_outputs=9)
    assert shape_layout.split_sizes((8, 3), axis=0, num_outputs=3) == (3, 3, 2)
    assert time.perf_counter() - started < 1.0
