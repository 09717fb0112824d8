"""The dnnl backend's channels_last layout (spec/backends/dnnl.yaml, `layouts:`): inside
one function, a value made and read only by packed convolutions and 2-D pools stays
nhwc between them, so oneDNN reorders it neither out of nor back into nchw; parameters,
outputs and values any other kernel reads stay plain. Each case checks which values the
generated body keeps channels_last (its comment says), then runs the code against the
numpy reference.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_array
from libraries import missing_library
from test_layouts import body_layouts

import byoc
from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.generator.partition import partition
from byoc.ir import Program

if missing_library("dnnl"):
    pytest.skip(missing_library("dnnl"), allow_module_level=True)

from test_gen_dnnl import BACKEND, assert_close, const, generate  # noqa: E402 - after the skip


def weights(channels: int, seed: int = 3) -> str:
    """The constants every case's convolutions share: w (3x3), p (1x1) and a batch_norm."""
    rng = np.random.default_rng(seed)
    c = channels
    return f"""\
  w = {const(rng, (c, c, 3, 3), -0.1, 0.1)}
  p = {const(rng, (c, c, 1, 1), -0.3, 0.3)}
  s = {const(rng, (c,), 0.5, 1.5)}
  t = {const(rng, (c,), -0.2, 0.2)}
  m = {const(rng, (c,), -0.2, 0.2)}
  v = {const(rng, (c,), 0.5, 2.0)}
"""


def graph(body: str, returns: str, channels: int = 32, size: int = 8) -> str:
    return (
        f"graph main(x: float32[1, {channels}, {size}, {size}]) {{\n{weights(channels)}{body}"
        f"  return {returns}\n}}\n"
    )


# name -> (graph, the values the body keeps channels_last)
CASES = {
    # a chain of packed convolutions: everything between the parameter and the output
    "chain": (
        graph(
            "  a = relu(batch_norm(conv(x, w, pads=[1, 1, 1, 1]), s, t, m, v))\n"
            "  b = relu(conv(a, p))\n"
            "  c = batch_norm(conv(b, w, strides=[2, 2], pads=[1, 1, 1, 1]), s, t, m, v)\n",
            "c",
        ),
        {"a", "b"},
    ),
    # a is an output and read by a conv: plain
    "output_and_read": (
        graph(
            "  a = relu(conv(x, p))\n  b = relu(conv(a, w, pads=[1, 1, 1, 1]))\n  c = conv(b, p)\n", "a, c"
        ),
        {"b"},
    ),
    # a feeds two convs
    "two_readers": (
        graph(
            "  a = relu(conv(x, p))\n"
            "  b = relu(batch_norm(conv(a, w, pads=[1, 1, 1, 1]), s, t, m, v))\n"
            "  c = batch_norm(conv(a, p, strides=[2, 2]), s, t, m, v)\n",
            "b, c",
        ),
        {"a"},
    ),
    # a ResNet stem and bottleneck: max_pool between convs, its result the residual (in6)
    "residual_and_pool": (
        graph(
            "  a = relu(batch_norm(conv(x, w, pads=[1, 1, 1, 1]), s, t, m, v))\n"
            "  q = max_pool(a, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])\n"
            "  b = relu(batch_norm(conv(q, p), s, t, m, v))\n"
            "  c = relu(batch_norm(conv(b, w, pads=[1, 1, 1, 1]), s, t, m, v))\n"
            "  d = relu(add(batch_norm(conv(c, p), s, t, m, v), q))\n"
            "  e = relu(add(batch_norm(conv(d, p), s, t, m, v), c))\n",
            "e",
            size=9,
        ),
        {"a", "q", "b", "c", "d"},
    ),
    # a 2-D pool takes its source and result in one layout (`mixed_layouts: false`:
    # oneDNN pools mixed ones with its reference code): one of the parameter x is
    # plain, and so is q, which the conv reads
    "pool_of_a_parameter": (
        graph(
            "  q = max_pool(x, kernel_shape=[3, 3], strides=[2, 2])\n"
            "  b = relu(conv(q, p))\n"
            "  c = relu(conv(b, w, pads=[1, 1, 1, 1]))\n",
            "c",
            size=9,
        ),
        {"b"},
    ),
    # the pool's result is an output (plain): so is its source a
    "pool_into_an_output": (
        graph("  a = relu(conv(x, p))\n  q = max_pool(a, kernel_shape=[2, 2], strides=[2, 2])\n", "q"),
        set(),
    ),
    # a (1, C, 1, 1) result has the same bytes in either layout: a stays channels_last
    "global_pool_into_an_output": (
        graph("  a = relu(conv(x, p))\n  g = avg_pool(a, kernel_shape=[8, 8])\n", "g"),
        {"a"},
    ),
    # a SqueezeNet fire module: a squeeze conv, two expand convs and their concatenation
    # along the channels (concat2, one concat primitive), which the next conv reads;
    # then a pool and a concatenation along the rows: all channels_last
    "fire_module": (
        graph(
            f"  p2 = {const(np.random.default_rng(5), (32, 64, 1, 1), -0.2, 0.2)}\n"
            "  s1 = relu(conv(x, p))\n"
            "  e1 = relu(conv(s1, p))\n"
            "  e3 = relu(conv(s1, w, pads=[1, 1, 1, 1]))\n"
            "  f = concatenate(e1, e3, axis=1)\n"
            "  q = max_pool(relu(conv(f, p2)), kernel_shape=[2, 2], strides=[2, 2])\n"
            "  r = relu(conv(q, p))\n"
            "  g = concatenate(q, r, axis=2)\n",
            "relu(conv(g, p))",
        ),
        {"s1", "e1", "e3", "f", "relu_0", "q", "r", "g"},
    ),
    # a concatenation takes its inputs and result in one layout (`mixed_layouts: false`):
    # one input is the parameter x (plain), so the other and the result are plain too
    "concat_of_a_parameter": (
        graph("  a = relu(conv(x, p))\n  f = concatenate(a, x, axis=2)\n", "relu(conv(f, p))"),
        set(),
    ),
    # softmax takes no layout: a stays plain; b only feeds softmax too
    "softmax_reader": (
        graph(
            "  a = relu(conv(x, p))\n  b = conv(a, p)\n  c = softmax(b, axis=1)\n  e = softmax(a, axis=1)\n",
            "c, e",
        ),
        set(),
    ),
}


def program_of(text: str) -> Program:
    return partition(parse(text, "graph", file="layouts.graph"), [load_backend(BACKEND)], load_catalog())


@pytest.mark.parametrize("case", CASES)
def test_values_between_packed_convolutions_stay_channels_last(case, rng):
    text, want = CASES[case]
    program = program_of(text)
    assert sum(n.callee is not None for n in program.functions[0].nodes) == 1  # one region
    generated = generate(program)
    assert {k for k, layout in body_layouts(generated).items() if layout == "channels_last"} == want
    model = byoc.build(program)
    fn = program.functions[0]
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    got, expected = model(**inputs), evaluate(fn, inputs)
    assert len(got) == len(expected)
    for g, w in zip(got, expected):
        assert_close(g, w)


def test_golden(golden):
    """Two 1x1 convolutions of 4 channels: their value in between is nhwc."""
    p = const(np.random.default_rng(3), (4, 4, 1, 1), -0.3, 0.3)
    text = (
        f"graph main(x: float32[1, 4, 3, 3]) {{\n  p = {p}\n  a = relu(conv(x, p))\n  return conv(a, p)\n}}\n"
    )
    assert generate(program_of(text)) == golden("c")
