"""The host graph: graph-executor JSON (``<fn>.graph.json``) plus the host functions it
calls (``<fn>.host.graph``). Goldens, the structure of the guide's whole graph, and a
small graph executor written here that runs the JSON on numpy with the planned
storage (buffers really are shared) and must agree with the reference evaluator."""

from __future__ import annotations

import json
from math import prod

import numpy as np
import pytest
from conftest import DATA, GUIDE_SUBGRAPH, TVM_EXTERNAL_RUNTIME, random_array
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.catalog import infer_type
from byoc.generator import host_graph
from byoc.generator.lowering import lower, offload_whole
from byoc.ir import TensorType

GEN = DATA / "gen"

# Host ops before, between and after two regions; a host constant used by a host op,
# by a region and as a result; a region with two outputs; a chain whose buffers the
# memory plan can share.
MIXED = """\
graph main(x: float32[4, 4], y: float32[4, 4]) {
  k = const float32[4, 4] 0.5
  a = add(x, y)
  b = multiply(a, k)
  s = @json {
    return subtract(b, k)
  }
  c = relu(add(s, a))
  t, u = @json {
    return multiply(c, x), add(c, y)
  }
  d = subtract(t, u)
  e = negative(d)
  f = maximum(e, c)
  g = minimum(negative(f), f)
  return g, k
}
"""
# A split on the host whose parts go to a region, to another host op and to the
# result (one part unused), and a split inside a region whose parts are used inside
# it and returned.
SPLIT = """\
graph main(x: float32[4, 6], y: float32[4, 2]) {
  a, b, c, d = split(relu(x), axis=1, sizes=[2, 2, 1, 1])
  s, p = @json {
    q, r = split(add(a, y), axis=0)
    return concatenate(r, q, axis=0), q
  }
  return multiply(b, s), c, p
}
"""
HOST_GRAPHS = {
    "whole_graph": lambda: gen_program("whole_graph"),
    "multi_output": lambda: gen_program("multi_output"),
    "dag": lambda: gen_program("dag"),
    "constants": lambda: gen_program("constants"),
    "mixed": lambda: parse(MIXED, "graph", file="mixed.graph"),
    "split": lambda: parse(SPLIT, "graph", file="split.graph"),
}


def gen_program(name: str, backend: str = "json"):
    text = (GEN / f"{name}.graph").read_text().replace("@BACKEND", f"@{backend}")
    return parse(text, "graph", file=f"{name}.graph")


def build(program):
    lowered = lower(program, load_backend, load_catalog())
    artifacts = {a.name: a for a in host_graph.generate(lowered.hosts, load_catalog())}
    return lowered, artifacts


def execute(graph: dict, host_text: str | None, externals: dict, inputs: dict) -> list[np.ndarray]:
    """Run a graph-executor JSON: every entry lives in its planned storage buffer, so a
    wrong plan (a buffer overwritten while still needed) changes the results."""
    hosts = {fn.name: fn for fn in parse(host_text, "graph").functions} if host_text else {}
    attrs = graph["attrs"]
    assert [attrs[k][0] for k in ("shape", "dltype", "storage_id")] == ["list_shape", "list_str", "list_int"]
    shapes, dtypes, sids = attrs["shape"][1], attrs["dltype"][1], attrs["storage_id"][1]
    row = graph["node_row_ptr"]
    assert len(shapes) == len(dtypes) == len(sids) == row[-1]
    pool: dict[int, np.ndarray] = {}
    for eid, sid in enumerate(sids):
        if sid in pool:
            assert (pool[sid].dtype, pool[sid].size) == (np.dtype(dtypes[eid]), prod(shapes[eid]))
        pool[sid] = np.full(prod(shapes[eid]), 77, dtype=dtypes[eid])
    written: set[int] = set()

    def view(eid: int) -> np.ndarray:
        assert eid in written, f"entry {eid} is read before it is written"
        return pool[sids[eid]].reshape(shapes[eid])

    def write(eid: int, value: np.ndarray) -> None:
        assert value.shape == tuple(shapes[eid]) and value.dtype == np.dtype(dtypes[eid])
        pool[sids[eid]].reshape(shapes[eid])[...] = value
        written.add(eid)

    for nid, node in enumerate(graph["nodes"]):
        if node["op"] == "null":
            assert nid in graph["arg_nodes"] and node["inputs"] == []
            write(row[nid], inputs[node["name"]])
            continue
        a = node["attrs"]
        assert node["op"] == "tvm_op" and a["flatten_data"] == "0" and a["func_name"] == node["name"]
        assert a["num_inputs"] == str(len(node["inputs"])) and a["num_outputs"] == str(
            row[nid + 1] - row[nid]
        )
        fn = hosts.get(a["func_name"]) or externals[a["func_name"]]
        args = [view(row[src] + index) for src, index, version in node["inputs"]]
        results = evaluate(fn, {p.name: v for p, v in zip(fn.params, args)})
        assert len(results) == row[nid + 1] - row[nid]
        for index, value in enumerate(results):
            write(row[nid] + index, value)
    return [view(row[nid] + index).copy() for nid, index, _ in graph["heads"]]


