"""The JSON runtime module: TVM's JSONRuntimeBase interpreted with numpy. Every shared
test graph (offloaded to @json) and random graphs of every dtype and rank 1-4 match
the reference evaluator exactly; constants are bound once by the init step; bad
calls and malformed documents raise RuntimeFailure naming the function and node;
and neither runtime module imports the code generator."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from math import prod

import numpy as np
import pytest
from conftest import DATA, EXAMPLES, random_array
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.errors import RuntimeFailure
from byoc.generator import generator_for
from byoc.generator.lowering import lower, offload_whole
from byoc.runtime import json_module
from byoc.runtime.interface import call
from byoc.runtime.json_module import JsonRuntimeModule
from byoc.spec import SHIPPED_BACKENDS

GEN = DATA / "gen"
GRAPHS = sorted(p.stem for p in GEN.glob("*.graph"))
GOLDEN = DATA.parent / "golden" / "test_gen_json"


def json_module_text(program, backend: str = "json", spec_path=None):
    """The json codegen's module text for ``program``, and its external functions."""
    catalog = load_catalog()
    externals = lower(program, lambda name: load_backend(name, spec_path), catalog).externals
    spec = load_backend(backend, spec_path)
    (artifact,) = generator_for(spec.kind)(externals, spec, catalog, spec.option_values({}))
    return artifact.text, externals


def gen_program(name: str):
    text = (GEN / f"{name}.graph").read_text().replace("@BACKEND", "@json")
    return parse(text, "graph", file=f"{name}.graph")


def check_against_reference(module: JsonRuntimeModule, externals, rng) -> None:
    assert module.symbols() == tuple(fn.name for fn in externals)
    for fn in externals:
        args = [random_array(rng, p.type.shape, p.type.dtype) for p in fn.params]
        want = evaluate(fn, {p.name: a for p, a in zip(fn.params, args)})
        got = call(module, fn.name, *args)
        assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


# ---------------------------------------------------------------------- every graph


@pytest.mark.parametrize("name", GRAPHS)
def test_gen_graph_matches_reference(name, rng):
    text, externals = json_module_text(gen_program(name))
    module = JsonRuntimeModule.from_text(text, file="json.json")
    assert module.kind == "json" and module.backend == "json"
    check_against_reference(module, externals, rng)


@pytest.mark.parametrize("name", GRAPHS)
def test_golden_files_load_and_run(name, rng):
    """The module documents as checked in, read from disk."""
    module = JsonRuntimeModule.from_file(GOLDEN / f"test_gen_graph[{name}].json")
    _, externals = json_module_text(gen_program(name))
    check_against_reference(module, externals, rng)


@pytest.mark.parametrize("name", ["guide_subgraph", "tvm_external_runtime"])
def test_examplejson_seeds_as_json(name, rng):
    program = offload_whole(parse((EXAMPLES / f"{name}.examplejson").read_bytes(), "examplejson"), "json")
    text, _ = json_module_text(program)
    module = JsonRuntimeModule.from_text(text)
    for symbol in module.symbols():
        x, w0, w1, w2 = (random_array(rng, (10, 10), "float32") for _ in range(4))
        out = np.empty((10, 10), dtype="float32")
        assert module.get_function(symbol)(x, w0, w1, w2, out) is None
        np.testing.assert_array_equal(out, ((x + w0) - w1) * w2)


def test_save_round_trip(rng):
    text, externals = json_module_text(gen_program("constants"))
    module = JsonRuntimeModule.from_text(text)
    assert module.save() == text.encode()
    check_against_reference(JsonRuntimeModule.from_text(module.save()), externals, rng)
    from_document = JsonRuntimeModule(json.loads(text))
    check_against_reference(JsonRuntimeModule.from_text(from_document.save()), externals, rng)


# ---------------------------------------------------------------- kernels and attrs

CONCAT_GRAPH = """
graph main(a: float32[2, 3], b: float32[2, 3], i: int32[4], j: int32[4]) {
  c, d, e = @json {
    k = const float32[2, 1] [1.5, -2]
    return concatenate(relu(a), negative(b), axis=1), concatenate(a, k, b, axis=-1), relu(maximum(i, j))
  }
  return c, d, e
}
"""


def test_concatenate_axis_and_dotted_kernels(rng):
    text, externals = json_module_text(parse(CONCAT_GRAPH, "graph"))
    assert '"nn.relu"' in text and '"axis": [["1"]]' in text
    module = JsonRuntimeModule.from_text(text)
    a, b = random_array(rng, (2, 3), "float32"), random_array(rng, (2, 3), "float32")
    i, j = random_array(rng, (4,), "int32"), random_array(rng, (4,), "int32")
    c, d, e = call(module, "json_0", a, b, i, j)
    np.testing.assert_array_equal(c, np.concatenate([np.maximum(a, 0), -b], axis=1))
    k = np.array([[1.5], [-2]], dtype="float32")
    np.testing.assert_array_equal(d, np.concatenate([a, k, b], axis=-1))
    np.testing.assert_array_equal(e, np.maximum(np.maximum(i, j), 0))
    assert e.dtype == np.int32
    check_against_reference(module, externals, rng)


