"""Automatic partitioning (annotate -> merge -> partition) of un-annotated graphs:
which node lands in which region, cycle avoidance, constants, explicit regions,
broadcasting, several backends and ``byoc partition`` snapshots."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from partition_support import (
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
    private_cache,
    random_inputs,
    region_calls,
    run_built,
    run_cli,
    summary,
    symbols,
)

from byoc.api import evaluate, load_backend, parse, print_program
from byoc.building import build
from byoc.errors import UsageError
from byoc.ir import Function


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """A private compile cache for this module."""
    yield from private_cache(tmp_path_factory)


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
    (module,) = model.manifest["modules"]
    assert module["backend"] == "ccompiler"
    assert sorted(module["functions"]) == ["ccompiler_0", "ccompiler_1", "ccompiler_2"]
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
    assert [m["backend"] for m in twice.manifest["modules"]] == ["ccompiler", "json"]
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


# ------------------------------------------------------------------ merging and cycles

CYCLE = """\
graph main(x: float32[4, 3], y: float32[4, 3]) {
  a = add(x, y)
  b = relu(a)
  c = add(a, b)
  return c
}
"""


def naive_has_cycle(fn: Function, backend_ops: set[str]) -> bool:
    """Whether merging every connected group of offloadable nodes (ignoring the host)
    into one region gives a cycle between regions and host nodes."""
    nodes = list(fn.nodes)
    producer = {o: k for k, n in enumerate(nodes) for o in n.outputs}
    group = list(range(len(nodes)))

    def find(k):
        while group[k] != k:
            k = group[k]
        return k

    for k, n in enumerate(nodes):
        if n.op in backend_ops:
            for name in n.inputs:
                j = producer.get(name)
                if j is not None and nodes[j].op in backend_ops:
                    group[find(j)] = find(k)
    edges = {(find(producer[i]), find(k)) for k, n in enumerate(nodes) for i in n.inputs if i in producer}
    edges = {(a, b) for a, b in edges if a != b}
    # a cycle: some unit reaches itself
    succ: dict[int, set[int]] = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)
    for start in succ:
        stack, seen = list(succ[start]), set()
        while stack:
            u = stack.pop()
            if u == start:
                return True
            if u not in seen:
                seen.add(u)
                stack.extend(succ.get(u, ()))
    return False


def test_cycle_classic():
    original = graph(CYCLE)
    assert naive_has_cycle(original.functions[0], {"add"})
    program = part(original, "ccompiler")
    (fn,) = program.functions
    assert summary(fn) == [
        ("ccompiler", ("add",), ("x", "y"), ("a",)),
        (None, ("relu",), ("a",), ("b",)),
        ("ccompiler", ("add",), ("a", "b"), ("c",)),
    ]
    assert symbols(program) == ["ccompiler_0", "ccompiler_1"]
    assert_equivalent(original, program)
    inputs = random_inputs(original.functions[0])
    (out,) = run_built(original, ["ccompiler"], inputs)
    a = inputs["x"] + inputs["y"]
    np.testing.assert_allclose(out, a + np.maximum(a, 0), rtol=1e-6)


def test_cycle_classic_with_json_for_the_middle():
    """With json taking relu, the middle node is a region of its own; still no cycle."""
    program = part(CYCLE, "ccompiler", "json")
    assert [(b, ops) for b, ops, *_ in summary(program.functions[0])] == [
        ("ccompiler", ("add",)),
        ("json", ("relu",)),
        ("ccompiler", ("add",)),
    ]
    # json alone takes everything
    assert [b for b, *_ in summary(part(CYCLE, "json").functions[0])] == ["json"]


BIG_CYCLE = """\
graph main(x: float32[3, 2], y: float32[3, 2], z: float32[3, 2]) {
  a = add(x, y)
  b = subtract(a, z)
  h1 = relu(b)
  c = multiply(a, y)
  h2 = negative(c)
  d = add(h1, h2)
  e = subtract(d, b)
  f = multiply(e, c)
  g = add(f, a)
  h3 = maximum(g, z)
  k = add(h3, f)
  return k, g
}
"""


def test_cycle_bigger():
    original = graph(BIG_CYCLE)
    assert naive_has_cycle(original.functions[0], {"add", "subtract", "multiply"})
    program = part(original, "ccompiler")
    (fn,) = program.functions
    assert summary(fn) == [
        ("ccompiler", ("add", "subtract", "multiply"), ("x", "y", "z"), ("a", "b", "c")),
        (None, ("relu",), ("b",), ("h1",)),
        (None, ("negative",), ("c",), ("h2",)),
        ("ccompiler", ("add", "subtract", "multiply", "add"), ("h1", "h2", "b", "c", "a"), ("f", "g")),
        (None, ("maximum",), ("g", "z"), ("h3",)),
        ("ccompiler", ("add",), ("h3", "f"), ("k",)),
    ]
    assert symbols(program) == ["ccompiler_0", "ccompiler_1", "ccompiler_2"]
    assert_equivalent(original, program)
    inputs = random_inputs(original.functions[0], 5)
    got = run_built(original, ["ccompiler"], inputs)
    assert_same(got, evaluate(original.functions[0], inputs))


STALE = """\
graph main(x: float32[4], y: float32[4]) {
  a1 = add(x, y)
  h1 = relu(a1)
  a2 = add(h1, y)
  b1 = subtract(x, y)
  m = multiply(a2, b1)
  n = add(a1, b1)
  return m, n
}
"""


def test_cycle_through_a_merged_region():
    """Regression: {a2} and {b1} merge at m, and the merged region depends on a1's
    region through h1; so n, which reads b1, may not join a1's region (it would make
    a1 -> h1 -> {a2, b1, m} -> n -> a1 a cycle)."""
    original = graph(STALE)
    program = part(original, "ccompiler")
    (fn,) = program.functions
    assert summary(fn) == [
        ("ccompiler", ("add",), ("x", "y"), ("a1",)),
        (None, ("relu",), ("a1",), ("h1",)),
        ("ccompiler", ("add", "subtract", "multiply", "add"), ("h1", "y", "x", "a1"), ("m", "n")),
    ]
    assert_equivalent(original, program)
    inputs = random_inputs(original.functions[0], 2)
    assert_same(run_built(original, ["ccompiler"], inputs), evaluate(original.functions[0], inputs))


@pytest.mark.parametrize(
    ("text", "backend", "expected"),
    [
        # a chain is one region
        ("a = add(x, y)\n  b = subtract(a, x)\n  c = multiply(b, y)\n  return c", "ccompiler", 1),
        # a diamond is one region
        (
            "a = add(x, y)\n  b = subtract(a, x)\n  c = multiply(a, y)\n  d = add(b, c)\n  return d",
            "ccompiler",
            1,
        ),
        # two independent chains joined by a supported op: one region
        ("a = add(x, y)\n  b = subtract(x, y)\n  c = multiply(a, b)\n  return c", "ccompiler", 1),
        # independent chains that never meet stay apart
        ("a = add(x, y)\n  b = subtract(x, y)\n  return a, b", "ccompiler", 2),
        # a host op in the middle of a chain: two regions
        ("a = add(x, y)\n  b = relu(a)\n  c = multiply(b, y)\n  return c", "ccompiler", 2),
        # json takes everything: one region, whatever the shape of the graph
        (
            "a = add(x, y)\n  b = relu(a)\n  c = concatenate(a, b, axis=1)\n  d = negative(c)\n  return d, a",
            "json",
            1,
        ),
    ],
)
def test_merge_gives_largest_regions(text, backend, expected):
    source = f"graph main(x: float32[2, 3], y: float32[2, 3]) {{\n  {text}\n}}\n"
    original = graph(source)
    program = part(original, backend)
    regions = region_calls(program.functions[0])
    assert len(regions) == expected
    offloadable = set(load_backend(backend).ops)
    assert all(n.op not in offloadable for n in program.functions[0].nodes if n.callee is None)
    assert_equivalent(original, program)


def test_multi_output_region():
    text = """\
    graph main(x: float32[4], y: float32[4]) {
      a = add(x, y)
      b = subtract(a, y)
      c = relu(a)
      d = relu(b)
      return c, d, b
    }
    """
    original = graph(text)
    program = part(original, "ccompiler")
    (fn,) = program.functions
    assert summary(fn)[0] == ("ccompiler", ("add", "subtract"), ("x", "y"), ("a", "b"))
    assert host_ops(fn) == ["relu", "relu"]
    assert_equivalent(original, program)
    inputs = random_inputs(original.functions[0])
    assert_same(run_built(original, ["ccompiler"], inputs), evaluate(original.functions[0], inputs))


def test_dead_nodes_keep_a_result():
    """Regression: a region of unused nodes still returns a value (a call with no
    results printed as broken DSL)."""
    text = """\
    graph main(x: float32[2], y: float32[2]) {
      unused = add(x, y)
      z = multiply(x, y)
      return z, y
    }
    """
    original = graph(text)
    program = part(original, "ccompiler")
    assert [outs for *_, outs in summary(program.functions[0])] == [("unused",), ("z",)]
    printed = print_program(program)
    assert parse(printed) == program
    assert_equivalent(original, program)
    inputs = random_inputs(original.functions[0])
    assert_same(run_built(original, ["ccompiler"], inputs), evaluate(original.functions[0], inputs))


def test_anonymous_values_crossing_regions_get_names():
    text = """\
    graph main(x: float32[3], y: float32[3]) {
      return add(relu(add(x, y)), negative(subtract(x, y)))
    }
    """
    original = graph(text)
    program = part(original, "ccompiler")
    (fn,) = program.functions
    assert summary(fn) == [
        ("ccompiler", ("add",), ("x", "y"), ("add_0",)),
        (None, ("relu",), ("add_0",), ("relu_0",)),
        ("ccompiler", ("subtract",), ("x", "y"), ("subtract_0",)),
        (None, ("negative",), ("subtract_0",), ("negative_0",)),
        ("ccompiler", ("add",), ("relu_0", "negative_0"), ("add_1",)),
    ]
    assert fn.outputs == ("add_1",)
    assert_equivalent(original, program)


# ------------------------------------------------------------------ constants

CONSTANTS = """\
graph main(x: float32[4]) {
  k = const float32[4] [1, 2, 3, 4]
  j = const float32[4] [5, 6, 7, 8]
  a = add(x, k)
  b = multiply(a, j)
  c = relu(j)
  return b, c
}
"""


def test_constant_used_only_in_a_region_moves_in():
    original = graph(CONSTANTS)
    program = part(original, "ccompiler")
    (fn,) = program.functions
    (call,) = region_calls(fn)
    # k is only used by the region: it moves in; j is also used by the host: it stays
    assert [c.name for c in call.callee.constants] == ["k"]
    assert [c.name for c in fn.constants] == ["j"]
    assert call.inputs == ("x", "j")
    assert host_ops(fn) == ["relu"]
    assert_equivalent(original, program)
    inputs = {"x": np.array([0.5, -1, 2, 3], np.float32)}
    b, c = run_built(original, ["ccompiler"], inputs)
    np.testing.assert_allclose(b, (inputs["x"] + [1, 2, 3, 4]) * [5, 6, 7, 8], rtol=1e-6)
    np.testing.assert_array_equal(c, np.array([5, 6, 7, 8], np.float32))


def test_constant_used_by_two_regions_stays_outside():
    original = graph(CONSTANTS)
    program = part(original, "json")
    (fn,) = program.functions
    calls = region_calls(fn)
    assert [call.callee.backend for call in calls] == ["json", "json"]
    assert [[c.name for c in call.callee.constants] for call in calls] == [["k"], []]
    assert [c.name for c in fn.constants] == ["j"]
    assert_equivalent(original, program)


def test_constant_returned_by_the_graph_stays_outside():
    text = """\
    graph main(x: float32[2]) {
      k = const float32[2] [1, 2]
      return add(x, k), k
    }
    """
    program = part(text, "ccompiler")
    (fn,) = program.functions
    assert [c.name for c in fn.constants] == ["k"]
    assert not region_calls(fn)[0].callee.constants
    assert_equivalent(graph(text), program)


def test_examplejson_gets_no_constants_and_one_result():
    """examplejson's kind embeds no constants and returns one result per region: the
    constants stay outside as inputs, and regions with several results are split."""
    original = graph(CONSTANTS)
    program = part(original, "examplejson")
    (fn,) = program.functions
    (call,) = region_calls(fn)
    assert not call.callee.constants and call.inputs == ("x", "k", "j")
    assert [c.name for c in fn.constants] == ["k", "j"]

    text = """\
    graph main(x: float32[4], y: float32[4]) {
      k = const float32[4] [1, 2, 3, 4]
      a = add(x, k)
      b = subtract(a, y)
      c = relu(a)
      d = relu(b)
      return c, d
    }
    """
    multi = graph(text)
    assert len(region_calls(part(multi, "ccompiler").functions[0])) == 1
    program = part(multi, "examplejson")
    (fn,) = program.functions
    assert [(b, ops, outs) for b, ops, _, outs in summary(fn)] == [
        ("examplejson", ("add",), ("a",)),
        ("examplejson", ("subtract",), ("b",)),
        (None, ("relu",), ("c",)),
        (None, ("relu",), ("d",)),
    ]
    for call in region_calls(fn):
        assert len(call.outputs) == 1 and not call.callee.constants
    assert_equivalent(multi, program)
    inputs = random_inputs(multi.functions[0])
    assert_same(run_built(multi, ["examplejson"], inputs), evaluate(multi.functions[0], inputs))


def test_examplejson_split_lets_other_regions_merge():
    """Regression: {e1, e2, e3} first merge into one examplejson region, which depends
    on j1 and has two results, so it is split. n may then join j1's json region: e2
    alone does not depend on it (the merge runs again around the split nodes)."""
    text = """\
    graph main(x: float32[3], y: float32[3]) {
      j1 = relu(x)
      e1 = add(j1, y)
      e2 = subtract(x, y)
      e3 = multiply(e1, e2)
      n = maximum(j1, e2)
      return e3, n
    }
    """
    original = graph(text)
    program = part(original, "examplejson", "json")
    (fn,) = program.functions
    assert summary(fn) == [
        ("examplejson", ("subtract",), ("x", "y"), ("e2",)),
        ("json", ("relu", "maximum"), ("x", "e2"), ("j1", "n")),
        ("examplejson", ("add",), ("j1", "y"), ("e1",)),
        ("examplejson", ("multiply",), ("e1", "e2"), ("e3",)),
    ]
    assert_equivalent(original, program)
    inputs = random_inputs(original.functions[0])
    assert_same(run_built(original, ["examplejson", "json"], inputs), evaluate(original.functions[0], inputs))


# ------------------------------------------------------------------ explicit regions

EXPLICIT = """\
graph main(x: float32[4], y: float32[4]) {
  a = @json { return add(x, y) }
  b = add(a, y)
  c = relu(b)
  d = @json as mine { return subtract(c, x) }
  e = multiply(d, a)
  return e
}
"""


def test_explicit_regions_win():
    original = graph(EXPLICIT)
    program = part(original, "ccompiler")
    (fn,) = program.functions
    assert [(b, ops) for b, ops, *_ in summary(fn)] == [
        ("json", ("add",)),
        ("ccompiler", ("add",)),
        (None, ("relu",)),
        ("json", ("subtract",)),
        ("ccompiler", ("multiply",)),
    ]
    # the explicit regions are kept exactly as written
    before = region_calls(original.functions[0])
    after = [n for n in region_calls(fn) if n.callee.backend == "json"]
    assert after == before
    assert symbols(program) == ["json_0", "ccompiler_0", "mine", "ccompiler_1"]
    assert_equivalent(original, program)
    inputs = random_inputs(original.functions[0])
    assert_same(run_built(original, ["ccompiler"], inputs), evaluate(original.functions[0], inputs))


def test_explicit_regions_alone_need_no_backend():
    program = part(EXPLICIT, "json")
    (fn,) = program.functions
    assert [b for b, *_ in summary(fn)] == ["json", "json", "json", "json"]
    assert region_calls(fn)[2].callee.name == "mine"


# ------------------------------------------------------------------ broadcasting

BROADCAST = """\
graph main(x: float32[4, 10], bias: float32[10]) {
  y = add(x, bias)
  z = multiply(y, x)
  return z
}
"""


@pytest.mark.parametrize(
    ("backends", "placement"),
    [
        (["ccompiler"], [(None, ("add",)), ("ccompiler", ("multiply",))]),
        (["ccompiler", "json"], [("json", ("add",)), ("ccompiler", ("multiply",))]),
        (["json"], [("json", ("add", "multiply"))]),
        (["examplejson"], [("examplejson", ("add", "multiply"))]),
        (["engine"], [(None, ("add",)), ("engine", ("multiply",))]),
    ],
)
def test_broadcasting_only_where_declared(backends, placement):
    assert load_backend("json").broadcast and not load_backend("ccompiler").broadcast
    original = graph(BROADCAST)
    program = part(original, *backends)
    assert [(b, ops) for b, ops, *_ in summary(program.functions[0])] == placement
    assert_equivalent(original, program)
    inputs = random_inputs(original.functions[0], 4)
    options = {"opt_level": "0"} if "engine" in backends else None
    (out,) = run_built(original, backends, inputs, options=options)
    np.testing.assert_allclose(out, (inputs["x"] + inputs["bias"]) * inputs["x"], rtol=1e-6)


def test_dtype_and_rank_decide_too():
    text = """\
    graph main(a: int32[2, 2], b: int32[2, 2], x: float32[2, 2, 2], y: float32[2, 2, 2]) {
      i = add(a, b)
      f = subtract(x, y)
      return i, f
    }
    """
    # engine: float32 and rank 2 only; examplejson: float32 only
    assert [b for b, *_ in summary(part(text, "engine").functions[0])] == [None, None]
    assert [b for b, *_ in summary(part(text, "examplejson").functions[0])] == [None, "examplejson"]
    assert [b for b, *_ in summary(part(text, "engine", "examplejson", "ccompiler").functions[0])] == [
        "ccompiler",
        "examplejson",
    ]


def test_attributes_need_a_kind_that_carries_them():
    text = "graph main(x: float32[2]) {\n  return concatenate(x, x, axis=0)\n}\n"
    assert not region_calls(part(text, "examplejson", "ccompiler").functions[0])
    assert region_calls(part(text, "json").functions[0])


# ------------------------------------------------------------------ byoc partition snapshots

SNAPSHOT_GRAPHS = {
    "cycle": CYCLE,
    "constants": CONSTANTS,
    "multi_output": """\
graph main(x: float32[4], y: float32[4]) {
  a = add(x, y)
  b = subtract(a, y)
  c = relu(a)
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
