"""The engine codegen (C++): golden module and header text, compiled and run end to end.

Every golden graph is generated, compared with its snapshot under
tests/golden/test_gen_engine/, compiled under -std=c++17 -Wall -Wextra -Werror,
loaded with tvm_ffi and run on seeded random arrays against the numpy reference.
The shipped engine spec runs float32 at every rank 0..8: the test's 2-D layers at
rank 2, and elsewhere one rank-generic layer per elementwise op (a layer that
declares several ranks). Spec edits (per-rank layers, float64) run on temporary
specs that extend a copy of the shipped one (YAML only, no Python). Bad calls and graphs
the engine cannot run: tests/test_gen_engine_rejects.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, TESTS, random_array
from gen_engine_support import Loader, build, empty_outputs, generate, graph_program, split
from ruamel.yaml import YAML

from byoc.api import evaluate, load_backend, parse
from byoc.errors import GraphError, SpecError
from byoc.generator.engine.header import header_text
from byoc.generator.lowering import offload_whole
from byoc.generator.partition import partition
from byoc.ir import Program
from byoc.spec import load_backend_file

ROOT = TESTS.parent
SHIPPED_SPEC = ROOT / "spec" / "backends" / "engine" / "engine.yaml"

GRAPHS = ("guide_subgraph", "whole_graph", "constants", "multi_output", "dag", "nd")
SEEDS = {"guide_subgraph": ("subgraph_0",), "tvm_external_runtime": ("json_rt_0", "json_rt_1")}
"""examples/<name>.examplejson -> its subgraphs, each exported under its own name."""

# ------------------------------------------------------------------ helpers


def seed_program(name: str) -> Program:
    """examples/<name>.examplejson, each subgraph one external function of engine."""
    text = (EXAMPLES / f"{name}.examplejson").read_text()
    return offload_whole(parse(text, "examplejson", file=f"examples/{name}.examplejson"), "engine")


def run_and_compare(externals, artifacts, out_dir: Path, rng, catalog) -> None:
    """Compile, load and call every external function; compare with the numpy reference."""
    lib = build(artifacts, out_dir)
    for fn in externals:
        inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
        outs = empty_outputs(fn)
        lib[fn.name](*inputs.values(), *outs)
        expected = evaluate(fn, inputs, catalog)
        assert len(expected) == len(outs)
        for got, want in zip(outs, expected):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-6)


def temp_spec(tmp_path: Path, edit: Callable[[dict], None]) -> Loader:
    """A copy of the shipped engine spec folder, its engine.yaml edited with ruamel.yaml's round trip (which
    keeps comments and key order; no line wrapping, so that spec line numbers in the
    header stay those of the shipped spec), loaded from its own spec directory."""
    yaml = YAML()
    yaml.width = 4096
    data = yaml.load(SHIPPED_SPEC.read_text())
    edit(data)
    spec_dir = tmp_path / "specs"
    shutil.copytree(SHIPPED_SPEC.parent, spec_dir / "engine")  # with the template file it reads
    with (spec_dir / "engine" / "engine.yaml").open("w") as f:
        yaml.dump(data, f)
    return lambda name: load_backend(name, spec_path=[spec_dir])


ND_MACRO = """\
static inline void p_ID_(const byoc_engine::LayerArgs& args, const ${ctype}* const* in, ${ctype}* out) {
  int64_t size = 1;
  for (int64_t d = 0; d < p_RANK_; ++d) size *= args.dims[d];
  for (int64_t k = 0; k < size; ++k) out[k] = in[0][k] p_OP_ in[1][k];
}
"""

OPERATORS = {"add": ("add", "+"), "subtract": ("sub", "-"), "multiply": ("mul", "*")}


def add_ranks(data: dict, ranks: tuple[int, ...]) -> None:
    """Give each op a layer of its own at each of ``ranks`` (one rank per layer, whose
    macro argument uses ${rank}), in place of the shipped rank-generic layers."""
    data["macros"]["BINARY_OP_RANK"] = {
        "params": {"p_ID_": "${layer}", "p_OP_": "${operator}", "p_RANK_": "${rank}"},
        "body": ND_MACRO,
    }
    for op, (short, operator) in OPERATORS.items():
        for rank in ranks:
            layer = f"{short}_{rank}d"
            data["layers"][layer] = {
                "macro": "BINARY_OP_RANK",
                "inputs": 2,
                "rank": rank,
                "vars": {"operator": operator},
            }
            data["ops"][op]["layers"][rank] = layer


def nd_spec(tmp_path: Path) -> Loader:
    return temp_spec(tmp_path, lambda data: add_ranks(data, (0, 1, 3, 4)))


def float64_spec(tmp_path: Path) -> Loader:
    def edit(data: dict) -> None:
        data["dtypes"] = ["float64"]

    return temp_spec(tmp_path, edit)


# ------------------------------------------------------------------ goldens, compiled and run


def test_engine_header(golden, catalog):
    _, artifacts = generate(graph_program("guide_subgraph"), catalog)
    _, header = split(artifacts)
    assert header.name == "gcc_engine.h" and header.backend == "engine"
    assert header.text == golden("h")


@pytest.mark.parametrize("name", GRAPHS)
def test_graph(name, golden, catalog, rng, tmp_path):
    externals, artifacts = generate(graph_program(name), catalog)
    module, _ = split(artifacts)
    assert module.name == "engine.cc" and module.backend == "engine"
    assert module.text == golden("cc")
    run_and_compare(externals, artifacts, tmp_path, rng, catalog)


@pytest.mark.parametrize("name", SEEDS)
def test_examplejson_seed(name, golden, catalog, rng, tmp_path):
    externals, artifacts = generate(seed_program(name), catalog)
    module, _ = split(artifacts)
    assert tuple(fn.name for fn in externals) == SEEDS[name]
    assert module.text == golden("cc")
    run_and_compare(externals, artifacts, tmp_path, rng, catalog)


RANK3 = """\
graph main(x: float32[2, 3, 4], y: float32[2, 3, 4], z: float32[2, 3, 4]) {
  s, t = @engine {
    a = add(x, y)
    d = divide(subtract(a, z), y)
    return relu(maximum(d, negative(x))), minimum(multiply(a, z), copy(y))
  }
  return s, t
}
"""


def test_rank3_graph(golden, catalog, rng, tmp_path):
    """Every op of the shipped spec at rank 3, on its rank-generic layers."""
    externals, artifacts = generate(parse(RANK3, "graph", file="rank3.graph"), catalog)
    module, header = split(artifacts)
    assert module.text == golden("cc")
    # The header depends on the spec only: its golden is test_engine_header.h.
    assert header.text == split(generate(graph_program("guide_subgraph"), catalog)[1])[1].text
    fields = [line.split('"')[1].split(";") for line in module.text.splitlines() if ";2 3 4;" in line]
    layers = [f[0] for f in fields if f[3] == "2 3 4"]
    assert layers == [
        "add_nd",
        "sub_nd",
        "div_nd",
        "neg_nd",
        "max_nd",
        "relu_nd",
        "mul_nd",
        "copy_nd",
        "min_nd",
    ]
    run_and_compare(externals, artifacts, tmp_path, rng, catalog)


NETWORKS = {
    "resnet_basic_block": {"conv", "batch_norm", "relu", "add"},
    "mlp": {"dense", "bias_add", "relu", "softmax"},
}
"""The shipped networks, and the ops that run on the engine: all of them."""


@pytest.mark.parametrize("name", list(NETWORKS))
def test_network(name, golden, catalog, rng, tmp_path):
    """The network partitioned automatically onto the engine: conv2d and dense layers
    read their input extents and attributes from the layer line."""
    path = EXAMPLES / f"{name}.graph"
    source = parse(path.read_text(), "graph", file=f"examples/{name}.graph")
    program = partition(source, [load_backend("engine")], catalog)
    (host,) = program.functions
    assert [n.op for n in host.nodes] == ["call"]
    assert {n.op for n in host.nodes[0].callee.nodes} == NETWORKS[name]
    externals, artifacts = generate(program, catalog)
    module, _ = split(artifacts)
    assert module.text == golden("cc")
    run_and_compare(externals, artifacts, tmp_path, rng, catalog)


def test_nd_on_extended_spec(golden, catalog, rng, tmp_path):
    """Layers of one rank each, added by a spec edit, take precedence over the
    rank-generic default at their ranks."""
    loader = nd_spec(tmp_path)
    externals, artifacts = generate(graph_program("nd"), catalog, loader)
    module, header = split(artifacts)
    assert module.text == golden("cc")
    assert header.text == golden("h")
    run_and_compare(externals, artifacts, tmp_path / "build", rng, catalog)


def test_float64_on_extended_spec(golden, catalog, rng, tmp_path):
    loader = float64_spec(tmp_path)
    externals, artifacts = generate(graph_program("float64"), catalog, loader)
    module, header = split(artifacts)
    assert "double" in header.text and "float" not in header.text.replace("float64", "")
    assert module.text == golden("cc")
    assert header.text == golden("h")
    run_and_compare(externals, artifacts, tmp_path / "build", rng, catalog)


EDGES = """\
graph main(x: float32[3, 2], y: float32[3, 2], s: float32[]) {
  a, b, c, d, e, f = @engine {
    k = const float32[3, 2] [1.5, -2, 0.25, 3, -0.125, 7]
    t = add(x, y)
    return x, t, k, t, multiply(subtract(t, k), t), add(s, s)
  }
  return a, b, c, d, e, f
}
"""


def test_copies_and_rank0(golden, catalog, rng, tmp_path):
    """Outputs no layer writes (a parameter, a constant, a value returned twice) are
    copied by the wrapper; a rank-0 layer has no dims."""
    program = parse(EDGES, "graph", file="edges.graph")
    externals, artifacts = generate(program, catalog, nd_spec(tmp_path))
    module, _ = split(artifacts)
    assert module.text == golden("cc")
    run_and_compare(externals, artifacts, tmp_path / "build", rng, catalog)


def test_intermediate_buffers_are_reused(catalog):
    """A chain needs two intermediate ids however long it is: a buffer is reused once
    its last reader ran, never by the layer that reads it."""
    chain = " ".join(f"t{k} = add(t{k - 1}, x)" for k in range(1, 12))
    text = f"graph main(x: float32[2, 2]) {{ s = @engine {{ t0 = add(x, x) {chain} return t11 }} return s }}"
    _, artifacts = generate(parse(text, "graph"), catalog)
    module, _ = split(artifacts)
    lines = [line for line in module.text.splitlines() if "add_2d;" in line]
    assert len(lines) == 12
    written = [int(line.split('"')[1].split(";")[1]) for line in lines]
    read = [line.split('"')[1].split(";")[2].split() for line in lines]
    assert set(written[:-1]) == {2, 3} and written[-1] == 1
    for out, ins in zip(written, read):
        assert str(out) not in ins


# ------------------------------------------------------------------ calls from Python


def test_engine_error_is_raised(catalog, rng, tmp_path):
    """A layer graph the engine rejects comes back as a Python RuntimeError."""

    def edit(data: dict) -> None:
        data["graph_line"] = "${layer};${output};${inputs};${dims} ${dims}"

    externals, artifacts = generate(graph_program("guide_subgraph"), catalog, temp_spec(tmp_path, edit))
    lib = build(artifacts, tmp_path / "build")
    fn = externals[0]
    inputs = [random_array(rng, p.type.shape, p.type.dtype) for p in fn.params]
    with pytest.raises(RuntimeError, match=f"{fn.name}: the engine failed: wrong rank"):
        lib[fn.name](*inputs, *empty_outputs(fn))


# ------------------------------------------------------------------ graphs the engine cannot run


def test_rank_without_layer_on_extended_spec(catalog, tmp_path):
    """A rank the backend declares but an op has no layer for is a located error too."""

    def edit(data: dict) -> None:
        add_ranks(data, (1,))
        del data["ops"]["multiply"]["layers"][1]
        del data["ops"]["multiply"]["layers"]["default"]

    text = "graph main(x: float32[5]) {\n  s = @engine {\n    return multiply(add(x, x), x)\n  }\n  return s\n}\n"
    with pytest.raises(GraphError, match="multiply") as info:
        generate(parse(text, "graph", file="r1.graph"), catalog, temp_spec(tmp_path, edit))
    assert info.value.location is not None and info.value.location.line == 3


# ------------------------------------------------------------------ determinism, spec edits


def test_generation_is_deterministic(catalog):
    for name in GRAPHS:
        first = generate(graph_program(name), catalog)[1]
        second = generate(graph_program(name), catalog)[1]
        assert first == second


def test_same_text_in_a_separate_process(catalog):
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import test_gen_engine as t, byoc.spec as s\n"
        "print(t.generate(t.graph_program('dag'), s.load_catalog())[1][0].text, end='')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(TESTS)], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert proc.stdout == generate(graph_program("dag"), catalog)[1][0].text


def test_macro_edit_changes_only_the_kernels(catalog, tmp_path):
    """Editing one spec macro changes the generated header exactly there; the module
    (which only names layers) is unchanged."""

    def edit(data: dict) -> None:
        body = data["macros"]["GCC_BINARY_OP_2D"]["body"]
        data["macros"]["GCC_BINARY_OP_2D"]["body"] = body.replace(
            "int64_t k = i * dim2 + j;", "const int64_t k = i * dim2 + j;"
        )

    program = graph_program("guide_subgraph")
    module, header = split(generate(program, catalog)[1])
    module2, header2 = split(generate(program, catalog, temp_spec(tmp_path, edit))[1])
    assert module2.text == module.text
    before, after = header.text.splitlines(), header2.text.splitlines()
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert len(before) == len(after) and len(changed) == 1
    assert "const int64_t k = i * dim2 + j;" in changed[0][1]


def test_options_reach_the_templates(catalog, tmp_path):
    """Spec options are placeholders of every template (here the invoke code)."""

    def edit(data: dict) -> None:
        data["invoke"] = "// opt_level ${opt_level}\n" + data["invoke"]

    loader = temp_spec(tmp_path, edit)
    module, _ = split(generate(graph_program("dag"), catalog, loader, {"opt_level": 3})[1])
    assert "// opt_level 3" in module.text
    module, _ = split(generate(graph_program("dag"), catalog, loader)[1])
    assert "// opt_level 2" in module.text


# ------------------------------------------------------------------ spec: layers of several ranks

MINI = """\
version: 1
name: mini
kind: engine
dtypes: [float32]
ranks: [0, 1, 2, 3]
compile: {language: c++}
macros:
  FLAT:
    params: {p_ID_: "${layer}", p_OP_: "${operator}"}
    body: |
      inline void p_ID_(const int64_t*, int64_t n, const ${ctype}* const* in, ${ctype}* out) {
        for (int64_t k = 0; k < n; ++k) out[k] = in[0][k] p_OP_ in[1][k];
      }