def test_custom_backend_kernel_names(tmp_path, rng):
    """A json-kind backend with its own name and kernel names, from a spec dir."""
    spec = (SHIPPED_BACKENDS / "json.yaml").read_text()
    spec = spec.replace("name: json ", "name: myjson ").replace("symbol_prefix: json", "symbol_prefix: mj")
    spec = spec.replace("{kernel: add}", "{kernel: my.add}").replace("{kernel: multiply}", "{kernel: my.mul}")
    (tmp_path / "myjson.yaml").write_text(spec)
    program = parse(
        "graph main(x: float64[3], y: float64[3]) {\n s = @myjson { return multiply(add(x, y), y) }\n return s\n}",
        "graph",
        spec_path=tmp_path,
    )
    text, externals = json_module_text(program, "myjson", tmp_path)
    assert '"my.add"' in text and '"backend": "myjson"' in text
    check_against_reference(JsonRuntimeModule.from_text(text, spec_path=tmp_path), externals, rng)
    module = JsonRuntimeModule.from_text(text, kernels={"my.add": "add", "my.mul": "multiply"})
    check_against_reference(module, externals, rng)
    with pytest.raises(RuntimeFailure, match="cannot read the kernels of backend 'myjson'"):
        JsonRuntimeModule.from_text(text)
    with pytest.raises(RuntimeFailure, match=r"function 'mj_0', node 2: unknown kernel 'my.add'"):
        JsonRuntimeModule.from_text(text, kernels={"add": "add"})


# ------------------------------------------------------------------- random graphs

DTYPES = ("float32", "float64", "int32", "int64")
UNARY = ("negative", "relu", "copy")
BINARY = ("add", "subtract", "multiply", "maximum", "minimum")


@st.composite
def json_graphs(draw) -> str:
    """A graph whose one @json region is a random DAG: unary, binary and concatenate
    ops (any axis), constants, one to three outputs, over one dtype and rank 1-4."""
    dtype = draw(st.sampled_from(DTYPES))
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
    values = [(f"p{k}", shape) for k in range(draw(st.integers(1, 3)))]
    binary = BINARY + (("divide",) if dtype.startswith("float") else ())
    lines = []
    for k in range(draw(st.integers(1, 8))):
        a, s = draw(st.sampled_from(values))
        same = [v for v, t in values if t == s]
        kind = draw(st.sampled_from(("unary", "binary", "binary", "concat", "const")))
        if kind == "unary":
            expr = f"{draw(st.sampled_from(UNARY))}({a})"
        elif kind == "binary":
            expr = f"{draw(st.sampled_from(binary))}({a}, {draw(st.sampled_from(same))})"
        elif kind == "concat" and prod(s) <= 64:
            parts = [a] + draw(st.lists(st.sampled_from(same), max_size=2))
            axis = draw(st.integers(-rank, rank - 1))
            expr = f"concatenate({', '.join(parts)}, axis={axis})"
            s = tuple(d * len(parts) if i == axis % rank else d for i, d in enumerate(s))
        else:
            data = ", ".join(str(draw(st.integers(-9, 9))) for _ in range(prod(s)))
            expr = f"const {dtype}[{', '.join(map(str, s))}] [{data}]"
        lines.append(f"    t{k} = {expr}")
        values.append((f"t{k}", s))
    computed = [v for v, _ in values if v.startswith("t")]
    outputs = draw(st.lists(st.sampled_from(computed), min_size=1, max_size=3, unique=True))
    names = [f"r{k}" for k in range(len(outputs))]
    params = ", ".join(
        f"p{k}: {dtype}[{', '.join(map(str, shape))}]" for k in range(len(values) - len(lines))
    )
    body = "\n".join(lines)
    return (
        f"graph main({params}) {{\n  {', '.join(names)} = @json {{\n{body}\n"
        f"    return {', '.join(outputs)}\n  }}\n  return {', '.join(names)}\n}}\n"
    )


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:divide by zero:RuntimeWarning")
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=json_graphs(), seed=st.integers(0, 2**32 - 1))
def test_random_graphs_match_reference(text, seed):
    program = parse(text, "graph")
    module_text, externals = json_module_text(program)
    check_against_reference(JsonRuntimeModule.from_text(module_text), externals, np.random.default_rng(seed))


# ------------------------------------------------------------------ const binding


@pytest.fixture
def const_module():
    text, _ = json_module_text(gen_program("constants"))
    return JsonRuntimeModule.from_text(text)


@pytest.fixture
def const_count(monkeypatch):
    """How many const arrays the module has built from its const_values."""
    counter = {"n": 0}
    build = json_module.const_array

    def counting(value):
        counter["n"] += 1
        return build(value)

    monkeypatch.setattr(json_module, "const_array", counting)
    return counter


K = np.array([0.5, -1, 2, 3.25, 4, -5.5], dtype="float32").reshape(2, 3)


