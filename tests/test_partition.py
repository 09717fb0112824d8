"""Partitioning the guide's plain graph over one or several backends, and the ``byoc partition`` CLI."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from conftest import run_cli
from partition_support import (
    BIG_CYCLE,
    BROADCAST,
    CONSTANTS,
    CYCLE,
    EXPLICIT,
    PLAIN_GRAPH,
    WEIGHTS,
    assert_equivalent,
    assert_guide_runs,
    assert_same,
    graph,
    guide_expected,
    guide_inputs,
    host_ops,
    make_addsub_dir,
    part,
    random_inputs,
    region_calls,
    run_built,
    summary,
    symbols,
)

from byoc.api import evaluate, load_backend, parse, print_program
from byoc.building import build
from byoc.errors import UsageError


@pytest.fixture(scope="module")
def addsub_dir(tmp_path_factory):
    """Backend ``addsub``: ccompiler with only add and subtract."""
    return make_addsub_dir(tmp_path_factory)


# ------------------------------------------------------------------ the guide's plain graph


def test_guide_plain_graph_has_no_regions():
    program = graph(PLAIN_GRAPH)
    assert not region_calls(program.functions[0])
    with pytest.raises(UsageError, match="nothing is offloaded"):
        build(PLAIN_GRAPH)


def test_guide_plain_graph_ccompiler_partition():
    original = graph(PLAIN_GRAPH)
    program = part(original, "ccompiler")
    (fn,) = program.functions
    assert summary(fn) == [
        ("ccompiler", ("add", "subtract", "multiply"), ("x", "w0", "w1", "w2"), ("s0",)),
        ("ccompiler", ("add", "subtract", "multiply"), ("x", "w3", "w4", "w5"), ("s1",)),
        ("ccompiler", ("add", "subtract"), ("x", "w6", "w7"), ("h",)),
        (None, ("concatenate",), ("s0", "s1", "h"), (fn.outputs[0],)),
    ]
    # ccompiler has no concatenate: it stays on the host
    assert "concatenate" not in load_backend("ccompiler").ops
    assert host_ops(fn) == ["concatenate"]
    # one external function per region, with symbols from the spec's prefix
    assert symbols(program) == ["ccompiler_0", "ccompiler_1", "ccompiler_2"]
    # each region's callee has its captured values as parameters, in order of use
    s0 = region_calls(fn)[0].callee
    assert [p.name for p in s0.params] == ["x", "w0", "w1", "w2"] and s0.outputs == ("s0",)
    assert not s0.constants
    assert_equivalent(original, program)


def test_guide_plain_graph_ccompiler_runs():
    model = build(PLAIN_GRAPH, backends=["ccompiler"])
    (module,) = model.manifest.modules
    assert module.backend == "ccompiler"
    assert sorted(module.functions) == ["ccompiler_0", "ccompiler_1", "ccompiler_2"]
    inputs = guide_inputs(3)
    (out,) = model(**inputs)
    np.testing.assert_allclose(out, guide_expected(inputs), rtol=1e-6, atol=1e-6)


def test_guide_plain_graph_cli_run(capsys):
    rc, out, err = run_cli(capsys, "run", PLAIN_GRAPH, "--backend", "ccompiler")
    assert rc == 0, out + err
    assert "Traceback" not in err
    assert "result: every output matches the numpy reference" in out


def test_guide_plain_graph_json_is_one_region():
    """The largest legal region: json runs everything, concatenate included."""
    original = graph(PLAIN_GRAPH)
    program = part(original, "json")
    (fn,) = program.functions
    ((backend, ops, inputs, outputs),) = summary(fn)
    assert backend == "json"
    assert Counter(ops) == Counter(add=3, subtract=3, multiply=2, concatenate=1)
    assert inputs == ("x", *WEIGHTS) and outputs == fn.outputs
    assert symbols(program) == ["json_0"]
    assert_equivalent(original, program)
    assert_guide_runs(["json"])


@pytest.mark.parametrize("backend", ["examplejson", "engine"])
def test_guide_plain_graph_other_backends(backend):
    program = part(PLAIN_GRAPH, backend)
    (fn,) = program.functions
    assert [b for b, *_ in summary(fn)] == [backend, backend, backend, None]
    assert host_ops(fn) == ["concatenate"]
    prefix = load_backend(backend).symbol_prefix
    assert symbols(program) == [f"{prefix}_{k}" for k in range(3)]
    options = {"opt_level": "0"} if backend == "engine" else None
    assert_guide_runs([backend], options=options)


# ------------------------------------------------------------------ several backends


def test_first_backend_wins():
    program = part(PLAIN_GRAPH, "ccompiler", "json")
    (fn,) = program.functions
    assert [(b, ops) for b, ops, *_ in summary(fn)] == [
        ("ccompiler", ("add", "subtract", "multiply")),
        ("ccompiler", ("add", "subtract", "multiply")),
        ("ccompiler", ("add", "subtract")),
        ("json", ("concatenate",)),
    ]
    assert symbols(program) == ["ccompiler_0", "ccompiler_1", "ccompiler_2", "json_0"]
    # the order of --backend is the order of preference
    reverse = part(PLAIN_GRAPH, "json", "ccompiler")
    assert [b for b, *_ in summary(reverse.functions[0])] == ["json"]
    # a backend named twice counts once
    twice = build(PLAIN_GRAPH, backends=["ccompiler", "json", "ccompiler"])
    assert [m.backend for m in twice.manifest.modules] == ["ccompiler", "json"]
    inputs = guide_inputs(1)
    np.testing.assert_allclose(twice(**inputs)[0], guide_expected(inputs), rtol=1e-6)


@pytest.mark.parametrize(
    ("second", "multiply_on"), [("json", "json"), ("ccompiler", "ccompiler"), (None, None)]
)
def test_two_backends_split_by_spec(addsub_dir, second, multiply_on):
    """addsub takes add and subtract only: multiply goes to the second backend, or
    stays on the host when there is none."""
    backends = ["addsub"] + ([second] if second else [])
    original = graph(PLAIN_GRAPH)
    program = part(original, *backends, spec_path=[addsub_dir])
    (fn,) = program.functions
    placed: dict[str, set] = {}
    for backend, ops, *_ in summary(fn):
        for op in ops:
            placed.setdefault(op, set()).add(backend)
    assert placed["add"] == placed["subtract"] == {"addsub"}
    assert placed["multiply"] == {multiply_on}
    addsub_regions = [ops for b, ops, *_ in summary(fn) if b == "addsub"]
    assert addsub_regions == [("add", "subtract")] * 3
    if second == "json":  # both multiplies and concatenate merge into one json region
        assert [ops for b, ops, *_ in summary(fn) if b == "json"] == [("multiply", "multiply", "concatenate")]
    elif second == "ccompiler":
        assert [ops for b, ops, *_ in summary(fn) if b == "ccompiler"] == [("multiply",), ("multiply",)]
        assert host_ops(fn) == ["concatenate"]
    else:
        assert host_ops(fn) == ["multiply", "multiply", "concatenate"]
    names = symbols(program, spec_path=[addsub_dir])
    assert [n for n in names if n.startswith("addsub")] == ["addsub_0", "addsub_1", "addsub_2"]
    assert_equivalent(original, program)
    assert_guide_runs(backends, spec_path=[addsub_dir])


def test_two_backends_cli(addsub_dir, capsys):
    rc, out, err = run_cli(
        capsys, "--spec-path", addsub_dir, "run", PLAIN_GRAPH, "--backend", "addsub", "--backend", "json"
    )
    assert rc == 0, out + err
    assert "backends: addsub, json" in out


# ------------------------------------------------------------------ byoc partition snapshots

SNAPSHOT_GRAPHS = {
    "cycle": CYCLE,
    "constants": CONSTANTS,
    "multi_output": """\
