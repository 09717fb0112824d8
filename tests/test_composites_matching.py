"""Which chains a spec's composite patterns match: the largest first, ties by order,
interior values used by the match alone, conditions, constants and macros that fit; random
layer graphs built with and without the patterns give the same bits."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
from composites_support import composites, partitioned, random_constant
from conftest import EXAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from partition_support import graph, random_inputs

from byoc.api import evaluate, load_backend, load_catalog, parse, print_program
from byoc.building import build
from byoc.errors import GraphError
from byoc.generator.partition import partition
from byoc.spec import SHIPPED_BACKENDS


def spec_variant(directory: Path, name: str, patterns: str | None) -> Path:
    """A copy of the shipped ccompiler spec named ``name``, with ``patterns`` (YAML text
    of the `patterns:` mapping's entries) instead of its own, or with none."""
    text = (SHIPPED_BACKENDS / "ccompiler.yaml").read_text(encoding="utf-8")
    text = (
        text[: text.index("\n# Composite patterns")] + text[text.index("\n# The macros, as in the guide") :]
    )
    text = re.sub(r"(?m)^name: ccompiler", f"name: {name}", text)
    text = re.sub(r"(?m)^symbol_prefix: ccompiler", f"symbol_prefix: {name}", text)
    if patterns is not None:
        text += "patterns:\n" + textwrap.indent(textwrap.dedent(patterns), "  ")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.yaml").write_text(text, encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def specs_dir(tmp_path_factory) -> Path:
    """``nopat``: ccompiler without patterns; ``ties``/``ties_swapped``: two identical
    patterns in either order; ``twice``: relu(relu(x)), for the order of nodes."""
    out = tmp_path_factory.mktemp("pattern-specs")
    spec_variant(out, "nopat", None)
    same = """\
        {name}:
          inputs: [x, w, b]
          match: "return relu(bias_add(dense(x, w), b))"
          macros: {{2: CSOURCE_DENSE_BIAS}}
          vars: {{act: "v > 0 || v != v ? v : 0"}}
        """
    first, second = (textwrap.dedent(same.format(name=n)) for n in ("first", "second"))
    spec_variant(out, "ties", first + second)
    spec_variant(out, "ties_swapped", second + first)
    twice = """\
        twice:
          inputs: [x]
          match: "return relu(relu(x))"
          macros: {default: CSOURCE_UNARY_OP_ND}
          vars: {expr: "v > 0 || v != v ? v : 0"}
        """
    spec_variant(out, "twice", twice)
    return out


# ------------------------------------------------------------------ matching rules


DENSE_CHAIN = """\
graph main(x: float32[4, 6], w: float32[5, 6], b: float32[5]) {
  return relu(bias_add(dense(x, w), b))
}
"""


def test_largest_pattern_first():
    """dense_bias (2 ops) also matches, but dense_bias_relu (3) is tried first."""
    assert composites(partitioned(DENSE_CHAIN, "ccompiler")) == [
        ("dense_bias_relu", ("dense", "bias_add", "relu"))
    ]


def test_ties_go_to_the_first_pattern_of_the_spec(specs_dir):
    assert [n for n, _ in composites(partitioned(DENSE_CHAIN, "ties", spec_path=[specs_dir]))] == ["first"]
    swapped = partitioned(DENSE_CHAIN, "ties_swapped", spec_path=[specs_dir])
    assert [n for n, _ in composites(swapped)] == ["second"]


def test_ties_go_to_the_first_spec(specs_dir):
    both = partitioned(DENSE_CHAIN, "ties_swapped", "ccompiler", spec_path=[specs_dir])
    assert [n for n, _ in composites(both)] == ["second"]
    assert [fn.nodes[0].callee.backend for fn in both.functions] == ["ties_swapped"]


def test_overlapping_matches_go_in_node_order(specs_dir):
    text = """\
    graph main(x: float32[4]) {
      a = relu(x)
      b = relu(a)
      return relu(b)
    }
    """
    done = partitioned(text, "twice", spec_path=[specs_dir])
    (fn,) = done.functions
    (region,) = fn.nodes
    assert [(n.op, n.callee.composite if n.callee else None, n.outputs) for n in region.callee.nodes] == [
        ("call", "twice", ("b",)),
        ("relu", None, ("relu_0",)),
    ]
    assert [n.outputs for n in region.callee.nodes[0].callee.nodes] == [("a",), ("b",)]
    assert done == partitioned(text, "twice", spec_path=[specs_dir])  # deterministic


@pytest.mark.parametrize(
    "outside",
    ["return y, d", "return add(y, exp(d))"],
    ids=["an-output", "another-node"],
)
def test_a_consumer_outside_the_match_blocks_it(outside):
    text = f"""\
    graph main(x: float32[4, 6], w: float32[5, 6], b: float32[5]) {{
      d = dense(x, w)
      y = relu(bias_add(d, b))
      {outside}
    }}
    """
    assert composites(partitioned(text, "ccompiler")) == []


def test_an_elementwise_leaf_used_outside_is_computed_again(specs_dir):
    """twice = relu(relu(x)): its inner relu reads a pattern input only, so a match may
    share it: the composite computes its own, and ``a`` stays for exp."""
    text = """\
    graph main(x: float32[4, 6]) {
      a = relu(x)
      b = relu(a)
      return b, exp(a)
    }
    """
    done = partitioned(text, "twice", spec_path=[specs_dir])
    assert composites(done) == [("twice", ("relu", "relu"))]
    assert plain_ops(done) == [("relu", ("a",)), ("exp", ("exp_0",))]
    assert "b = relu(relu(x))" in print_program(done)
    assert parse(print_program(done), "graph", spec_path=[specs_dir]) == done
    _same_as_reference(text, done, [specs_dir])


def test_a_leaf_every_user_of_which_shares_it_is_dropped(specs_dir):
    """Two matches share ``a``; no other node reads it, so the outer one goes."""
    text = """\
    graph main(x: float32[4, 6]) {
      a = relu(x)
      return relu(a), relu(a)
    }
    """
    done = partitioned(text, "twice", spec_path=[specs_dir])
    assert composites(done) == [("twice", ("relu", "relu"))] * 2
    assert plain_ops(done) == []
    _same_as_reference(text, done, [specs_dir])


def plain_ops(program) -> list[tuple[str, tuple[str, ...]]]:
    """(op, outputs) of every node outside a composite, in the regions and on the host."""
    return [
        (inner.op, inner.outputs)
        for node in program.functions[0].nodes
        for inner in (node.callee.nodes if node.callee is not None else [node])
        if inner.callee is None
    ]


def _same_as_reference(text: str, done, spec_path) -> None:
    (fn,) = graph(text).functions
    inputs = random_inputs(fn)
    got = build(done, backends=[], spec_path=spec_path)(**inputs)
    for g, want in zip(got, evaluate(fn, inputs, load_catalog()), strict=True):
        np.testing.assert_array_equal(g, want)


CONV = """\
graph main(x: float32[1, 4, 5, 5], r: float32[1, 4, 5, 5]) {{
  w = const float32[4, {cin}, 3, 3] 0.25
  b = const float32[4] [1, -2, 3, -4]
  y = relu(bias_add(conv(x, {weight}, pads=[1, 1, 1, 1], groups={groups}), b))
  return y
}}
"""


@pytest.mark.parametrize(
    ("weight", "groups", "want"),
    [
        ("w", 1, ["conv_bias_relu"]),
        ("w", 2, []),  # the condition conv.groups == 1 fails
        ("r_w", 1, []),  # the weights are not a constant
    ],
    ids=["holds", "groups-2", "weights-not-constant"],
)
def test_conditions_and_constants(weight, groups, want):
    text = CONV.format(cin=4 // groups, weight=weight, groups=groups)
    if weight == "r_w":
        text = text.replace("r: float32[1, 4, 5, 5]", "r: float32[1, 4, 5, 5], r_w: float32[4, 4, 3, 3]")
    done = partitioned(text, "ccompiler")
    assert [n for n, _ in composites(done)] == want
    (fn,) = graph(text).functions
    inputs = random_inputs(fn)
    got = build(done, backends=[])(**inputs)
    np.testing.assert_array_equal(got[0], evaluate(fn, inputs, load_catalog())[0])


def test_a_bias_along_another_axis_is_not_dense_bias():
    text = """\
    graph main(x: float32[4, 4], w: float32[4, 4], b: float32[4]) {
      return relu(bias_add(dense(x, w), b, axis=0))
    }
    """
    assert composites(partitioned(text, "ccompiler")) == []


# ------------------------------------------------------------------ random graphs


@st.composite
def layer_graphs(draw):
    """Random chains of the ops the shipped patterns match (conv or dense layers, biases,
    batch norms, residual adds, relus), with weights that are parameters or constants,
    groups and bias axes that may break a condition, and values that may also be outputs
    (which blocks a match through them)."""
    conv = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    channels = draw(st.integers(1, 4))
    shape = (1, channels, 4, 4) if conv else (3, channels)
    params = [f"x: float32[{', '.join(map(str, shape))}]"]
    lines: list[str] = []
    same_shape = {"x": shape}
    h, outputs = "x", []
    blocks = [["linear"], ["bias"], ["relu"], ["add"], ["linear", "bias", "relu"], ["linear", "bias"]]
    blocks += [["linear", "add", "relu"]]
    if conv:
        blocks += [["linear", "bn", "relu"], ["linear", "bn", "add", "relu"]]
    kinds = [kind for _ in range(draw(st.integers(1, 4))) for kind in draw(st.sampled_from(blocks))]
    for i, kind in enumerate(kinds):
        constant = draw(st.booleans())

        def operand(name: str, shape_: tuple[int, ...], low: float = -1.0, constant=constant) -> str:
            if constant:
                lines.append(f"  {name} = {random_constant(rng, shape_, low)}")
            else:
                params.append(f"{name}: float32[{', '.join(map(str, shape_))}]")
            return name

        if kind == "linear":
            out = draw(st.integers(1, 4))
            if conv:
                groups = draw(st.sampled_from([1, channels] if out == channels else [1]))
                w = operand(f"w{i}", (out, channels // groups, 3, 3))
                expr = f"conv({h}, {w}, pads=[1, 1, 1, 1], groups={groups})"
            else:
                expr = f"dense({h}, {operand(f'w{i}', (out, channels))})"
            channels = out
            shape = (1, out, 4, 4) if conv else (3, out)
        elif kind == "bias":
            axis = draw(st.sampled_from([1, -1] if not conv else [1]))
            expr = f"bias_add({h}, {operand(f'b{i}', (channels,))}, axis={axis})"
        elif kind == "bn":
            s, b = operand(f"s{i}", (channels,)), operand(f"c{i}", (channels,))
            m, v = operand(f"m{i}", (channels,)), operand(f"v{i}", (channels,), low=0.5)
            expr = f"batch_norm({h}, {s}, {b}, {m}, {v})"
        elif kind == "add":
            others = [n for n, t in same_shape.items() if t == shape]
            other = draw(st.sampled_from([*others, f"r{i}"]))
            if other == f"r{i}":
                params.append(f"r{i}: float32[{', '.join(map(str, shape))}]")
            expr = f"add({h}, {other})"
        else:
            expr = f"relu({h})"
        h = f"t{i}"
        lines.append(f"  {h} = {expr}")
        same_shape[h] = shape
        if draw(st.integers(0, 4)) == 0:
            outputs.append(h)
    outputs.append(h)
    body = "\n".join(lines)
    return f"graph main({', '.join(params)}) {{\n{body}\n  return {', '.join(dict.fromkeys(outputs))}\n}}\n"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=layer_graphs(), seed=st.integers(0, 2**16))
def test_random_graphs_with_and_without_patterns_agree(specs_dir, text, seed):
    """Built with ccompiler's patterns and with a copy that has none, every output has
    the same bits, and equals the reference."""
    program = parse(text, "graph")
    (fn,) = program.functions
    inputs = random_inputs(fn, seed)
    with_patterns = build(program, backends=["ccompiler"])(**inputs)
    without = build(program, backends=["nopat"], spec_path=[str(specs_dir)])(**inputs)
    for a, b, want in zip(with_patterns, without, evaluate(fn, inputs, load_catalog())):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-5)
    done = partition(program, [load_backend("ccompiler")], load_catalog())
    assert parse(print_program(done), "graph") == done


def test_an_input_computed_inside_the_match_blocks_it():
    """add(c, c): the residual input of conv_add_relu would be the conv's own result."""
    text = """\
    graph main(x: float32[1, 2, 4, 4], w: float32[2, 2, 3, 3]) {
      c = conv(x, w, pads=[1, 1, 1, 1])
      return relu(add(c, c))
    }
    """
    assert composites(partitioned(text, "ccompiler")) == []


def test_an_earlier_backend_keeps_its_ops():
    """With fused preferred, ccompiler's patterns take no op that fused runs."""
    text = (EXAMPLES / "resnet_basic_block.graph").read_text()
    assert composites(partitioned(text, "fused", "ccompiler")) == []
    assert [n for n, _ in composites(partitioned(text, "ccompiler", "fused"))] == [
        "conv_bn_relu",
        "conv_bn_add_relu",
    ]


REORDERED = """\
    dense_bias_relu:
      inputs: [bias, x, w]
      match: "return relu(bias_add(dense(x, w), bias))"
      macros: {2: CSOURCE_DENSE_BIAS}
      vars: {act: "v > 0 || v != v ? v : 0"}
    """


def test_a_pattern_whose_inputs_do_not_fit_its_macro_is_not_matched(tmp_path):
    """The pattern lists the bias first, its macro reads input 0's second axis: a vector
    has none, so the chain runs op by op (as a single op whose macro does not fit), not
    into a KeyError of the template."""
    specs = spec_variant(tmp_path, "reordered", REORDERED)
    text = """\
    graph main(x: float32[4, 6], w: float32[5, 6], b: float32[5]) {
      return relu(bias_add(dense(x, w), b, axis=-1))
    }
    """
    done = partitioned(text, "reordered", spec_path=[specs])
    assert composites(done) == []
    _same_as_reference(text, done, [specs])


def test_a_composite_written_by_hand_whose_macro_does_not_fit_says_why(tmp_path):
    specs = spec_variant(tmp_path, "reordered", REORDERED)
    text = """\
graph main(x: float32[4, 6], w: float32[5, 6], b: float32[5]) {
  y = @reordered {
    h = @reordered.dense_bias_relu {
      return relu(bias_add(dense(x, w), b, axis=-1))
    }
    return h
  }
  return y
}
"""
    with pytest.raises(
        GraphError, match=re.escape("reads ${in0_dim1}, but input 0 of the pattern (bias) is float32[5]")
    ) as info:
        build(parse(text, "graph", spec_path=[specs]), spec_path=[specs])
    assert (info.value.location.line, info.value.location.column) == (3, 5)
