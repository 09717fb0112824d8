"""The json codegen: every external function as a graph in TVM's JSON-runtime schema,
one module document per backend. Goldens for every shared graph, both example
ExampleJSON files and both example networks; the schema is checked structurally, and
a small numpy interpreter of the JSON (written here, independent of the generator)
must agree with the reference."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import DATA, EXAMPLES, GUIDE_SUBGRAPH, TVM_EXTERNAL_RUNTIME, random_array

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.catalog import evaluate_op
from byoc.errors import GraphError
from byoc.generator import generator_for
from byoc.generator.lowering import lower, offload_whole
from byoc.ir import TensorType
from byoc.spec import KINDS

BACKEND = "json"
GEN = DATA / "gen"
GRAPHS = sorted(p.stem for p in GEN.glob("*.graph"))
SEEDS = {"guide_subgraph": GUIDE_SUBGRAPH, "tvm_external_runtime": TVM_EXTERNAL_RUNTIME}


def gen_program(name: str):
    text = (GEN / f"{name}.graph").read_text().replace("@BACKEND", f"@{BACKEND}")
    return parse(text, "graph", file=f"{name}.graph")


def seed_program(name: str):
    path = SEEDS[name]
    return offload_whole(parse(path.read_bytes(), "examplejson", file=path.name), BACKEND)


def generate(externals, **options) -> str:
    spec = load_backend(BACKEND)
    (artifact,) = generator_for(spec.kind)(externals, spec, load_catalog(), spec.option_values(options))
    assert (artifact.name, artifact.role, artifact.backend) == ("json.json", "module", BACKEND)
    return artifact.text


def module_for(program, **options):
    externals = lower(program, load_backend, load_catalog()).externals
    return generate(externals, **options), externals


def check_schema(document: dict) -> None:
    """TVM's JSON-runtime graph rules, for every function of a module document."""
    assert document["format"] == "byoc-json-runtime" and document["version"] == 1
    for symbol, entry in document["functions"].items():
        assert entry["symbol"] == symbol
        assert set(entry) == {"symbol", "source", "const_names", "graph"}
        graph = entry["graph"]
        assert list(graph) == ["nodes", "arg_nodes", "heads", "node_row_ptr"]
        nodes, row_ptr = graph["nodes"], graph["node_row_ptr"]
        assert row_ptr[0] == 0 and len(row_ptr) == len(nodes) + 1
        for nid, node in enumerate(nodes):
            attrs = node["attrs"]
            n_out = len(attrs["shape"][0])
            assert len(attrs["shape"]) == 1 and len(attrs["dtype"]) == 1 and len(attrs["dtype"][0]) == n_out
            assert row_ptr[nid + 1] - row_ptr[nid] == n_out
            assert node["op"] in ("input", "const", "kernel")
            if node["op"] == "kernel":
                assert attrs["num_inputs"] == str(len(node["inputs"]))
                assert attrs["num_outputs"] == str(n_out)
                for src, index, version in node["inputs"]:
                    assert src < nid and index < row_ptr[src + 1] - row_ptr[src] and version == 0
                for key, value in attrs.items():
                    if key not in ("shape", "dtype", "num_inputs", "num_outputs"):
                        assert isinstance(value, list) and len(value) == 1
                        assert all(isinstance(s, str) for s in value[0]), key
            else:
                assert "inputs" not in node
        args = graph["arg_nodes"]
        ops = [nodes[a]["op"] for a in args]
        assert ops == ["input"] * ops.count("input") + ["const"] * ops.count("const"), "inputs, then consts"
        assert {nid for nid, n in enumerate(nodes) if n["op"] != "kernel"} == set(args)
        consts = [nodes[a]["name"] for a in args if nodes[a]["op"] == "const"]
        assert entry["const_names"] == consts
        for name in consts:
            value = document["const_values"][name]
            assert len(value["data"]) == int(np.prod(value["shape"]))
        for nid, index, version in graph["heads"]:
            assert index < row_ptr[nid + 1] - row_ptr[nid] and version == 0


def interpret(document: dict, symbol: str, args: list[np.ndarray]) -> list[np.ndarray]:
    """Run one function of a module document with numpy, as a JSON runtime would."""
    catalog = load_catalog()
    kernels = {b.name: op for op, b in load_backend(BACKEND).ops.items()}
    entry = document["functions"][symbol]
    graph = entry["graph"]
    row_ptr = graph["node_row_ptr"]
    data: dict[int, np.ndarray] = {}
    inputs = iter(args)
    for nid, node in enumerate(graph["nodes"]):
        attrs = node["attrs"]
        if node["op"] == "input":
            data[row_ptr[nid]] = next(inputs)
        elif node["op"] == "const":
            value = document["const_values"][node["name"]]
            data[row_ptr[nid]] = np.array(value["data"], dtype=value["dtype"]).reshape(value["shape"])
        else:
            op = catalog[kernels[node["name"]]]
            xs = [data[row_ptr[src] + index] for src, index, _ in node["inputs"]]
            op_attrs = tuple((a.name, _decode(a.type, attrs[a.name][0])) for a in op.attrs)
            out = TensorType(tuple(attrs["shape"][0][0]), attrs["dtype"][0][0])
            data[row_ptr[nid]] = evaluate_op(op, xs, op_attrs, out)
    return [data[row_ptr[nid] + index] for nid, index, _ in graph["heads"]]


def _decode(kind: str, strings: list[str]):
    """An op attribute from the strings TVM's attribute extractor writes."""
    if kind == "ints":
        return tuple(int(v) for v in strings)
    (text,) = strings
    if kind == "bool":
        return {"1": True, "0": False}[text]
    return {"int": int, "float": float, "str": str}[kind](text)


