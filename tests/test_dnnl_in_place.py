"""A residual convolution writes its result over its residual (the dnnl spec's
`overwrites:` on the DNNL_CONV2D_*SUM* macros, generator/memory_plan.py): when the
conv is the residual's last reader, and both have one layout, the function's memory
plan gives the result the residual's buffer, and the kernel adds it with a sum post-op
where it sits (dnnl_byoc_packed_conv_t's `in_place`) instead of reading it into a
result buffer of its own. Each case checks which values share a buffer in the
generated body, then runs the code against the numpy reference.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import random_array
from libraries import missing_library

import byoc
from byoc.api import evaluate

if missing_library("dnnl"):
    pytest.skip(missing_library("dnnl"), allow_module_level=True)

from test_dnnl_attention import has_avx512  # noqa: E402
from test_gen_dnnl import assert_close, generate  # noqa: E402 - after the skip
from test_layouts_dnnl import graph, program_of  # noqa: E402

# name -> (graph, pairs of values that must share a buffer, pairs that must not)
CASES = {
    # q dies at d's conv: d takes q's buffer (the conv, batch_norm, add and relu)
    "bottleneck": (
        graph(
            "  q = relu(conv(x, p))\n"
            "  b = relu(batch_norm(conv(q, p), s, t, m, v))\n"
            "  d = relu(add(batch_norm(conv(b, w, pads=[1, 1, 1, 1]), s, t, m, v), q))\n",
            "relu(conv(d, p))",
        ),
        {("q", "d")},
        set(),
    ),
    # without a batch_norm (DNNL_CONV2D_SUM_PACKED), twice in a row
    "two_blocks": (
        graph(
            "  q = relu(conv(x, p))\n"
            "  c = relu(conv(q, p))\n"
            "  d = relu(add(conv(c, w, pads=[1, 1, 1, 1]), q))\n"
            "  g = relu(conv(d, p))\n"
            "  e = relu(add(conv(g, p), d))\n",
            "relu(conv(e, p))",
        ),
        {("q", "d"), ("d", "e")},
        set(),
    ),
    # q is read again after d: d gets a buffer of its own; e, q's last reader, takes q's
    "read_later": (
        graph(
            "  q = relu(conv(x, p))\n"
            "  c = relu(conv(q, p))\n"
            "  d = relu(add(conv(c, p), q))\n"
            "  e = relu(add(conv(relu(conv(d, p)), p), q))\n",
            "relu(conv(e, p))",
        ),
        {("q", "e")},
        {("q", "d")},
    ),
    # the result is an output: never shared
    "into_an_output": (
        graph("  q = relu(conv(x, p))\n  c = relu(conv(q, p))\n  d = relu(add(conv(c, p), q))\n", "d"),
        set(),
        {("q", "d")},
    ),
    # q is plain (softmax reads it too, and takes no layout), d channels_last: the
    # kernel reorders q into the conv's layout, so d keeps a buffer of its own
    "other_layouts": (
        graph(
            "  a = relu(conv(x, p))\n  q = softmax(a, axis=1)\n  d = relu(add(conv(a, p), q))\n",
            "relu(conv(d, p))",
        ),
        set(),
        {("q", "d")},
    ),
}


def buffers(text: str) -> dict[str, str]:
    """Value -> the buffer the generated body keeps it in (from the buffers' comments)."""
    found = {}
    for buf, names in re.findall(r"float\* const (buf\d+) = .*/\* holds (.*) \*/", text):
        assert "..." not in names, "a case small enough that every name is listed"
        found.update((name.strip(), buf) for name in names.split(","))
    return found


@pytest.mark.parametrize("case", CASES)
def test_a_residual_conv_overwrites_its_residual_where_it_may(case, rng):
    text, shared, apart = CASES[case]
    program = program_of(text)
    assert sum(n.callee is not None for n in program.functions[0].nodes) == 1  # one region
    where = buffers(generate(program))
    for a, b in shared:
        assert where[a] == where[b], f"{b} should take {a}'s buffer"
    for a, b in apart:
        assert where.get(a) is None or where[a] != where.get(b), f"{b} must not take {a}'s buffer"
    model = byoc.build(program)
    fn = program.functions[0]
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    for _ in range(2):  # the second call finds the first's results in the buffers
        got, expected = model(**inputs), evaluate(fn, inputs)
        for g, w in zip(got, expected, strict=True):
            assert_close(g, w)


@pytest.mark.skipif(
    not has_avx512(),
    reason="the sum primitive needs oneDNN's conv in the kernel's nhwc layout (its brgconv, AVX-512); "
    "elsewhere a call copies the residual aside and keeps the binary post-op",
)
def test_the_conv_adds_an_overwritten_residual_by_a_sum_post_op(tmp_path):
    """Where the result takes the residual's buffer, the conv runs with a sum post-op
    (ONEDNN_VERBOSE names each primitive's post-ops at its call); where it does not,
    with the binary one reading the residual where it is."""
    script = tmp_path / "run.py"
    script.write_text(
        "import numpy as np, byoc, sys\n"
        "from byoc.api import load_backend, load_catalog, parse\n"
        "from byoc.generator.partition import partition\n"
        f"program = partition(parse({CASES['read_later'][0]!r}, 'graph'), [load_backend('dnnl')], load_catalog())\n"
        "inputs = {p.name: np.ones(p.type.shape, np.float32) for p in program.functions[0].params}\n"
        "byoc.build(program)(**inputs)\n"
    )
    env = {**os.environ, "ONEDNN_VERBOSE": "1"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, check=True)
    convs = [
        line for line in out.stdout.splitlines() if line.startswith("onednn_verbose,exec,cpu,convolution,")
    ]
    assert len(convs) == 6, out.stdout[-2000:]
    # d reads q, which e reads after it: binary; e is q's last reader: sum
    assert sum("attr-post-ops:sum+eltwise_relu" in line for line in convs) == 1, "\n".join(convs)
    assert sum("attr-post-ops:binary_add" in line for line in convs) == 1, "\n".join(convs)
