"""Composite patterns (a backend spec's ``patterns:``, TVM's MergeComposite).

Partitioning matches the patterns before single ops, largest first, deterministically;
a match needs its interior values used by it alone (but an elementwise leaf it may
compute again) and its conditions to hold. A match
is a composite inside its region (``y = @ccompiler.<pattern> { ... }``), which prints,
parses back, draws and generates one kernel call. Everything that runs is compared
with the numpy reference, and the same graphs built without the patterns must give the
same bits. The matching rules and the random graphs: tests/test_composites_matching.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from compile_util import module_artifact
from composites_support import composites, partitioned, random_constant
from partition_support import graph, random_inputs

from byoc.api import evaluate, load_backend, load_catalog, parse, print_program
from byoc.building import build
from byoc.errors import GraphError
from byoc.generator import generator_for
from byoc.generator.dot import dot_program
from byoc.generator.lowering import lower
from byoc.generator.partition import partition

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
REPO = EXAMPLES.parent


def composites_graph() -> str:
    """conv_bias_relu (constant weights and bias), conv_add_relu (a residual, parameter
    weights), dense_bias_relu and dense_bias: one of each of the shipped patterns that
    the examples do not use, in one graph."""
    rng = np.random.default_rng(7)
    return f"""\
graph main(x: float32[1, 3, 6, 6], w2: float32[4, 3, 3, 3], r: float32[1, 4, 3, 3],
           a: float32[2, 6], w3: float32[5, 6], b3: float32[5], w4: float32[3, 5], b4: float32[3]) {{
  w = {random_constant(rng, (4, 3, 3, 3))}
  bias = {random_constant(rng, (4,))}
  c = conv(x, w, pads=[1, 1, 1, 1])
  y1 = relu(bias_add(c, bias))
  y2 = relu(add(conv(x, w2, strides=[2, 2], pads=[1, 1, 0, 0]), r))
  h = relu(bias_add(dense(a, w3), b3, axis=-1))
  return y1, y2, bias_add(dense(h, w4), b4)
}}
"""


# ------------------------------------------------------------------ the shipped examples


@pytest.mark.parametrize(
    ("example", "want"),
    [
        ("mlp", ["dense_bias_relu", "dense_bias_relu", "dense_bias"]),
        ("resnet_basic_block", ["conv_bn_relu", "conv_bn_add_relu"]),
    ],
)
def test_examples_partition_into_composites(example, want, golden, capsys):
    """`byoc partition --backend ccompiler` prints the composites, and runs them."""
    from conftest import run_cli

    path = EXAMPLES / f"{example}.graph"
    status, out, _ = run_cli(capsys, "partition", path, "--backend", "ccompiler")
    assert status == 0
    assert re.findall(r"= @ccompiler\.(\w+) \{", out) == want
    assert out == golden("graph")
    status, out, _ = run_cli(capsys, "run", path, "--backend", "ccompiler")
    assert status == 0 and "result: every output matches the numpy reference" in out


@pytest.mark.parametrize("example", ["mlp", "resnet_basic_block"])
def test_partitioned_text_reads_back(example):
    program = parse((EXAMPLES / f"{example}.graph").read_text(), "graph")
    done = partition(program, [load_backend("ccompiler")], load_catalog())
    assert parse(print_program(done), "graph") == done


# ------------------------------------------------------------------ a graph of every other pattern


def test_composites_graph_golden_and_runs(golden, tmp_path):
    """The partitioned text and the C are golden; the C compiles under the spec's
    -Wall -Wextra -Werror and equals the reference."""
    source = parse(composites_graph(), "graph", file="composites.graph")
    done = partition(source, [load_backend("ccompiler")], load_catalog())
    assert [name for name, _ in composites(done)] == [
        "conv_bias_relu",
        "conv_add_relu",
        "dense_bias_relu",
        "dense_bias",
    ]
    text = print_program(done)
    assert text == golden("graph")
    assert parse(text, "graph", file="composites.graph") == done
    spec = load_backend("ccompiler")
    externals = lower(done, load_backend, load_catalog()).externals_for("ccompiler")
    artifact = module_artifact(generator_for(spec.kind)(externals, spec, load_catalog(), {}))
    assert artifact.text == golden("c")
    assert artifact.text.count("\nCSOURCE_CONV2D_THEN_RELU(") == 2
    assert artifact.text.count("\nCSOURCE_DENSE_BIAS(") == 2
    (fn,) = source.functions
    inputs = random_inputs(fn, seed=3)
    got = build(done, backends=["ccompiler"])(**inputs)
    for g, w in zip(got, evaluate(fn, inputs, load_catalog())):
        np.testing.assert_array_equal(g, w)


def test_a_constant_two_regions_need_constant_is_copied_into_each(rng):
    """Two independent conv_bias_relu (whose weights and bias must be constants) share
    their constants: each region gets a copy, rather than both capturing them as
    parameters, where the pattern would no longer match."""
    text = f"""\