def test_consts_bound_once_on_first_call(const_module, const_count, rng):
    assert const_module.const_names == {"json_0": ("json_0_const_0",)}
    assert not const_module.initialized("json_0") and const_count["n"] == 0
    f = const_module.get_function("json_0")
    assert const_count["n"] == 0, "loading and looking up bind nothing"
    for _ in range(5):
        x = random_array(rng, (2, 3), "float32")
        out = np.empty((2, 3), dtype="float32")
        f(x, out)
        np.testing.assert_array_equal(out, (x + K) * K)
    assert const_module.initialized("json_0") and const_count["n"] == 1
    assert const_module.init("json_0") is False and const_count["n"] == 1


def test_explicit_init_step(const_module, const_count, rng):
    init = const_module.get_function("__init_json_0")
    assert "__init_json_0" not in const_module.symbols()
    assert init() is True and const_count["n"] == 1
    assert init() is False and const_module.init("json_0") is False
    x = random_array(rng, (2, 3), "float32")
    (out,) = call(const_module, "json_0", x)
    np.testing.assert_array_equal(out, (x + K) * K)
    assert const_count["n"] == 1


def test_init_with_given_consts(const_module, const_count, rng):
    k = random_array(rng, (2, 3), "float32")
    assert const_module.init("json_0", [k]) is True
    x = random_array(rng, (2, 3), "float32")
    np.testing.assert_array_equal(call(const_module, "json_0", x)[0], (x + k) * k)
    assert const_count["n"] == 0
    with pytest.raises(RuntimeFailure, match="already bound"):
        const_module.init("json_0", [k])


@pytest.mark.parametrize(
    "consts, message",
    [
        ([], "expected 1 constants, got 0"),
        ([K, K], "expected 1 constants, got 2"),
        ([K.astype("float64")], r"constant 'json_0_const_0' is float64\[2, 3\]"),
        ([K[:1]], r"is float32\[1, 3\], expected float32\[2, 3\]"),
        (["k"], "must be an array"),
    ],
)
def test_init_rejects_bad_consts(const_module, consts, message):
    with pytest.raises(RuntimeFailure, match=message):
        const_module.get_function("__init_json_0")(*consts) if consts else const_module.init("json_0", consts)
    assert not const_module.initialized("json_0")


def test_bound_consts_are_read_only(const_module):
    const_module.init("json_0")
    (k,) = const_module._consts["json_0"]
    assert not k.flags.writeable


# ------------------------------------------------------------------------ bad calls


@pytest.fixture
def dag_module():
    text, _ = json_module_text(gen_program("multi_output"))
    return JsonRuntimeModule.from_text(text)


def test_unknown_symbol(dag_module):
    for name in ("json_1", "__init_json_1"):
        with pytest.raises(RuntimeFailure, match=f"no function {'json_1'!r}") as info:
            dag_module.get_function(name)
        assert info.value.hint == "known: json_0"


@pytest.mark.parametrize(
    "case",
    ["count", "too many", "dtype", "shape", "non-contiguous output", "read-only output", "not an array"],
)
def test_bad_calls_raise(dag_module, rng, case):
    x, y = random_array(rng, (3, 4), "float32"), random_array(rng, (3, 4), "float32")
    p, q = np.zeros((3, 4), dtype="float32"), np.zeros((3, 4), dtype="float32")
    frozen = np.zeros((3, 4), dtype="float32")
    frozen.flags.writeable = False
    args, message = {
        "count": ((x, y, p), "json_0: expected 4 arguments, got 3"),
        "too many": ((x, y, p, q, q), "expected 4 arguments, got 5"),
        "dtype": (
            (x, y.astype("int64"), p, q),
            r"argument 1 \(input 'y'\) is int64\[3, 4\], expected float32\[3, 4\]",
        ),
        "shape": ((x, y, p, q.reshape(4, 3)), r"argument 3 \(output 1\) is float32\[4, 3\]"),
        "non-contiguous output": ((x, y, np.zeros((4, 3), dtype="float32").T, q), "not C-contiguous"),
        "read-only output": ((x, y, frozen, q), r"argument 2 \(output 0\) is read-only"),
        "not an array": ((x, 1.0, p, q), "must be an array"),
    }[case]
    with pytest.raises(RuntimeFailure, match=message) as info:
        dag_module.get_function("json_0")(*args)
    if case == "count":
        assert "x, y" in info.value.hint
    assert not p.any() and not q.any(), "nothing is written by a rejected call"


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
    "dtype attr": (edit(f"{NODES}/0/attrs/dtype", [["float16"]]), "node 0: unknown dtype 'float16'"),
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
        "node 3: a kernel node has one output, this one declares 2",
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
        ([["7"]], "axis 7 is out of range"),
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


# ------------------------------------------------------------------------ layering


def test_runtime_modules_do_not_import_the_generator():
    code = (
        "import byoc.runtime.json_module, byoc.runtime.examplejson_module, sys\n"
        "loaded = [m for m in sys.modules if m.startswith('byoc.generator')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