layers:
  add_2d: {macro: FLAT, inputs: 2, rank: 2, vars: {operator: "+"}}
  add_nd: {macro: FLAT, inputs: 2, ranks: [0, 1, 3], vars: {operator: "+"}}
ops:
  add: {layers: {2: add_2d, default: add_nd}}
graph_line: "${layer};${output};${inputs};${dims}"
layer_entry: '{"${layer}", &${layer}, ${inputs}, {${ranks}}},'
invoke: "return Engine().run(${graph}, {${args}});"
engine: |
  ${layer_table}
"""


def mini_spec(tmp_path: Path, old: str = "", new: str = "") -> Path:
    assert MINI.count(old) == 1 or not old
    path = tmp_path / "mini.yaml"
    path.write_text(MINI.replace(old, new) if old else MINI)
    return path


def test_layer_of_several_ranks(tmp_path, catalog):
    spec = load_backend_file(mini_spec(tmp_path))
    assert spec.layers["add_nd"].ranks == (0, 1, 3) and spec.layers["add_2d"].ranks == (2,)
    assert [spec.ops["add"].construct(r) for r in spec.ranks] == ["add_nd", "add_nd", "add_2d", "add_nd"]
    assert all(spec.supports("add", "float32", r) for r in spec.ranks)
    assert spec.ops["add"].describe() == "rank 2: add_2d; other ranks: add_nd"
    assert load_backend("engine").ops["divide"].describe() == "any rank: div_nd"
    header = header_text(spec, spec.template_values())
    assert '{"add_2d", &add_2d, 2, {2}},' in header and '{"add_nd", &add_nd, 2, {0, 1, 3}},' in header
    assert "layer add_nd (mini.yaml:16): 2 input(s), ranks 0, 1, 3" in header


# (old text, new text, line, column, message fragment)
# fmt: off
SPEC_ERRORS = {
    "rank and ranks": ("rank: 2, vars", "rank: 2, ranks: [2], vars", 15, 45, "exactly one of `rank` and `ranks`"),
    "neither": ("inputs: 2, rank: 2, ", "inputs: 2, ", 15, 11, "exactly one of `rank` and `ranks`"),
    "ranks not a list": ("ranks: [0, 1, 3]", "ranks: 3", 16, 43, "ranks must be a list"),
    "empty ranks": ("ranks: [0, 1, 3]", "ranks: []", 16, 43, "ranks must list at least one rank"),
    "undeclared rank": ("ranks: [0, 1, 3]", "ranks: [0, 1, 5]", 16, 50, "rank 5 is not one of this backend's ranks"),
    "repeated rank": ("ranks: [0, 1, 3]", "ranks: [0, 1, 1]", 16, 50, "rank 1 is listed twice"),
    "rank not an int": ("ranks: [0, 1, 3]", "ranks: [0, one, 3]", 16, 47, "a rank must be an integer"),
    "default misses a rank": ("ranks: [0, 1, 3]", "ranks: [0, 3]", 18, 38, "layer add_nd serves ranks 0, 3, not 1"),
    "explicit rank not served": ("{2: add_2d,", "{2: add_nd,", 18, 21, "layer add_nd serves ranks 0, 1, 3, not 2"),
    "rank in layer_entry": ("{${ranks}}}", "${rank}}", 20, 50, "layer_entry uses ${rank}, but layer add_nd serves several ranks"),
    "rank in macro argument": ('p_OP_: "${operator}"}', 'p_OP_: "${operator} ${rank}"}', 16, 43,
                               "layer add_nd serves several ranks, but the argument of p_OP_ in its macro FLAT uses ${rank}"),
}
# fmt: on


@pytest.mark.parametrize("case", SPEC_ERRORS)
def test_layer_ranks_errors_are_located(case, tmp_path):
    old, new, line, column, message = SPEC_ERRORS[case]
    path = mini_spec(tmp_path, old, new)
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    err = info.value
    assert message in err.message, err.render()
    assert err.location is not None
    assert (err.location.file, err.location.line, err.location.column) == (str(path), line, column), (
        err.render()
    )


def test_one_rank_layers_keep_rank_placeholder(tmp_path):
    """``${rank}`` stays valid in layer_entry and macro arguments while every layer has one rank."""
    text = MINI.replace("ranks: [0, 1, 3]", "rank: 3").replace("{${ranks}}}", "${rank}}")
    path = tmp_path / "mini.yaml"
    path.write_text(text.replace("ranks: [0, 1, 2, 3]", "ranks: [2, 3]"))
    spec = load_backend_file(path)
    header = header_text(spec, spec.template_values())
    assert '{"add_2d", &add_2d, 2, 2},' in header and '{"add_nd", &add_nd, 2, 3},' in header
