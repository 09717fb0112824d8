"""Conditions (``when:``) on shapes, ranks and dtypes, on plain op mappings of every kind
and on composite patterns (spec/conditions.py): what they refuse goes to the next
backend, the refusal reasons, and the load-time errors of malformed conditions."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from mini_spec import C_SOURCE
from partition_support import placement, random_inputs
from ruamel.yaml import YAML

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build
from byoc.errors import SpecError
from byoc.generator.composite import GraphView, match_pattern
from byoc.generator.partition import partition
from byoc.generator.partition.annotate import why_not_supported
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS, load_backend_file
from byoc.spec.search import backend_files

README = SHIPPED_BACKENDS.parent / "README.md"
MARKER = "<!-- the block below is loaded and run by tests/test_shape_conditions.py -->"

GRAPH = """\
graph main(x: float32[1, 2, 6, 6], w3: float32[4, 2, 3, 3], w5: float32[4, 2, 5, 5],
           u: float32[4], v: float32[4], m: float32[3, 4]) {
  a = conv(x, w3)
  b = conv(x, w5)
  c = relu(conv(x, w3))
  d = relu(conv(x, w5))
  e = add(u, v)
  f = add(m, m)
  return a, b, c, d, e, f
}
"""


def readme_spec() -> str:
    """The README's `npu` backend, whose conv takes 3x3 weights and whose add takes vectors."""
    text = README.read_text(encoding="utf-8")
    return re.findall(r"```yaml\n(.*?)```", text[text.index(MARKER) :], flags=re.S)[0]


@pytest.fixture
def npu_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.delenv(ENV_VAR, raising=False)
    (tmp_path / "npu.yaml").write_text(readme_spec(), encoding="utf-8")
    return tmp_path


def specs_of(spec_dir: Path, *names: str):
    return [load_backend(name, spec_path=[spec_dir]) for name in names]


