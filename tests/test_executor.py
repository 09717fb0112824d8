"""The graph executor: its API (set_input, run, get_output, __call__), storage
shared by storage_id, dispatch to whichever module provides a function, and
malformed host graphs, which are RuntimeFailures rather than crashes."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from conftest import EXAMPLES

import byoc
import byoc.runtime
from byoc.building import build
from byoc.errors import ByocError, RuntimeFailure
from byoc.ir import TensorType
from byoc.runtime.executor import GraphExecutor
from byoc.runtime.host_module import HostModule
from byoc.runtime.interface import Signature

CHAIN = """\
# Regions and host ops in a chain, so that the memory plan reuses storage.
graph main(x: float32[4, 4], y: float32[4, 4], i: int32[8]) {
  a = @BACKEND { return add(x, y) }
  b = multiply(a, a)
  c = @BACKEND { return subtract(b, y) }
  d = relu(c)
  e = @BACKEND { return multiply(d, x) }
  f = @BACKEND { return add(i, i) }
  g = negative(f)
  k = @BACKEND { return multiply(g, i) }
  return e, k
}
"""


def chain_expected(x, y, i):
    d = np.maximum((x + y) * (x + y) - y, 0)
    return d * x, -(i + i) * i


@pytest.fixture(scope="module", params=["ccompiler", "json"])
def model(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("chain") / f"chain_{request.param}.graph"
    path.write_text(CHAIN.replace("@BACKEND", f"@{request.param}"))
    return build(path)


@pytest.fixture
def inputs():
    rng = np.random.default_rng(7)
    return {
        "x": rng.uniform(-2, 2, (4, 4)).astype(np.float32),
        "y": rng.uniform(-2, 2, (4, 4)).astype(np.float32),
        "i": rng.integers(-20, 20, 8).astype(np.int32),
    }


def graph_json(model) -> dict:
    return json.loads(model.members["main.graph.json"])


def modules_of(model, catalog) -> list:
    return [HostModule(model.members["main.host.graph"].decode(), catalog), *model.modules]


def check(outputs, inputs) -> None:
    e, k = outputs
    want_e, want_k = chain_expected(inputs["x"], inputs["y"], inputs["i"])
    assert e.dtype == np.float32 and e.shape == (4, 4)
    assert k.dtype == np.int32 and k.shape == (8,)
    np.testing.assert_allclose(e, want_e, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(k, want_k)


# ------------------------------------------------------------------ the API


def test_call(model, inputs):
    ex = model.executor("main")
    assert ex.input_names == ["x", "y", "i"]
    assert ex.num_outputs == 2
    check(ex(**inputs), inputs)
    check(model(**inputs), inputs)


def test_set_input_by_name_and_index(model, inputs):
    ex = model.executor()
    ex.set_input("x", inputs["x"])
    ex.set_input(1, inputs["y"])
    ex.set_input(2, inputs["i"])
    ex.run()
    check((ex.get_output(0), ex.get_output(1)), inputs)
    assert ex.input_type("x") == ex.input_type(0) == TensorType((4, 4), "float32")
    assert ex.input_type(2) == TensorType((8,), "int32")


def test_set_input_copies_and_outputs_are_copies(model, inputs):
    ex = model.executor()
    x = inputs["x"].copy()
    ex.set_input("x", x)
    ex.set_input("y", inputs["y"])
    ex.set_input("i", inputs["i"])
    x[:] = 1000  # changing the caller's array after set_input changes nothing
    ex.run()
    first = ex.get_output(0)
    check((first, ex.get_output(1)), inputs)
    first[:] = -1  # nor does changing a returned output
    np.testing.assert_array_equal(ex.get_output(0), chain_expected(inputs["x"], inputs["y"], inputs["i"])[0])


def test_run_twice_and_new_inputs(model, inputs):
    ex = model.executor()
    for name, value in inputs.items():
        ex.set_input(name, value)
    ex.run()
    before = (ex.get_output(0), ex.get_output(1))
    ex.run()  # inputs set once stay valid: no storage of an input is reused
    np.testing.assert_array_equal(ex.get_output(0), before[0])
    np.testing.assert_array_equal(ex.get_output(1), before[1])
    other = {k: (v * 2).astype(v.dtype) for k, v in inputs.items()}
    check(ex(**other), other)
    check(ex(**inputs), inputs)


def test_read_only_and_non_contiguous_inputs(model, inputs):
    ex = model.executor()
    frozen = {k: v.copy() for k, v in inputs.items()}
    for v in frozen.values():
        v.flags.writeable = False
    check(ex(**frozen), inputs)
    strided = dict(inputs, x=np.asfortranarray(inputs["x"]))
    check(ex(**strided), inputs)


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda ex, a: ex(x=a["x"], y=a["y"]), "missing i"),
        (lambda ex, a: ex(**a, z=a["x"]), "unknown z"),
        (lambda ex, a: ex(x=a["x"], i=a["i"], q=a["y"]), "missing y; unknown q"),
        (lambda ex, a: ex.set_input("nope", a["x"]), "no input 'nope'"),
        (lambda ex, a: ex.set_input(3, a["x"]), "no input 3"),
        (lambda ex, a: ex.set_input(-1, a["x"]), "no input -1"),
        (lambda ex, a: ex.set_input("x", a["x"].astype(np.float64)), "must be float32[4, 4], got float64"),
        (lambda ex, a: ex.set_input("x", a["x"][:3]), "got float32[3, 4]"),
        (lambda ex, a: ex.set_input("i", a["i"].astype(np.int64)), "must be int32[8]"),
        (lambda ex, a: ex.get_output(2), "has 2 output(s), not 3"),
        (lambda ex, a: ex.get_output(-1), "output"),
        (lambda ex, a: ex.input_type("w"), "no input 'w'"),
    ],
)
def test_bad_calls(model, inputs, call, message):
    ex = model.executor()
    with pytest.raises(RuntimeFailure) as info:
        call(ex, inputs)
    assert message in str(info.value)
    check(ex(**inputs), inputs)  # the executor still works


def test_model_graph_selection(model, inputs):
    with pytest.raises(RuntimeFailure, match="no graph 'other'"):
        model.run("other", **inputs)
    check(model.run("main", **inputs), inputs)


# ------------------------------------------------------------------ storage


def test_storage_sharing(model, inputs):
    data = graph_json(model)
    ids = data["attrs"]["storage_id"][1]
    assert len(set(ids)) < len(ids), "the memory plan should reuse some storage"
    ex = model.executor()
    for a in range(len(ids)):
        for b in range(a + 1, len(ids)):
            shared = np.shares_memory(ex.entries[a], ex.entries[b])
            assert shared == (ids[a] == ids[b]), (a, b, ids)
    # inputs own their storage
    for k in ex.input_entries:
        assert ids.count(ids[k]) == 1
    check(ex(**inputs), inputs)


def test_entries_are_contiguous_and_aligned(model):
    ex = model.executor()
    for entry, t in zip(ex.entries, ex.types):
        assert entry.flags.c_contiguous and entry.flags.writeable
        assert entry.shape == t.shape and entry.dtype == np.dtype(t.dtype)
        assert entry.ctypes.data % entry.dtype.itemsize == 0


def test_shared_storage_of_different_types(catalog):
    """Two entries of different dtypes and sizes in one storage id: the pool is as
    large as the largest, and each call still sees its own type."""
    host = HostModule(
        "graph f(x: int32[6]) { return add(x, x) }\n"
        "graph g(y: int32[6]) { return negative(y) }\n"
        "graph h(z: int32[6]) { return multiply(z, z) }\n",
        catalog,
    )
    graph = {
        "nodes": [
            {"op": "null", "name": "x", "inputs": []},
            {"op": "tvm_op", "name": "f", "attrs": {"func_name": "f"}, "inputs": [[0, 0, 0]]},
            {"op": "tvm_op", "name": "g", "attrs": {"func_name": "g"}, "inputs": [[1, 0, 0]]},
            {"op": "tvm_op", "name": "h", "attrs": {"func_name": "h"}, "inputs": [[2, 0, 0]]},
        ],
        "arg_nodes": [0],
        "node_row_ptr": [0, 1, 2, 3, 4],
        "heads": [[3, 0, 0]],
        "attrs": {
            "shape": ["list_shape", [[6], [6], [6], [6]]],
            "dltype": ["list_str", ["int32", "int32", "int32", "int32"]],
            "storage_id": ["list_int", [0, 1, 2, 1]],
        },
    }
    ex = GraphExecutor(graph, [host])
    assert np.shares_memory(ex.entries[1], ex.entries[3])
    x = np.arange(6, dtype=np.int32) - 3
    (out,) = ex(x=x)
    np.testing.assert_array_equal(out, (-(x + x)) ** 2)


# ------------------------------------------------------------------ dispatch


class PyModule:
    """A module of Python functions, to check that any Module is dispatched to."""

    kind = "python"

    def __init__(self, functions: dict, signatures: dict[str, Signature]) -> None:
        self.functions, self.signatures = functions, signatures

    def symbols(self):
        return tuple(self.functions)

    def signature(self, symbol):
        return self.signatures[symbol]

    def get_function(self, symbol):
        return self.functions[symbol]


def _single_op_graph(func_name: str, dtype: str = "float32", shape=(3,)) -> dict:
    return {
        "nodes": [
            {"op": "null", "name": "x", "inputs": []},
            {"op": "tvm_op", "name": func_name, "attrs": {"func_name": func_name}, "inputs": [[0, 0, 0]]},
        ],
        "arg_nodes": [0],
        "node_row_ptr": [0, 1, 2],
        "heads": [[1, 0, 0]],
        "attrs": {
            "shape": ["list_shape", [list(shape), list(shape)]],
            "dltype": ["list_str", [dtype, dtype]],
            "storage_id": ["list_int", [0, 1]],
        },
    }


F3 = TensorType((3,), "float32")


def test_dispatch_to_the_first_provider():
    def double(x, out):
        np.multiply(x, 2, out=out)

    def triple(x, out):
        np.multiply(x, 3, out=out)

    sig = {"f": Signature((F3,), (F3,))}
    first, second = PyModule({"f": double}, sig), PyModule({"f": triple}, sig)
    x = np.arange(3, dtype=np.float32)
    (out,) = GraphExecutor(_single_op_graph("f"), [first, second])(x=x)
    np.testing.assert_array_equal(out, x * 2)
    (out,) = GraphExecutor(_single_op_graph("f"), [second, first])(x=x)
    np.testing.assert_array_equal(out, x * 3)


@pytest.mark.parametrize("error", [ValueError("bad value"), TypeError("bad type"), RuntimeError("boom")])
def test_a_failing_function_is_a_runtime_failure(error):
    def fail(x, out):
        raise error

    ex = GraphExecutor(_single_op_graph("f"), [PyModule({"f": fail}, {"f": Signature((F3,), (F3,))})])
    with pytest.raises(RuntimeFailure, match=f"f failed: {error}"):
        ex(x=np.zeros(3, np.float32))


# ------------------------------------------------------------------ malformed host graphs


def _edit(path: str, value):
    """An edit that sets ``data[path...]`` (a '/'-separated path) to ``value``."""

    def edit(data):
        *parents, last = path.split("/")
        target = data
        for key in parents:
            target = target[int(key) if isinstance(target, list) else key]
        target[int(last) if isinstance(target, list) else last] = value

    return edit


def _delete(path: str):
    def edit(data):
        *parents, last = path.split("/")
        target = data
        for key in parents:
            target = target[int(key) if isinstance(target, list) else key]
        del target[int(last) if isinstance(target, list) else last]

    return edit


def _append_input(nid: int, ref):
    def edit(data):
        data["nodes"][nid]["inputs"].append(ref)

    return edit


def _host_output(data, dtype):
    """Change the dtype of the first host function's output."""
    nid = next(
        k for k, n in enumerate(data["nodes"]) if n.get("attrs", {}).get("func_name", "").startswith("host_")
    )
    data["attrs"]["dltype"][1][data["node_row_ptr"][nid]] = dtype


