"""The JSON runtime module's load validation: every kind of malformed document
(structure, nodes, inputs, attrs, kernels, constants, heads), undecodable attrs,
invalid or truncated JSON text, int constants out of range and a backend of another
kind raise RuntimeFailure naming the function and node, never another
exception."""

from __future__ import annotations

import copy
import json

import pytest
from conftest import DATA
from runtime_json_support import CONCAT_GRAPH, gen_program, json_module_text

from byoc.api import parse
from byoc.errors import RuntimeFailure
from byoc.runtime.json_module import JsonRuntimeModule

# ------------------------------------------------------------------ load validation


def constants_document() -> dict:
    text, _ = json_module_text(gen_program("constants"))
    return json.loads(text)


def edit(path: str, value):
    """A document edit: set the value at a '/'-separated path (None deletes it)."""

    def apply(doc: dict) -> dict:
        *parents, last = path.split("/")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        key = int(last) if isinstance(node, list) else last
        if value is None:
            del node[key]
        else:
            node[key] = value
        return doc

    return apply


FN = "functions/json_0"
NODES = f"{FN}/graph/nodes"
INVALID = {
    "not an object": (lambda doc: [doc], "a JSON module is an object"),
    "format": (edit("format", "tvm"), "not a JSON-runtime module"),
    "version 2": (edit("version", 2), "version 2 is not supported"),
    "version true": (edit("version", True), "version True is not supported"),
    "no functions": (edit("functions", None), "key 'functions' is missing"),
    "no const_values": (edit("const_values", None), "key 'const_values' is missing"),
    "symbol": (edit(f"{FN}/symbol", "other"), "function 'json_0': its symbol is 'other'"),
    "no graph": (edit(f"{FN}/graph", None), "function 'json_0': key 'graph' is missing"),
    "node op": (edit(f"{NODES}/2/op", "conv"), "function 'json_0', node 2: unknown node op 'conv'"),
    "node name": (edit(f"{NODES}/0/name", None), "node 0: key 'name' is missing"),
    "node attrs": (edit(f"{NODES}/1/attrs", None), "node 1: key 'attrs' is missing"),
    "shape attr": (edit(f"{NODES}/0/attrs/shape", [[2, 3]]), "node 0: attrs need"),
    "dtype attr": (edit(f"{NODES}/0/attrs/dtype", [["complex64"]]), "node 0: unknown dtype 'complex64'"),
    "forward input": (edit(f"{NODES}/2/inputs", [[0, 0, 0], [3, 0, 0]]), "node 2: input 1 refers to node 3"),
    "self input": (edit(f"{NODES}/3/inputs/0", [3, 0, 0]), "node 3: input 0 refers to node 3"),
    "negative id": (edit(f"{NODES}/2/inputs/0", [-1, 0, 0]), "node 2: input 0 refers to node -1"),
    "bad index": (
        edit(f"{NODES}/2/inputs/0", [0, 1, 0]),
        "node 2: input 0 refers to output 1 of node 0, which has 1",
    ),
    "bad entry": (edit(f"{NODES}/2/inputs/0", [0, 0]), r"node 2: input 0 must be \[nid, index, version\]"),
    "unknown kernel": (edit(f"{NODES}/3/name", "conv2d"), "node 3: unknown kernel 'conv2d'"),
    "num_inputs": (edit(f"{NODES}/2/attrs/num_inputs", "3"), "node 2: num_inputs is '3'"),
    "arity": (
        lambda doc: edit(f"{NODES}/2/attrs/num_inputs", None)(edit(f"{NODES}/2/inputs", [[0, 0, 0]])(doc)),
        "node 2: kernel add: add takes 2 inputs, got 1",
    ),
    "declared shape": (
        edit(f"{NODES}/3/attrs/shape", [[[3, 2]]]),
        r"node 3: kernel multiply computes float32\[2, 3\]",
    ),
    "row ptr": (edit(f"{FN}/graph/node_row_ptr", [0, 1, 2, 3, 5]), "node_row_ptr must be"),
    "arg nodes": (edit(f"{FN}/graph/arg_nodes", [0]), "arg_nodes must list the input and const nodes"),
    "arg nodes type": (edit(f"{FN}/graph/arg_nodes", [0, "1"]), "arg_nodes must list"),
    "const names": (edit(f"{FN}/const_names", ["k"]), "const_names"),
    "const value missing": (
        edit("const_values/json_0_const_0", None),
        "node 1: const 'json_0_const_0' has no entry",
    ),
    "const value shape": (edit("const_values/json_0_const_0/shape", [3, 2]), "node 1: const_values"),
    "const value data": (edit("const_values/json_0_const_0/data", [1.0]), "needs 6 data values"),
    "const value text": (edit("const_values/json_0_const_0/data/2", "2"), "not a float32 number"),
    "head": (
        edit(f"{FN}/graph/heads", [[9, 0, 0]]),
        "'json_0': head 0 refers to node 9, which is not defined in",
    ),
    "head index": (edit(f"{FN}/graph/heads/0", [3, 1, 0]), "'json_0': head 0 refers to output 1 of node 3"),
    "two outputs": (edit(f"{NODES}/0/attrs/shape", [[[2, 3], [2, 3]]]), "node 0: attrs need"),
    "kernel outputs": (
        lambda doc: edit(f"{NODES}/3/attrs/dtype", [["float32", "float32"]])(
            edit(f"{NODES}/3/attrs/shape", [[[2, 3], [2, 3]]])(doc)
        ),
        "node 3: num_outputs is '1', but the node has 2",
    ),
    "kernel of one output": (
        lambda doc: edit(f"{NODES}/3/attrs/num_outputs", "2")(
            edit(f"{NODES}/3/attrs/dtype", [["float32", "float32"]])(
                edit(f"{NODES}/3/attrs/shape", [[[2, 3], [2, 3]]])(doc)
            )
        ),
        "node 3: kernel multiply: multiply gives 1 output, but the node has 2",
    ),
    "no heads": (edit(f"{FN}/graph/heads", None), "key 'heads' is missing"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_documents_raise(case):
    change, message = INVALID[case]
    with pytest.raises(RuntimeFailure, match=message) as info:
        JsonRuntimeModule(change(constants_document()), file="bad.json")
    assert str(info.value).startswith("bad.json: ")


def test_attr_decoding_errors():
    text, _ = json_module_text(parse(CONCAT_GRAPH, "graph"))
    doc = json.loads(text)
    nodes = doc["functions"]["json_0"]["graph"]["nodes"]
    nid = next(i for i, n in enumerate(nodes) if n.get("name") == "concatenate")
    for bad, message in [
        ([["one"]], "invalid literal"),
        ([["0", "1"]], "needs one value"),
        ([[0]], r"must be \[\[strings\]\]"),
        ("0", r"must be \[\[strings\]\]"),
        ([["7"]], "axis = 7 is out of range"),
    ]:
        broken = copy.deepcopy(doc)
        broken["functions"]["json_0"]["graph"]["nodes"][nid]["attrs"]["axis"] = bad
        with pytest.raises(RuntimeFailure, match=f"node {nid}: kernel concatenate: .*{message}"):
            JsonRuntimeModule(broken)


def test_invalid_json_text_has_a_location():
    with pytest.raises(RuntimeFailure, match="not valid JSON") as info:
        JsonRuntimeModule.from_text('{\n  "format": ,\n}', file="m.json")
    loc = info.value.location
    assert loc is not None and (loc.file, loc.line) == ("m.json", 2)
    assert "^" in info.value.render()
    with pytest.raises(RuntimeFailure, match="not UTF-8"):
        JsonRuntimeModule.from_text(b"\xff{}")
    with pytest.raises(RuntimeFailure, match="cannot read"):
        JsonRuntimeModule.from_file(DATA / "absent.json")


def test_truncated_text_never_loads():
    text = json.dumps(constants_document())
    for cut in range(0, len(text), 11):
        with pytest.raises(RuntimeFailure):
            JsonRuntimeModule.from_text(text[:cut])


def test_int_constants_out_of_range():
    text, _ = json_module_text(
        parse(
            "graph main(x: int32[2]) {\n s = @json {\n  k = const int32[2] [1, 2]\n  return add(x, k)\n }\n return s\n}",
            "graph",
        )
    )
    doc = json.loads(text)
    doc["const_values"]["json_0_const_0"]["data"][1] = 2**31
    with pytest.raises(RuntimeFailure, match="node 1: const_values.* not a int32 number"):
        JsonRuntimeModule(doc)
    doc["const_values"]["json_0_const_0"]["data"][1] = 1.0
    with pytest.raises(RuntimeFailure, match="not a int32 number"):
        JsonRuntimeModule(doc)


def test_wrong_backend_kind():
    doc = constants_document()
    doc["backend"] = "examplejson"
    with pytest.raises(RuntimeFailure, match="is a examplejson backend, not a json one"):
        JsonRuntimeModule(doc)