graph main(x: float32[1, 3, 6, 6], y: float32[1, 3, 6, 6]) {{
  w = {random_constant(rng, (4, 3, 3, 3))}
  b = {random_constant(rng, (4,))}
  return relu(bias_add(conv(x, w), b, axis=1)), relu(bias_add(conv(y, w), b, axis=1))
}}
"""
    source = parse(text, "graph")
    done = partition(source, [load_backend("ccompiler")], load_catalog())
    regions = [n.callee for n in done.functions[0].nodes if n.callee is not None]
    assert len(regions) == 2
    assert all({c.name for c in r.constants} == {"w", "b"} and not r.params[1:] for r in regions)
    assert done.functions[0].constants == ()
    assert parse(print_program(done), "graph") == done
    (fn,) = source.functions
    inputs = random_inputs(fn, seed=5)
    got = build(done, backends=["ccompiler"])(**inputs)
    for g, w in zip(got, evaluate(fn, inputs, load_catalog())):
        np.testing.assert_array_equal(g, w)


def test_dot_draws_composites_inside_their_region(golden):
    done = partitioned(composites_graph(), "ccompiler")
    text = dot_program(done)
    assert text == golden("dot")
    region = text.index('label="@ccompiler')
    for name in ("conv_bias_relu", "conv_add_relu", "dense_bias_relu", "dense_bias"):
        at = text.index(f'label="@ccompiler.{name}"; style="rounded,dashed,filled"')
        assert at > region


def test_composite_written_by_hand_is_checked_and_runs():
    text = """\
    graph main(a: float32[2, 6], w: float32[5, 6], b: float32[5]) {
      y = @ccompiler {
        h = @ccompiler.dense_bias_relu {
          return relu(bias_add(dense(a, w), b))
        }
        return h
      }
      return y
    }
    """
    program = graph(text)
    (fn,) = program.functions
    inputs = random_inputs(fn)
    got = build(program, backends=[])(**inputs)
    np.testing.assert_array_equal(got[0], evaluate(fn, inputs, load_catalog())[0])
    wrong = graph(text.replace("bias_add(dense(a, w), b)", "add(dense(a, w), b)"))
    with pytest.raises(GraphError, match="does not match its pattern"):
        lower(wrong, load_backend, load_catalog())
    with pytest.raises(GraphError, match="is inside a region of backend json"):
        graph(text.replace("y = @ccompiler {", "y = @json {"))


def test_backends_lists_the_patterns(capsys):
    from conftest import run_cli

    status, out, _ = run_cli(capsys, "backends", "ccompiler")
    assert status == 0
    listed = out[out.index("  patterns (composites, matched largest first):") :].splitlines()[1:]
    assert [line.split(":")[0].strip() for line in listed] == list(load_backend("ccompiler").patterns)
    assert "conv_bias_relu: conv -> bias_add -> relu; when conv.groups == 1" in out


@pytest.mark.parametrize(
    ("weights", "groups", "message"),
    [
        ("w", 2, r"when: conv.groups == 1 is false \(conv.groups = 2\)"),
        ("p", 1, "pattern input w must be a constant, but p is not"),
    ],
    ids=["groups-2", "weights-not-constant"],
)
def test_a_composite_written_by_hand_must_meet_its_conditions(weights, groups, message):
    text = f"""\
    graph main(x: float32[1, 4, 5, 5], p: float32[4, {4 // groups}, 3, 3]) {{
      y = @ccompiler {{
        w = const float32[4, {4 // groups}, 3, 3] 0.5
        b = const float32[4] [1, 2, 3, 4]
        h = @ccompiler.conv_bias_relu {{
          return relu(bias_add(conv(x, {weights}, groups={groups}), b))
        }}
        return h
      }}
      return y
    }}
    """
    with pytest.raises(GraphError, match=message):
        lower(graph(text), load_backend, load_catalog())


def test_a_composite_reading_an_anonymous_value_builds_and_runs(rng):
    """The composite's body numbers its own anonymous values afresh; the anonymous value
    it reads (the relu here) gets a readable name, so the two never collide."""
    source = "graph main(x: float32[3, 5], w: float32[4, 5], b: float32[4]) {\n"
    source += "  return bias_add(dense(negative(x), w), b, axis=1)\n}\n"
    program = partition(parse(source, "graph"), [load_backend("ccompiler")], load_catalog())
    text = print_program(program)
    assert "@ccompiler.dense_bias {" in text and "negative_0 = negative(x)" in text
    assert parse(text, "graph") == program
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((3, 5), (4, 5), (4,)))
    (got,) = build(program)(x=x, w=w, b=b)
    (want,) = evaluate(parse(source, "graph").functions[0], {"x": x, "w": w, "b": b})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