graph main(x: float32[4], y: float32[4]) {
  a = add(x, y)
  b = subtract(a, y)
  c = abs(a)
  d = negative(b)
  return c, d, multiply(a, b)
}
""",
    "explicit": EXPLICIT,
    "broadcast": BROADCAST,
}

SNAPSHOTS = [
    ("plain_ccompiler", "plain", ["ccompiler"]),
    ("plain_json", "plain", ["json"]),
    ("plain_addsub_json", "plain", ["addsub", "json"]),
    ("plain_addsub_ccompiler", "plain", ["addsub", "ccompiler"]),
    ("cycle_ccompiler", "cycle", ["ccompiler"]),
    ("constants_ccompiler", "constants", ["ccompiler"]),
    ("constants_examplejson", "constants", ["examplejson"]),
    ("multi_output_ccompiler", "multi_output", ["ccompiler"]),
    ("multi_output_examplejson_json", "multi_output", ["examplejson", "json"]),
    ("explicit_ccompiler", "explicit", ["ccompiler"]),
    ("broadcast_ccompiler_json", "broadcast", ["ccompiler", "json"]),
]


@pytest.mark.parametrize(("case", "source", "backends"), SNAPSHOTS, ids=[s[0] for s in SNAPSHOTS])
def test_partition_snapshots(case, source, backends, addsub_dir, tmp_path, capsys, golden):
    if source == "plain":
        path = PLAIN_GRAPH
    else:
        path = tmp_path / f"{source}.graph"
        path.write_text(SNAPSHOT_GRAPHS[source])
    argv = ["--spec-path", addsub_dir, "partition", path]
    for b in backends:
        argv += ["--backend", b]
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 0 and err == "", err
    assert out == golden("graph")
    # the printed partition parses back, equals the transform's result, and computes
    # what the original does
    original = graph(path)
    printed = parse(out, "graph")
    assert out == print_program(part(original, *backends, spec_path=[addsub_dir]))
    assert print_program(printed) == out
    assert any(n.callee is not None for n in printed.functions[0].nodes)
    assert_equivalent(original, printed)
    # and it runs as an explicitly annotated graph
    edited = tmp_path / "partitioned.graph"
    edited.write_text(out)
    inputs = random_inputs(original.functions[0], 11)
    assert_same(
        run_built(edited, [], inputs, spec_path=[addsub_dir]), evaluate(original.functions[0], inputs)
    )


def test_partition_cli_errors(capsys):
    rc, out, err = run_cli(capsys, "partition", PLAIN_GRAPH)
    assert rc == 2 and "name at least one --backend" in err and "Traceback" not in err
    rc, out, err = run_cli(capsys, "partition", PLAIN_GRAPH, "--backend", "nosuch")
    assert rc == 2 and "nosuch" in err and "Traceback" not in err
    rc, out, err = run_cli(capsys, "partition", PLAIN_GRAPH, "--backend", "ccompiler", "--option", "x=1")
    assert rc == 2 and "--option does not change partitioning" in err


def test_partition_is_deterministic():
    a = print_program(part(BIG_CYCLE, "ccompiler", "json"))
    b = print_program(part(BIG_CYCLE, "ccompiler", "json"))
    assert a == b