# node 3 is the first tvm_op (a = @backend { add(x, y) }), node 4 the host multiply
MALFORMED = [
    ("forward reference", _edit("nodes/3/inputs/0", [4, 0, 0]), "comes later"),
    ("self reference", _edit("nodes/3/inputs/0", [3, 0, 0]), "comes later"),
    ("no such node", _edit("nodes/3/inputs/0", [99, 0, 0]), "refers to no entry"),
    ("no such output", _edit("nodes/3/inputs/0", [0, 1, 0]), "refers to no entry"),
    ("negative node", _edit("nodes/3/inputs/0", [-1, 0, 0]), "refers to no entry"),
    ("short reference", _edit("nodes/3/inputs/0", [0]), "malformed host graph"),
    ("text reference", _edit("nodes/3/inputs/0", ["x", 0, 0]), "malformed host graph"),
    ("unknown func_name", _edit("nodes/3/attrs/func_name", "nowhere_0"), "no loaded module provides"),
    ("no func_name", _delete("nodes/3/attrs/func_name"), "malformed host graph"),
    ("one input too many", _append_input(3, [1, 0, 0]), "but the function takes"),
    ("one input too few", _delete("nodes/3/inputs/1"), "but the function takes"),
    ("input shape", _edit("attrs/shape/1/0", [4, 5]), "but the function takes"),
    ("output shape", _edit("attrs/shape/1/3", [16]), "but the function takes"),
    ("input dtype", _edit("attrs/dltype/1/1", "float64"), "but the function takes"),
    ("host function dtype", lambda data: _host_output(data, "int32"), "but the function takes"),
    ("unknown dtype", _edit("attrs/dltype/1/0", "complex64"), "invalid type"),
    ("negative extent", _edit("attrs/shape/1/0", [-4, 4]), "invalid type"),
    ("text extent", _edit("attrs/shape/1/0", ["four", 4]), "malformed host graph"),
    ("huge storage", _edit("attrs/shape/1/0", [2**40, 2**20]), "cannot allocate"),
    # 1 TiB: refused, or (with memory overcommit) allocated and then a type mismatch
    ("storage beyond memory", _edit("attrs/shape/1/0", [2**18, 2**20]), "main: "),
    ("storage too large", _edit("attrs/shape/1/0", [2**62, 2**62]), "main: "),
    ("untyped attrs", _edit("attrs/shape", [[4, 4]]), "attrs must hold"),
    ("lengths disagree", _edit("node_row_ptr", [0, 1, 2]), "disagree in length"),
    ("short storage ids", _edit("attrs/storage_id/1", [0, 1]), "disagree in length"),
    ("unknown op", _edit("nodes/3/op", "conv2d"), "unknown op 'conv2d'"),
    ("input not an arg node", _edit("arg_nodes", [0, 1]), "not listed in arg_nodes"),
    ("no heads", _delete("heads"), "malformed host graph"),
    ("head out of range", _edit("heads/0", [99, 0, 0]), "refers to no entry"),
    ("node not an object", _edit("nodes/3", "tvm_op"), "malformed host graph"),
    ("nodes not a list", _edit("nodes", {"op": "null"}), "main: "),
    ("no nodes", _delete("nodes"), "malformed host graph"),
    ("no attrs", _delete("attrs"), "malformed host graph"),
]