def test_readme_example_places_by_conditions_and_runs(npu_dir):
    program = parse(GRAPH, "graph")
    weights = dict(zip(("w3", "w5"), (program.functions[0].types()[w].shape for w in ("w3", "w5"))))
    assert weights["w3"][2] <= 3 < weights["w5"][2]  # the graph has one conv of each side
    placed = placement(partition(program, specs_of(npu_dir, "npu", "fused")))
    assert placed == {
        "a": "npu",
        "b": "fused",
        "c": "npu.conv_relu",
        "d": "fused",
        "e": "npu",
        "f": "fused",
    }
    inputs = random_inputs(program.functions[0])
    got = build(program, backends=["npu", "fused"], spec_path=[str(npu_dir)])(**inputs)
    want = evaluate(program.functions[0], inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_refused_nodes_go_to_the_host_without_another_backend(npu_dir):
    placed = placement(partition(parse(GRAPH, "graph"), specs_of(npu_dir, "npu")))
    assert [placed[k] for k in "abef"] == ["npu", "host", "npu", "host"]


def test_why_not_supported_says_which_condition_refuses(npu_dir):
    program = parse(GRAPH, "graph")
    (fn,) = program.functions
    types = fn.types()
    catalog = load_catalog()
    npu, fused = specs_of(npu_dir, "npu", "fused")
    nodes = {n.name: n for n in fn.nodes}
    assert why_not_supported(npu, nodes["a"], types, catalog) is None
    assert why_not_supported(npu, nodes["e"], types, catalog) is None
    extent = types["w5"].shape[2]
    assert why_not_supported(npu, nodes["b"], types, catalog) == (
        f"when: in1.shape[2] <= 3 is false (in1.shape[2] = {extent})"
    )
    assert why_not_supported(npu, nodes["f"], types, catalog) == (
        f"when: in1.rank == 1 is false (in1.rank = {types['m'].rank})"
    )
    assert all(why_not_supported(fused, n, types, catalog) is None for n in fn.nodes)
    relu = next(n for n in fn.nodes if n.op == "relu")
    assert why_not_supported(npu, relu, types, catalog) == "it does not map relu"


def test_why_not_supported_names_other_limits_too(npu_dir):
    (fn,) = parse(
        "graph main(p: float64[4], q: float32[2, 2, 2]) { return add(p, p), add(q, q) }", "graph"
    ).functions
    (npu,) = specs_of(npu_dir, "npu")
    reasons = [why_not_supported(npu, n, fn.types(), load_catalog()) for n in fn.nodes]
    assert reasons[0] is not None and "float64" in reasons[0] and "float32" in reasons[0]
    assert reasons[1] is not None and "rank" in reasons[1] and "float32[2, 2, 2]" in reasons[1]


def test_an_axis_the_tensor_lacks_makes_the_condition_false(tmp_path):
    text = C_SOURCE.replace('vars: {operator: "+"}', 'vars: {operator: "+"}\n    when: ["in0.shape[1] == 4"]')
    path = tmp_path / "mini.yaml"
    path.write_text(text, encoding="utf-8")
    spec = load_backend_file(path)
    (fn,) = parse("graph main(p: float32[4]) { return add(p, p) }", "graph").functions
    why = why_not_supported(spec, fn.nodes[0], fn.types(), load_catalog())
    assert why == f"when: in0.shape[1] == 4 is false (in0 is {fn.types()['p']}, which has no axis 1)"


def test_a_dtype_condition_sends_other_dtypes_on(tmp_path, monkeypatch):
    """A mapping whose kernel is written for float alone says so; float64 adds go to fused."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    text = C_SOURCE.replace("dtypes: [float32]", "dtypes: [float32, float64]").replace(
        'vars: {operator: "+"}', 'vars: {operator: "+"}\n    when: [\'out.dtype == "float32"\']'
    )
    (tmp_path / "mini.yaml").write_text(text, encoding="utf-8")
    program = parse(
        "graph main(p: float32[5], q: float64[5]) { s = add(p, p)\n t = add(q, q)\n return s, t }",
        "graph",
    )
    placed = placement(partition(program, specs_of(tmp_path, "mini", "fused")))
    assert placed == {"s": "mini", "t": "fused"}
    (mini,) = specs_of(tmp_path, "mini")
    assert mini.ops["add"].describe().endswith('when out.dtype == "float32"')
    inputs = random_inputs(program.functions[0])
    got = build(program, backends=["mini", "fused"], spec_path=[str(tmp_path)])(**inputs)
    for g, w in zip(got, evaluate(program.functions[0], inputs)):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def _with_pattern_when(conditions: list[str]) -> str:
    """The README's spec with the pattern's conditions replaced."""
    text = readme_spec()
    start = text.index("    when:", text.index("conv_relu:"))
    end = text.index("    macros:", start)
    shown = ", ".join(f'"{c}"' for c in conditions)
    return text[:start] + f"    when: [{shown}]\n" + text[end:]


def test_a_pattern_condition_on_a_node_input_refuses_the_match(tmp_path, monkeypatch):
    """The pattern asks for smaller weights than the op: relu(conv(x, w3)) is no
    composite, its conv runs alone on npu and its relu on fused."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    (tmp_path / "npu.yaml").write_text(_with_pattern_when(["conv.in1.shape[2] < 3"]), encoding="utf-8")
    program = parse(GRAPH, "graph")
    npu, fused = specs_of(tmp_path, "npu", "fused")
    partitioned = partition(program, [npu, fused])
    placed = placement(partitioned)
    assert "npu.conv_relu" not in placed.values()
    assert placed["c"] == "fused"
    assert list(placed.values()).count("npu") == 3  # a, e, and the conv under c

    (fn,) = program.functions
    view = GraphView.of(fn)
    root = next(k for k, n in enumerate(fn.nodes) if n.name == "c")
    found = match_pattern(npu.patterns["conv_relu"], view, root, load_catalog())
    extent = fn.types()["w3"].shape[2]
    assert found == (f"when: conv.in1.shape[2] < 3 is false (conv.in1.shape[2] = {extent})")


def test_a_pattern_condition_on_an_output_dtype_holds(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    conditions = ['conv.out.dtype == \\"float32\\"', "x.rank in [4]", "w.shape[-1] <= 3"]
    (tmp_path / "npu.yaml").write_text(_with_pattern_when(conditions), encoding="utf-8")
    placed = placement(partition(parse(GRAPH, "graph"), specs_of(tmp_path, "npu", "fused")))
    assert placed["c"] == "npu.conv_relu" and placed["d"] == "fused"


@pytest.mark.parametrize("name", ["fused", "engine", "json", "examplejson", "ccompiler"])
def test_every_kind_takes_conditions_on_its_op_mappings(name, tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    yaml = YAML()
    shipped = backend_files(SHIPPED_BACKENDS)[name]
    target = tmp_path / f"{name}.yaml"
    if shipped.parent != SHIPPED_BACKENDS:  # a backend in a folder, with the files it reads
        shutil.copytree(shipped.parent, tmp_path / name)
        target = tmp_path / name / f"{name}.yaml"
    doc = yaml.load(shipped)
    doc["ops"]["add"]["when"] = ["in1.rank == 1"]
    with open(target, "w") as f:
        yaml.dump(doc, f)
    program = parse(
        "graph main(p: float32[4], q: float32[2, 2]) { s = add(p, p)\n t = add(q, q)\n return s, t }",
        "graph",
    )
    placed = placement(partition(program, specs_of(tmp_path, name)))
    assert placed == {"s": name, "t": "host"}


# ------------------------------------------------------------------ malformed conditions

OP_CASES = [
    ("in2.rank == 1", "add has 2 input(s), no in2", "in0, in1"),
    ("x.rank == 1", "add has no input 'x'", "its output: out"),
    ("axis == 1", "add has no attribute 'axis'", "in<k>"),
    ("in0.size == 4", "a tensor has no property 'size'", "shape, rank, dtype"),
    ("in0.rank[0] == 1", "in0.rank[0]: rank takes no index", "shape[0]"),
    ("in0.shape[x] == 1", "in0.shape[x]: the axis must be an integer", "shape[-1]"),
    ('in0.dtype == \\"float\\"', "the value of in0.dtype must be a dtype, got 'float'", '"float32"'),
    ("in0.dtype < 3", "in0.dtype is a dtype name; < compares numbers", "=="),
    ("in0.rank == -1", "the value of in0.rank must not be negative", "== 1"),
    ('in0.rank <= \\"2\\"', "the value of in0.rank must be int, got '2'", "== 1"),
    ("in0.shape[0] <= ", "'' is not a JSON value", "an integer"),
    ("in0.shape in 3", "'3' is not a JSON list of values", "in [1, 2]"),
    ("in0.shape ~ 2", "cannot read the condition", "in1.shape[2] <= 11"),
    ("in0.shape.x.y == 1", "cannot read 'in0.shape.x.y'", "out.<property>"),
]


def _error(tmp_path: Path, text: str, needle: str) -> tuple[SpecError, int]:
    """The SpecError of loading ``text``, and the line of the spec holding ``needle``."""
    path = tmp_path / "mini.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    line = next(k for k, s in enumerate(text.splitlines(), 1) if needle in s)
    assert info.value.location is not None and info.value.location.file == str(path)
    return info.value, line


@pytest.mark.parametrize(("condition", "message", "hint"), OP_CASES)
def test_a_malformed_op_condition_is_a_located_spec_error(condition, message, hint, tmp_path):
    when = f'    when: ["{condition}"]'
    text = C_SOURCE.replace('vars: {operator: "+"}', 'vars: {operator: "+"}\n' + when)
    exc, line = _error(tmp_path, text, when)
    assert exc.message.startswith(f"op add: {message}")
    assert exc.location.line == line
    assert exc.hint and hint in exc.hint


def test_when_must_be_a_list(tmp_path):
    text = C_SOURCE.replace('vars: {operator: "+"}', 'vars: {operator: "+"}\n    when: in0.rank == 1')
    exc, line = _error(tmp_path, text, "when: in0.rank")
    assert exc.message.startswith("op add: when must be a list")
    assert exc.location.line == line


PATTERN_CASES = [
    ("v.shape[0] == 1", "condition on 'v', which names no node of the pattern", "inputs: x, w"),
    ("conv.in2.rank == 4", "conv has 2 input(s), no in2", "in0, in1"),
    ("x.in0.rank == 4", "x is an input of the pattern", "x.rank == 4"),
    ("conv.groups.x == 1", "conv has no input 'groups'", "<node>.<attribute>"),
    ("relu.out.dtype == 3", "the value of relu.out.dtype must be a dtype, got 3", '"float32"'),
]


@pytest.mark.parametrize(("condition", "message", "hint"), PATTERN_CASES)
def test_a_malformed_pattern_condition_is_a_located_spec_error(condition, message, hint, tmp_path):
    text = _with_pattern_when([condition])
    exc, line = _error(tmp_path, text.replace("name: npu", "name: mini"), condition)
    assert exc.message.startswith(f"pattern conv_relu: {message}")
    assert exc.location.line == line
    assert exc.hint and hint in exc.hint


def test_a_condition_error_points_at_its_word(tmp_path):
    when = '    when: ["in0.rank == 1", "in1.size == 4"]'
    text = C_SOURCE.replace('vars: {operator: "+"}', 'vars: {operator: "+"}\n' + when)
    exc, line = _error(tmp_path, text, when)
    assert (exc.location.line, exc.location.column) == (line, when.index("size") + 1)