def check_runs(program, rng) -> dict:
    """Every host function of ``program`` run through its host graph equals the reference."""
    lowered, artifacts = build(program)
    externals = {fn.name: fn for fn in lowered.externals}
    graphs = {}
    for original, host in zip(program.functions, lowered.hosts):
        graph = json.loads(artifacts[f"{host.name}.graph.json"].text)
        functions = artifacts.get(f"{host.name}.host.graph")
        assert graph["metadata"]["host_functions"] == (functions.name if functions else None)
        inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in original.params}
        want = evaluate(original, inputs)
        got = execute(graph, functions.text if functions else None, externals, inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        graphs[host.name] = graph
    return graphs


@pytest.mark.parametrize("name", sorted(HOST_GRAPHS))
def test_host_graph(name, golden, rng):
    _, artifacts = build(HOST_GRAPHS[name]())
    assert artifacts["main.graph.json"].role == "host_graph"
    assert artifacts["main.graph.json"].text == golden("json")
    check_runs(HOST_GRAPHS[name](), rng)


@pytest.mark.parametrize("name", ["whole_graph", "mixed", "split"])
def test_host_functions(name, golden):
    _, artifacts = build(HOST_GRAPHS[name]())
    functions = artifacts["main.host.graph"]
    assert functions.role == "host_functions"
    assert functions.text == golden("graph")


def test_guide_whole_graph_structure():
    """The guide's get_whole_graph_json, from the DSL, with ccompiler regions."""
    _, artifacts = build(gen_program("whole_graph", "ccompiler"))
    graph = json.loads(artifacts["main.graph.json"].text)
    nodes = graph["nodes"]
    assert [n["name"] for n in nodes[:9]] == ["x"] + [f"w{k}" for k in range(8)]
    assert all(n["op"] == "null" and n["inputs"] == [] for n in nodes[:9])
    assert graph["arg_nodes"] == list(range(9))
    ops = nodes[9:]
    assert [n["op"] for n in ops] == ["tvm_op"] * 3
    assert [n["attrs"]["func_name"] for n in ops] == [
        "ccompiler_0",
        "ccompiler_1",
        "host_0_add_subtract_concatenate",
    ]
    assert ops[0]["inputs"] == [[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]]
    assert ops[1]["inputs"] == [[0, 0, 0], [4, 0, 0], [5, 0, 0], [6, 0, 0]]
    assert sorted(ops[2]["inputs"]) == [[0, 0, 0], [7, 0, 0], [8, 0, 0], [9, 0, 0], [10, 0, 0]]
    for n in ops:
        assert n["attrs"]["num_outputs"] == "1" and n["attrs"]["flatten_data"] == "0"
        assert n["attrs"]["num_inputs"] == str(len(n["inputs"]))
        assert n["attrs"]["source"].startswith("whole_graph.graph:")
    assert ops[0]["attrs"]["num_inputs"] == "4" and ops[2]["attrs"]["num_inputs"] == "5"
    assert graph["heads"] == [[11, 0, 0]]
    assert graph["node_row_ptr"] == list(range(13))
    assert graph["attrs"]["shape"] == ["list_shape", [[10, 10]] * 11 + [[30, 10]]]
    assert graph["attrs"]["dltype"] == ["list_str", ["float32"] * 12]
    assert graph["attrs"]["storage_id"] == ["list_int", list(range(12))]
    assert list(graph) == ["nodes", "arg_nodes", "node_row_ptr", "heads", "attrs", "metadata"]
    host = parse(artifacts["main.host.graph"].text, "graph").functions
    assert [fn.name for fn in host] == ["host_0_add_subtract_concatenate"]
    assert [n.op for n in host[0].nodes] == ["add", "subtract", "concatenate"]


def test_mixed_graph_fuses_by_stage_and_shares_buffers(rng):
    graph = check_runs(HOST_GRAPHS["mixed"](), rng)["main"]
    names = [n["name"] for n in graph["nodes"] if n["op"] == "tvm_op"]
    assert names == [
        "host_0_const",
        "host_1_add_multiply",
        "json_0",
        "host_2_add_relu",
        "json_1",
        "host_3_subtract_negative_maximum_minimum",
    ]
    sids = graph["attrs"]["storage_id"][1]
    assert len(set(sids)) < len(sids), "some intermediate buffer is reused"
    heads = {graph["node_row_ptr"][nid] + index for nid, index, _ in graph["heads"]}
    inputs = set(graph["arg_nodes"])
    for eid, sid in enumerate(sids):
        if eid in heads or eid in inputs:
            assert sids.count(sid) == 1, "inputs and outputs keep their own buffers"


@pytest.mark.parametrize("seed", [GUIDE_SUBGRAPH, TVM_EXTERNAL_RUNTIME])
def test_examplejson_seeds_call_their_subgraphs(seed, rng):
    program = offload_whole(parse(seed.read_bytes(), "examplejson", file=seed.name), "examplejson")
    graphs = check_runs(program, rng)
    _, artifacts = build(program)
    assert not any(a.role == "host_functions" for a in artifacts.values())
    for name, graph in graphs.items():
        (op,) = [n for n in graph["nodes"] if n["op"] == "tvm_op"]
        assert op["attrs"]["func_name"] == name
        assert graph["metadata"] == {
            "function": name,
            "source": f"{seed.name}:{op['attrs']['source'].split(':')[1]}",
            "host_functions": None,
        }


def test_host_function_names_avoid_symbols_and_are_unique_per_program(rng):
    text = """graph first(x: float32[3]) {
  s = @json as host_0_add {
    return negative(x)
  }
  return add(s, x)
}
graph second(x: float32[3]) {
  return add(x, x)
}
"""
    program = parse(text, "graph", file="names.graph")
    _, artifacts = build(program)
    assert sorted(artifacts) == [
        "first.graph.json",
        "first.host.graph",
        "second.graph.json",
        "second.host.graph",
    ]
    assert "graph host_0_add_1(" in artifacts["first.host.graph"].text
    assert "graph host_1_add(" in artifacts["second.host.graph"].text
    check_runs(program, rng)


def test_unused_host_ops_are_dropped_and_outputs_may_be_inputs(rng):
    text = """graph main(x: float32[2], y: float32[2]) {
  unused = multiply(x, y)
  s = @json {
    return add(x, y)
  }
  return x, s, s
}
"""
    graph = check_runs(parse(text, "graph", file="io.graph"), rng)["main"]
    assert [n["name"] for n in graph["nodes"]] == ["x", "y", "json_0"]
    assert graph["heads"] == [[0, 0, 0], [2, 0, 0], [2, 0, 0]]


def test_host_ops_on_both_sides_of_a_call_are_not_fused(rng):
    """Fusing a and b would make a cycle: {a, b} -> json_0 -> {a, b}."""
    text = """graph main(x: float32[3], y: float32[3]) {
  a = add(x, y)
  s = @json {
    return negative(a)
  }
  b = multiply(a, s)
  return b
}
"""
    graph = check_runs(parse(text, "graph", file="cycle.graph"), rng)["main"]
    assert [n["name"] for n in graph["nodes"][2:]] == ["host_0_add", "json_0", "host_1_multiply"]


def test_deterministic():
    assert build(HOST_GRAPHS["mixed"]())[1] == build(HOST_GRAPHS["mixed"]())[1]


# Random programs: host ops, regions (some with two outputs) and constants, wired at
# random; whatever the fusion and the memory plan do, the results must not change.
def _float_ops(inputs: int) -> tuple[str, ...]:
    """Attribute-free float32 elementwise ops of ``inputs`` inputs that json maps and
    that give a float32 result (not a comparison's bool): host and regions both run the
    catalog's references, so fusing and buffer sharing must leave whatever they compute
    (NaN included) unchanged."""
    json_ops = load_backend("json").ops
    operand = TensorType((2, 3), "float32")
    return tuple(
        name
        for name, op in load_catalog().items()
        if op.rule.elementwise
        and not op.attrs
        and op.min_inputs == op.max_inputs == inputs
        and "float32" in op.dtypes
        and name in json_ops
        and infer_type(op, [operand] * inputs, ()).dtype == "float32"
    )


BINARY = _float_ops(2)
UNARY = _float_ops(1)


@st.composite
def programs(draw):
    names = ["p0", "p1"]
    lines = ["graph main(p0: float32[2, 3], p1: float32[2, 3]) {"]

    def expr() -> str:
        if draw(st.booleans()):
            return f"{draw(st.sampled_from(UNARY))}({draw(st.sampled_from(names))})"
        a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        return f"{draw(st.sampled_from(BINARY))}({a}, {b})"

    for k in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(("host", "host", "region", "region2", "const")))
        if kind == "const":
            lines.append(
                f"  v{k} = const float32[2, 3] {draw(st.sampled_from(['0.5', '-2', '[1, 2, 3, 4, 5, 6]']))}"
            )
            names.append(f"v{k}")
        elif kind == "host":
            lines.append(f"  v{k} = {expr()}")
            names.append(f"v{k}")
        elif kind == "region":
            lines.append(f"  v{k} = @json {{\n    return {expr()}\n  }}")
            names.append(f"v{k}")
        else:
            lines.append(f"  v{k}, w{k} = @json {{\n    return {expr()}, {expr()}\n  }}")
            names += [f"v{k}", f"w{k}"]
    outputs = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3))
    lines.append(f"  return {', '.join(outputs)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN and inf of log, sqrt, power, ...
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(programs())
def test_random_programs_run_the_same(rng, text):
    program = parse(text, "graph", file="random.graph")
    graph = check_runs(program, rng)["main"]
    host_ops = [n for n in program.functions[0].nodes if n.op != "call"]
    host_functions = [
        n for n in graph["nodes"] if n["name"].startswith("host_") and not n["name"].endswith("_const")
    ]
    assert len(host_functions) <= len(host_ops)