def check_numerics(text: str, externals, rng) -> None:
    document = json.loads(text)
    check_schema(document)
    assert list(document["functions"]) == [fn.name for fn in externals]
    for fn in externals:
        args = [random_array(rng, p.type.shape, p.type.dtype) for p in fn.params]
        want = evaluate(fn, {p.name: a for p, a in zip(fn.params, args)})
        got = interpret(document, fn.name, args)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name", GRAPHS)
def test_gen_graph(name, golden, rng):
    text, externals = module_for(gen_program(name))
    assert text == golden("json")
    check_numerics(text, externals, rng)


@pytest.mark.parametrize("name", ["resnet_basic_block", "mlp"])
def test_example_network(name, golden, rng):
    """The shipped networks, every op offloaded: conv, batch_norm, dense and softmax
    nodes carry their attributes as strings, and the interpreter above reads them back."""
    path = EXAMPLES / f"{name}.graph"
    text, externals = module_for(offload_whole(parse(path.read_text(), "graph", file=path.name), BACKEND))
    assert text == golden("json")
    check_numerics(text, externals, rng)
    kernels = [
        n for n in json.loads(text)["functions"][externals[0].name]["graph"]["nodes"] if n["op"] == "kernel"
    ]
    assert len(kernels) == len(externals[0].nodes)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_examplejson_seed(name, golden, rng):
    text, externals = module_for(seed_program(name))
    assert text == golden("json")
    check_numerics(text, externals, rng)
    assert list(json.loads(text)["functions"]) == (
        ["subgraph_0"] if name == "guide_subgraph" else ["json_rt_0", "json_rt_1"]
    )


def test_guide_subgraph_nodes():
    text, _ = module_for(gen_program("guide_subgraph"))
    graph = json.loads(text)["functions"]["json_0"]["graph"]
    nodes = graph["nodes"]
    assert [(n["op"], n["name"]) for n in nodes] == [
        ("input", "x"),
        ("input", "w0"),
        ("input", "w1"),
        ("input", "w2"),
        ("kernel", "add"),
        ("kernel", "subtract"),
        ("kernel", "multiply"),
    ]
    assert nodes[0]["attrs"] == {"dtype": [["float32"]], "shape": [[[10, 10]]]}
    assert [n["inputs"] for n in nodes[4:]] == [
        [[0, 0, 0], [1, 0, 0]],
        [[4, 0, 0], [2, 0, 0]],
        [[5, 0, 0], [3, 0, 0]],
    ]
    assert nodes[6]["attrs"]["num_inputs"] == "2" and nodes[6]["attrs"]["num_outputs"] == "1"
    assert nodes[4]["attrs"]["source"] == [["guide_subgraph.graph:4"]]
    assert graph["arg_nodes"] == [0, 1, 2, 3]
    assert graph["heads"] == [[6, 0, 0]]
    assert graph["node_row_ptr"] == list(range(8))


def test_constants_are_named_listed_and_stored_once():
    document = json.loads(module_for(gen_program("constants"))[0])
    entry = document["functions"]["json_0"]
    assert entry["const_names"] == ["json_0_const_0"]
    const = entry["graph"]["nodes"][1]
    assert const["op"] == "const" and const["name"] == "json_0_const_0" and "inputs" not in const
    assert document["const_values"] == {
        "json_0_const_0": {"dtype": "float32", "shape": [2, 3], "data": [0.5, -1.0, 2.0, 3.25, 4.0, -5.5]}
    }
    assert entry["graph"]["arg_nodes"] == [0, 1]


def test_kernel_names_and_attributes_come_from_the_spec(rng):
    text = """graph main(x: int64[2, 3], y: int64[2, 1]) {
  a, b = @json as edge {
    c = concatenate(x, y, axis=1)
    return relu(c), x
  }
  return a, b
}
"""
    module, externals = module_for(parse(text, "graph", file="attrs.graph"))
    nodes = json.loads(module)["functions"]["edge"]["graph"]["nodes"]
    assert nodes[2]["name"] == "concatenate" and nodes[2]["attrs"]["axis"] == [["1"]]
    assert nodes[2]["attrs"]["shape"] == [[[2, 4]]] and nodes[2]["attrs"]["dtype"] == [["int64"]]
    assert nodes[3]["name"] == "nn.relu"
    assert json.loads(module)["functions"]["edge"]["graph"]["heads"] == [[3, 0, 0], [0, 0, 0]]
    check_numerics(module, externals, rng)


def test_indent_option_0_writes_one_line_per_node():
    program = gen_program("dag")
    flat, _ = module_for(program, indent="0")
    pretty, _ = module_for(program)
    assert json.loads(flat) == json.loads(pretty)
    node_lines = [line for line in flat.splitlines() if line.startswith('{"op": ')]
    assert len(node_lines) == 6
    assert not any(line.startswith(" ") for line in flat.splitlines())


def test_op_without_kernel_is_a_located_error():
    program = gen_program("dag")
    externals = lower(program, load_backend, load_catalog()).externals
    spec = load_backend("examplejson")  # an examplejson spec has tokens, no kernels
    with pytest.raises(GraphError, match="no kernel for op") as info:
        generator_for(KINDS["json"])(externals, spec, load_catalog(), {})
    assert info.value.location is not None and info.value.location.line == 4


def test_deterministic_across_processes():
    code = (
        "from pathlib import Path; import sys; sys.path.insert(0, 'tests');"
        "from test_gen_json import gen_program, module_for;"
        "sys.stdout.write(module_for(gen_program('whole_graph'))[0])"
    )
    root = GEN.parent.parent.parent
    other = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert (
        other.stdout == module_for(gen_program("whole_graph"))[0] == module_for(gen_program("whole_graph"))[0]
    )
