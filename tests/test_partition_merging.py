"""Partitioning: merging offloadable nodes into the largest regions without creating cycles."""

from __future__ import annotations

import numpy as np
import pytest
from partition_support import (
    BIG_CYCLE,
    CYCLE,
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

from byoc.api import evaluate, load_backend, parse, print_program
from byoc.ir import Function

# ------------------------------------------------------------------ merging and cycles


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
        (None, ("abs",), ("a",), ("b",)),
        ("ccompiler", ("add",), ("a", "b"), ("c",)),
    ]
    assert symbols(program) == ["ccompiler_0", "ccompiler_1"]
    assert_equivalent(original, program)
    inputs = random_inputs(original.functions[0])
    (out,) = run_built(original, ["ccompiler"], inputs)
    a = inputs["x"] + inputs["y"]
    np.testing.assert_allclose(out, a + np.abs(a), rtol=1e-6)


def test_cycle_classic_with_json_for_the_middle():
    """With json taking abs, the middle node is a region of its own; still no cycle."""
    program = part(CYCLE, "ccompiler", "json")
    assert [(b, ops) for b, ops, *_ in summary(program.functions[0])] == [
        ("ccompiler", ("add",)),
        ("json", ("abs",)),
        ("ccompiler", ("add",)),
    ]
    # json alone takes everything
    assert [b for b, *_ in summary(part(CYCLE, "json").functions[0])] == ["json"]


def test_cycle_bigger():
    original = graph(BIG_CYCLE)
    assert naive_has_cycle(original.functions[0], {"add", "subtract", "multiply"})
    program = part(original, "ccompiler")
    (fn,) = program.functions
    assert summary(fn) == [
        ("ccompiler", ("add", "subtract", "multiply"), ("x", "y", "z"), ("a", "b", "c")),
        (None, ("abs",), ("b",), ("h1",)),
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
  h1 = abs(a1)
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
        (None, ("abs",), ("a1",), ("h1",)),
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
        ("a = add(x, y)\n  b = abs(a)\n  c = multiply(b, y)\n  return c", "ccompiler", 2),
        # json takes everything: one region, whatever the shape of the graph
        (
            "a = add(x, y)\n  b = abs(a)\n  c = concatenate(a, b, axis=1)\n  d = negative(c)\n  return d, a",
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
      c = abs(a)
      d = abs(b)
      return c, d, b
    }
    """
    original = graph(text)
    program = part(original, "ccompiler")
    (fn,) = program.functions
    assert summary(fn)[0] == ("ccompiler", ("add", "subtract"), ("x", "y"), ("a", "b"))
    assert host_ops(fn) == ["abs", "abs"]
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
      return add(abs(add(x, y)), negative(subtract(x, y)))
    }
    """
    original = graph(text)
    program = part(original, "ccompiler")
    (fn,) = program.functions
    assert summary(fn) == [
        ("ccompiler", ("add",), ("x", "y"), ("add_0",)),
        (None, ("abs",), ("add_0",), ("abs_0",)),
        ("ccompiler", ("subtract",), ("x", "y"), ("subtract_0",)),
        (None, ("negative",), ("subtract_0",), ("negative_0",)),
        ("ccompiler", ("add",), ("abs_0", "negative_0"), ("add_1",)),
    ]
    assert fn.outputs == ("add_1",)
    assert_equivalent(original, program)
