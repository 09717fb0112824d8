"""The JSON runtime module: TVM's JSONRuntimeBase interpreted with numpy. Every shared
test graph (offloaded to @json), the golden module documents, the example ExampleJSON files
and random graphs of every dtype and rank 1-4 match the reference evaluator exactly;
saving round-trips the text; custom kernel names and attrs work; and neither runtime
module imports the code generator. Constant binding and bad calls are in
test_runtime_json_consts.py, malformed documents in test_runtime_json_invalid.py."""

from __future__ import annotations

import json
import subprocess
import sys
from math import prod

import numpy as np
import pytest
from conftest import DATA, EXAMPLES, random_array
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_json_support import CONCAT_GRAPH, GEN, gen_program, json_module_text

import byoc
from byoc.api import evaluate, parse
from byoc.catalog import infer_type
from byoc.errors import RuntimeFailure
from byoc.generator.lowering import offload_whole
from byoc.ir import TensorType
from byoc.runtime.interface import call
from byoc.runtime.json_module import JsonRuntimeModule
from byoc.spec import SHIPPED_BACKENDS

GRAPHS = sorted(p.stem for p in GEN.glob("*.graph"))
GOLDEN = DATA.parent / "golden" / "test_gen_json"


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
CATALOG = byoc.load_catalog()


def elementwise_ops(inputs: int, dtype: str) -> tuple[str, ...]:
    """The attribute-free elementwise ops of ``inputs`` inputs at ``dtype`` that the json
    backend maps and whose result is of ``dtype`` too (not a comparison's bool): the
    interpreter runs them by the catalog's references, so whatever they compute (NaN
    included), it must equal the evaluator's."""
    json_ops = byoc.load_backend("json").ops
    operand = TensorType((1,), dtype)
    return tuple(
        name
        for name, op in CATALOG.items()
        if op.rule.elementwise
        and not op.attrs
        and op.min_inputs == op.max_inputs == inputs
        and dtype in op.dtypes
        and name in json_ops
        and infer_type(op, [operand] * inputs, ()).dtype == dtype
    )


@st.composite
def json_graphs(draw) -> str:
    """A graph whose one @json region is a random DAG: unary, binary and concatenate
    ops (any axis), constants, one to three outputs, over one dtype and rank 1-4."""
    dtype = draw(st.sampled_from(DTYPES))
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
    values = [(f"p{k}", shape) for k in range(draw(st.integers(1, 3)))]
    unary, binary = elementwise_ops(1, dtype), elementwise_ops(2, dtype)
    lines = []
    for k in range(draw(st.integers(1, 8))):
        a, s = draw(st.sampled_from(values))
        same = [v for v, t in values if t == s]
        kind = draw(st.sampled_from(("unary", "binary", "binary", "concat", "const")))
        if kind == "unary":
            expr = f"{draw(st.sampled_from(unary))}({a})"
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


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN and inf of log, sqrt, power, ...
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=json_graphs(), seed=st.integers(0, 2**32 - 1))
def test_random_graphs_match_reference(text, seed):
    program = parse(text, "graph")
    module_text, externals = json_module_text(program)
    check_against_reference(JsonRuntimeModule.from_text(module_text), externals, np.random.default_rng(seed))


# ------------------------------------------------------------------------ layering


def test_runtime_modules_do_not_import_the_generator():
    code = (
        "import byoc.runtime.json_module, byoc.runtime.examplejson_module, sys\n"
        "loaded = [m for m in sys.modules if m.startswith('byoc.generator')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