@pytest.mark.parametrize("edit,message", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_host_graph(model, catalog, edit, message):
    data = graph_json(model)
    assert data["nodes"][3]["op"] == "tvm_op" and data["nodes"][3]["inputs"][:2] == [[0, 0, 0], [1, 0, 0]]
    edit(data)
    modules = modules_of(model, catalog)
    for graph in (data, json.dumps(data)):
        with pytest.raises(RuntimeFailure) as info:
            GraphExecutor(copy.deepcopy(graph) if isinstance(graph, dict) else graph, modules, name="main")
        assert message in str(info.value), str(info.value)


@pytest.mark.parametrize(
    "text,message",
    [
        ("{", "not valid JSON"),
        ("", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('"nodes"', "must be a JSON object"),
        ("{}", "malformed host graph"),
        (b"\xff\xfe{}", "not valid JSON"),
        ("[" * 100_000, "not valid JSON"),  # nested too deeply for the JSON parser
    ],
)
def test_host_graph_not_json(model, catalog, text, message):
    with pytest.raises(RuntimeFailure, match=message):
        GraphExecutor(text, modules_of(model, catalog), name="main")


def test_well_formed_copy_still_builds(model, catalog, inputs):
    """The edits above start from a graph that the executor accepts."""
    ex = GraphExecutor(json.dumps(graph_json(model)), modules_of(model, catalog), name="main")
    check(ex(**inputs), inputs)


def test_runtime_failure_is_a_byoc_error():
    assert issubclass(RuntimeFailure, ByocError)


def test_a_model_says_its_inputs_and_outputs_as_its_calls_take_and_give_them(tmp_path):
    """Model.inputs / Model.outputs: the names, shapes and dtypes a call takes and returns
    (as ONNX Runtime's get_inputs() and get_outputs()), also after a bundle round trip."""
    program = byoc.parse_file(EXAMPLES / "mlp.graph")
    (fn,) = program.functions
    model = byoc.build(program, backends=["fused"])
    assert [(i.name, i.shape, i.dtype) for i in model.inputs] == [
        (p.name, p.type.shape, p.type.dtype) for p in fn.params
    ]
    inputs = {i.name: np.zeros(i.shape, i.dtype) for i in model.inputs}
    results = model(**inputs)
    assert [(o.name, o.shape, o.dtype) for o in model.outputs] == [
        (f"output_{k}", r.shape, str(r.dtype)) for k, r in enumerate(results)
    ]
    model.save(tmp_path / "mlp.byoc")
    loaded = byoc.runtime.load(tmp_path / "mlp.byoc")
    assert loaded.inputs == model.inputs and loaded.outputs == model.outputs
