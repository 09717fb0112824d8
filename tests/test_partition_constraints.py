"""Partitioning: constants, explicit regions, and spec limits (broadcasting, dtype, rank, attributes)."""

from __future__ import annotations

import numpy as np
import pytest
from partition_support import (
    BROADCAST,
    CONSTANTS,
    EXPLICIT,
    assert_equivalent,
    assert_same,
    graph,
    host_ops,
    part,
    random_inputs,
    region_calls,
    run_built,
    summary,
    symbols,
)

from byoc.api import evaluate, load_backend

# ------------------------------------------------------------------ constants


def test_constant_used_only_in_a_region_moves_in():
    original = graph(CONSTANTS)
    program = part(original, "ccompiler")
    (fn,) = program.functions
    (call,) = region_calls(fn)
    # k is only used by the region: it moves in; j is also used by the host: it stays
    assert [c.name for c in call.callee.constants] == ["k"]
    assert [c.name for c in fn.constants] == ["j"]
    assert call.inputs == ("x", "j")
    assert host_ops(fn) == ["abs"]
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
    calls = region_calls(fn)
    assert [call.inputs for call in calls] == [("x", "k", "j"), ("j",)]
    assert not any(call.callee.constants for call in calls)
    assert [c.name for c in fn.constants] == ["k", "j"]

    text = """\
    graph main(x: float32[4], y: float32[4]) {
      k = const float32[4] [1, 2, 3, 4]
      a = add(x, k)
      b = subtract(a, y)
      c = leaky_relu(a)
      d = leaky_relu(b)
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
        (None, ("leaky_relu",), ("c",)),
        (None, ("leaky_relu",), ("d",)),
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
      j1 = leaky_relu(x)
      e1 = add(j1, y)
      e2 = subtract(x, y)
      e3 = multiply(e1, e2)
      n = concatenate(j1, e2, axis=0)
      return e3, n
    }
    """
    original = graph(text)
    program = part(original, "examplejson", "json")
    (fn,) = program.functions
    assert summary(fn) == [
        ("examplejson", ("subtract",), ("x", "y"), ("e2",)),
        ("json", ("leaky_relu", "concatenate"), ("x", "e2"), ("j1", "n")),
        ("examplejson", ("add",), ("j1", "y"), ("e1",)),
        ("examplejson", ("multiply",), ("e1", "e2"), ("e3",)),
    ]
    assert_equivalent(original, program)
    inputs = random_inputs(original.functions[0])
    assert_same(run_built(original, ["examplejson", "json"], inputs), evaluate(original.functions[0], inputs))


# ------------------------------------------------------------------ explicit regions


def test_explicit_regions_win():
    original = graph(EXPLICIT)
    program = part(original, "ccompiler")
    (fn,) = program.functions
    assert [(b, ops) for b, ops, *_ in summary(fn)] == [
        ("json", ("add",)),
        ("ccompiler", ("add",)),
        (None, ("abs",)),
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
    graph main(a: int32[2, 2], b: int32[2, 2], x: float32[2, 2, 2], y: float32[2, 2, 2],
               z: float32[1, 1, 1, 1, 1, 1, 1, 1, 2]) {
      i = add(a, b)
      f = subtract(x, y)
      g = multiply(z, z)
      return i, f, g
    }
    """
    # engine and examplejson: float32 only; every backend: ranks 0 to 8 (z has rank 9)
    assert [b for b, *_ in summary(part(text, "engine").functions[0])] == [None, "engine", None]
    assert [b for b, *_ in summary(part(text, "examplejson").functions[0])] == [None, "examplejson", None]
    assert [b for b, *_ in summary(part(text, "engine", "examplejson", "ccompiler").functions[0])] == [
        "ccompiler",
        "engine",  # the first backend listed that takes it
        None,
    ]


def test_attributes_need_a_kind_that_carries_them():
    text = "graph main(x: float32[2]) {\n  return concatenate(x, x, axis=0)\n}\n"
    assert not region_calls(part(text, "examplejson", "ccompiler").functions[0])
    assert region_calls(part(text, "json").functions[0])
