"""The `fused` backend's anchors (every non-elementwise rule) against the numpy reference.

Each hypothesis example draws a batch of small random cases of one rule (strides,
asymmetric pads, dilations, groups, ceil_mode, axes, steps, ...), writes them as the
regions of ONE graph, compiles one module for the batch and compares every region's
outputs with byoc's numpy reference (byoc.api.evaluate). Cases whose attributes the
catalog rejects (a kernel larger than the padded input, ...) are left out of the batch.
Random elementwise epilogues on top of anchors check the fusion.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import tvm_ffi
from compile_util import compile_library
from conftest import random_array
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shipped_fused import FUSED_YAML, SUPPORT, module_of, write_fused_copy

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build
from byoc.errors import ByocError, GraphError
from byoc.generator import generator_for
from byoc.generator.lowering import lower
from byoc.generator.partition import partition
from byoc.ir import CALL_OP

BACKEND = "fused"
REPO = Path(__file__).resolve().parent.parent
SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def shape_text(shape) -> str:
    return ", ".join(map(str, shape))


def ints(values) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


def body_lines(expr: str) -> list[str]:
    """A case's region body: ``expr`` is an expression, or statements ending in a
    ``return`` (one per line; a node of several outputs needs its names bound)."""
    return expr.split("\n") if "return " in expr else [f"return {expr}"]


def output_count(expr: str) -> int:
    """The values the body returns: the commas outside parentheses and brackets, plus one."""
    depth, count = 0, 1
    for char in body_lines(expr)[-1]:
        depth += (char in "([") - (char in ")]")
        count += char == "," and depth == 0
    return count


def case_ok(params: list[tuple[str, str, tuple]], expr: str) -> bool:
    """Whether the catalog accepts ``expr`` on ``params`` (name, dtype, shape)."""
    args = ", ".join(f"{n}: {d}[{shape_text(s)}]" for n, d, s in params)
    body = "".join(f"  {line}\n" for line in body_lines(expr))
    try:
        parse(f"graph g({args}) {{\n{body}}}\n", "graph", file="case.graph")
    except ByocError:
        return False
    return True


def run_batch(cases, tmp_path, *, exact: bool = False) -> int:
    """Compile the valid ``cases`` (each ``(params, expr)``) as the regions of one graph
    and compare each region with the reference; returns how many ran."""
    valid = [(params, expr) for params, expr in cases if case_ok(params, expr)]
    if not valid:
        return 0
    args, lines, outs = [], [], []
    for k, (params, expr) in enumerate(valid):
        renamed = expr
        for name, dtype, shape in params:
            args.append(f"{name}_{k}: {dtype}[{shape_text(shape)}]")
            renamed = _rename(renamed, name, f"{name}_{k}")
        names = ", ".join(f"r{k}_{j}" for j in range(output_count(expr)))
        lines += [f"  {names} = @{BACKEND} {{", *(f"    {line}" for line in body_lines(renamed)), "  }"]
        outs.append(names)
    text = f"graph main({', '.join(args)}) {{\n" + "\n".join(lines) + f"\n  return {', '.join(outs)}\n}}\n"
    program = parse(text, "graph", file="batch.graph")
    externals = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    spec = load_backend(BACKEND)
    artifact = module_of(generator_for(spec.kind)(externals, spec, load_catalog(), spec.option_values()))
    module = tvm_ffi.load_module(
        str(compile_library({"fused.c": artifact.text, **SUPPORT}, "fused.c", tmp_path))
    )
    rng = np.random.default_rng(len(text))
    for fn in externals:
        inputs = {}
        for p in fn.params:
            if any(n.op == "gather" and n.inputs[1] == p.name for n in fn.nodes):  # in range, negatives too
                inputs[p.name] = gather_indices(rng, p.type.shape, p.type.dtype, fn)
            else:
                inputs[p.name] = random_array(rng, p.type.shape, p.type.dtype)
        outputs = [np.full(t.shape, 99, dtype=t.dtype) for t in fn.output_types]
        module[fn.name](*inputs.values(), *outputs)
        for got, want in zip(outputs, evaluate(fn, inputs)):
            assert got.shape == want.shape and got.dtype == want.dtype, fn.name
            if exact or got.dtype.kind == "i":
                np.testing.assert_array_equal(got, want, err_msg=artifact.text)
            else:
                tol = 1e-5 if got.dtype == np.float32 else 1e-12
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=fn.name)
    return len(valid)


def _rename(expr: str, old: str, new: str) -> str:
    return re.sub(rf"\b{old}\b", new, expr)


def gather_indices(rng, shape, dtype, fn) -> np.ndarray:
    (node,) = [n for n in fn.nodes if n.op == "gather"]
    x = fn.types()[node.inputs[0]]
    axis = dict(node.attrs)["axis"]
    size = x.shape[axis]
    return rng.integers(-size, size, size=shape).astype(dtype)


# ------------------------------------------------------------------ strategies

small = st.integers(1, 4)


@st.composite
def conv_case(draw):
    n = draw(st.integers(1, 3))
    groups = draw(st.sampled_from([1, 2, 3]))
    cg, mg = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    depthwise = draw(st.booleans())
    if depthwise:
        cg, mg = 1, 1
    batch = draw(st.integers(1, 2))
    top = 6 if n < 3 else 4
    spatial = [draw(st.integers(1, top)) for _ in range(n)]
    kernel = [draw(st.integers(1, 3)) for _ in range(n)]
    attrs = []
    if draw(st.booleans()):
        attrs.append(f"strides={ints(draw(st.integers(1, 3)) for _ in range(n))}")
    if draw(st.booleans()):
        attrs.append(f"pads={ints(draw(st.integers(0, 2)) for _ in range(2 * n))}")
    if draw(st.booleans()):
        attrs.append(f"dilations={ints(draw(st.integers(1, 2)) for _ in range(n))}")
    dtype = draw(st.sampled_from(["float32", "float64"]))
    transpose = draw(st.booleans())
    x = (batch, cg * groups, *spatial)
    if transpose:
        w = (cg * groups, mg, *kernel)
        if draw(st.booleans()):
            attrs.append(f"output_padding={ints(draw(st.integers(0, 1)) for _ in range(n))}")
        op = "conv_transpose"
    else:
        w = (mg * groups, cg, *kernel)
        op = "conv"
    attrs.append(f"groups={groups}")
    params = [("x", dtype, x), ("w", dtype, w)]
    return params, f"{op}(x, w, {', '.join(attrs)})"


@st.composite
def pool_case(draw):
    n = draw(st.integers(1, 3))
    spatial = [draw(st.integers(1, 6 if n < 3 else 4)) for _ in range(n)]
    kernel = [draw(st.integers(1, 3)) for _ in range(n)]
    op = draw(st.sampled_from(["max_pool", "avg_pool", "global_max_pool", "global_avg_pool"]))
    x = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), *spatial)
    dtype = draw(st.sampled_from(["float32", "float64"]))
    if op.startswith("global"):
        return [("x", dtype, x)], f"{op}(x)"
    attrs = [f"kernel_shape={ints(kernel)}"]
    if draw(st.booleans()):
        attrs.append(f"strides={ints(draw(st.integers(1, 3)) for _ in range(n))}")
    if draw(st.booleans()):
        attrs.append(f"pads={ints(draw(st.integers(0, 1)) for _ in range(2 * n))}")
    if draw(st.booleans()):
        attrs.append(f"dilations={ints(draw(st.integers(1, 2)) for _ in range(n))}")
    if draw(st.booleans()):
        attrs.append("ceil_mode=true")
    if op == "avg_pool" and draw(st.booleans()):
        attrs.append("count_include_pad=true")
    return [("x", dtype, x)], f"{op}(x, {', '.join(attrs)})"


@st.composite
def reduction_case(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(small) for _ in range(rank))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    kind = draw(st.sampled_from(["reduce", "softmax", "lrn"]))
    if kind == "softmax":
        op = draw(st.sampled_from(["softmax", "log_softmax"]))
        return [("x", dtype, shape)], f"{op}(x, axis={draw(st.integers(-rank, rank - 1))})"
    if kind == "lrn" and rank >= 2:
        return [("x", dtype, shape)], f"lrn(x, size={draw(st.integers(1, 5))}, alpha=0.01)"
    op = draw(st.sampled_from(["sum", "mean", "max", "min", "prod"]))
    axes = draw(st.lists(st.integers(-rank, rank - 1), max_size=rank, unique_by=lambda a: a % rank))
    keep = draw(st.booleans())
    return [("x", dtype, shape)], f"{op}(x, axes={ints(axes)}, keepdims={str(keep).lower()})"


@st.composite
def linear_case(draw):
    dtype = draw(st.sampled_from(["float32", "float64"]))
    k = draw(small)
    if draw(st.booleans()):
        lead = tuple(draw(small) for _ in range(draw(st.integers(1, 3)) - 1))
        units = draw(small)
        return [("x", dtype, (*lead, draw(small), k)), ("w", dtype, (units, k))], "dense(x, w)"
    batch_a = tuple(draw(st.sampled_from([1, 2, 3])) for _ in range(draw(st.integers(0, 2))))
    batch_b = tuple(
        draw(st.sampled_from([1, batch_a[i] if i < len(batch_a) else 2])) for i in range(len(batch_a))
    )
    a = (*batch_a, draw(small), k) if draw(st.booleans()) else (k,)
    b = (*batch_b, k, draw(small)) if draw(st.booleans()) else (k,)
    return [("a", dtype, a), ("b", dtype, b)], "matmul(a, b)"


@st.composite
def movement_case(draw):
    dtype = draw(st.sampled_from(["float32", "float64", "int32", "int64"]))
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(small) for _ in range(rank))
    kind = draw(
        st.sampled_from(
            [
                "reshape",
                "flatten",
                "transpose",
                "squeeze",
                "unsqueeze",
                "expand",
                "pad",
                "slice",
                "concatenate",
            ]
        )
    )
    x = [("x", dtype, shape)]
    if kind == "reshape":
        return x, f"reshape(x, newshape=[-1, {shape[-1]}])"
    if kind == "flatten":
        return x, f"flatten(x, axis={draw(st.integers(0, rank))})"
    if kind == "transpose":
        perm = draw(st.permutations(range(rank)))
        return x, f"transpose(x, perm={ints(perm)})" if draw(st.booleans()) else "transpose(x)"
    if kind == "squeeze":
        return [("x", dtype, (*shape, 1))], "squeeze(x)"
    if kind == "unsqueeze":
        return x, f"unsqueeze(x, axes={ints([draw(st.integers(0, rank))])})"
    if kind == "expand":
        ones = tuple(1 if draw(st.booleans()) else d for d in shape)
        return [("x", dtype, ones)], f"expand(x, newshape={ints([2, *shape])})"
    if kind == "pad":
        mode = draw(st.sampled_from(["constant", "reflect", "edge"]))
        top = [max(d - 1, 0) if mode == "reflect" else 2 for d in shape] * 2
        pads = [draw(st.integers(0, t)) for t in top]
        # the fill value must fit the dtype: a whole number for integer tensors
        fill = "1.5" if dtype.startswith("float") else "7.0"
        return x, f'pad(x, pads={ints(pads)}, mode="{mode}", value={fill})'
    if kind == "slice":
        axes = draw(
            st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank, unique_by=lambda a: a % rank)
        )
        starts = [draw(st.integers(-5, 5)) for _ in axes]
        ends = [draw(st.integers(-5, 5)) for _ in axes]
        steps = [draw(st.sampled_from([1, 2, -1, -2])) for _ in axes]
        return (
            x,
            f"slice(x, starts={ints(starts)}, ends={ints(ends)}, axes={ints(axes)}, steps={ints(steps)})",
        )
    axis = draw(st.integers(0, rank - 1))
    other = tuple(d if a != axis else draw(st.integers(0, 3)) for a, d in enumerate(shape))
    return [("x", dtype, shape), ("y", dtype, other)], f"concatenate(x, y, x, axis={axis})"


@st.composite
def split_case(draw):
    """split into 1-3 parts (some possibly empty, or equal parts from the output count),
    each returned as it is or through an elementwise op, and two equal parts added
    (one of them is then read by another nest, from a buffer)."""
    dtype = draw(st.sampled_from(["float32", "float64", "int32", "int64"]))
    rank = draw(st.integers(1, 4))
    shape = [draw(small) for _ in range(rank)]
    axis = draw(st.integers(-rank, rank - 1))
    count = draw(st.integers(1, 3))
    if draw(st.booleans()):
        sizes = [draw(st.integers(0, 3)) for _ in range(count)]
        shape[axis] = sum(sizes)
        attrs = f"axis={axis}, sizes={ints(sizes)}"
    else:
        sizes = None
        attrs = f"axis={axis}"
    parts = [f"s{j}" for j in range(count)]
    outs = [
        draw(st.sampled_from(["{}", "relu({})", "multiply({}, {})", "negative({})"])).format(p, p)
        for p in parts
    ]
    if count > 1 and sizes is not None and sizes[0] == sizes[1] and draw(st.booleans()):
        outs.append("add(s0, s1)")
    body = f"{', '.join(parts)} = split(x, {attrs})\nreturn {', '.join(outs)}"
    return [("x", dtype, tuple(shape))], body


@st.composite
def gather_case(draw):
    dtype = draw(st.sampled_from(["float32", "int64"]))
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(small) for _ in range(rank))
    indices = tuple(draw(small) for _ in range(draw(st.integers(0, 2))))
    index_dtype = draw(st.sampled_from(["int32", "int64"]))
    axis = draw(st.integers(-rank, rank - 1))
    return [("x", dtype, shape), ("i", index_dtype, indices)], f"gather(x, i, axis={axis})"


EPILOGUES = [
    "relu({})",
    "add({}, e)",
    "multiply({}, e)",
    "leaky_relu({}, alpha=0.2)",
    "clip({}, min=-1.0, max=2.0)",
]


@st.composite
def fused_chain_case(draw):
    """An anchor, then a random elementwise chain: bias_add, batch_norm, prelu, ..."""
    anchor = draw(st.sampled_from(["conv", "dense", "pool"]))
    if anchor == "conv":
        c, m = draw(small), draw(small)
        params = [("x", "float32", (1, c, 5, 5)), ("w", "float32", (m, c, 3, 3))]
        expr, out, axis = "conv(x, w, pads=[1, 0, 1, 2])", (1, m, 5, 6), 1
    elif anchor == "dense":
        m = draw(small)
        params = [("x", "float32", (3, 4)), ("w", "float32", (m, 4))]
        expr, out, axis = "dense(x, w)", (3, m), -1
    else:
        params = [("x", "float32", (2, 3, 6, 6))]
        expr, out, axis = "max_pool(x, kernel_shape=[2, 2], strides=[2, 2])", (2, 3, 3, 3), 1
    channels = out[axis]
    params.append(("e", "float32", out[-1:]))
    for _ in range(draw(st.integers(1, 4))):
        step = draw(st.sampled_from(["bias", "norm", "prelu", *EPILOGUES]))
        if step == "bias":
            params.append(("b", "float32", (channels,))) if all(p[0] != "b" for p in params) else None
            expr = f"bias_add({expr}, b, axis={axis})"
        elif step == "norm" and anchor != "dense":
            for name in ("s", "h", "mu", "v"):
                if all(p[0] != name for p in params):
                    params.append((name, "float32", (channels,)))
            expr = f"batch_norm({expr}, s, h, mu, multiply(v, v), epsilon=0.001)"
        elif step == "prelu":
            if all(p[0] != "p" for p in params):
                params.append(("p", "float32", out[-1:]))
            expr = f"prelu({expr}, p)"
        elif step != "norm":
            expr = step.format(expr)
    return params, expr


@pytest.mark.parametrize(
    "strategy",
    [
        conv_case(),
        pool_case(),
        reduction_case(),
        linear_case(),
        movement_case(),
        gather_case(),
        split_case(),
        fused_chain_case(),
    ],
    ids=["conv", "pool", "reduction", "linear", "movement", "gather", "split", "fused_chain"],
)
def test_anchor_rules_match_the_reference(strategy, tmp_path_factory):
    ran = []

    @SETTINGS
    @given(st.lists(strategy, min_size=6, max_size=10))
    def check(cases):
        ran.append(run_batch(cases, tmp_path_factory.mktemp("batch")))

    check()
    assert sum(ran) >= 20, ran  # the batches are not all rejected by the catalog


# ------------------------------------------------------------------ fusion and failure


CONV_BIAS_RELU = """\
graph main(x: float32[1, 4, 8, 8], w: float32[6, 4, 3, 3], b: float32[6]) {
  y = @fused { return relu(bias_add(conv(x, w, pads=[1, 1, 1, 1]), b)) }
  return y
}
"""


def test_conv_bias_relu_is_one_loop_nest_without_buffers():
    program = parse(CONV_BIAS_RELU, "graph", file="cbr.graph")
    (fn,) = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    spec = load_backend(BACKEND)
    artifact = module_of(generator_for(spec.kind)([fn], spec, load_catalog(), spec.option_values()))
    text = artifact.text
    assert "malloc" not in text and "tmp" not in text
    assert "nest 0: t0 conv, t1 bias_add, t2 relu" in text and "nest 1" not in text
    assert "const float t1 = t0 + in2[i0];" in text  # the bias indexed by the channel counter
    assert "out0[i0 * 64 + i1 * 8 + i2] = t2;" in text


def test_gather_index_out_of_range_raises_value_error(tmp_path):
    text = (
        "graph main(x: float32[4, 3], i: int64[2]) {\n  y = @fused { return gather(x, i) }\n  return y\n}\n"
    )
    (fn,) = lower(parse(text, "graph", file="g.graph"), load_backend, load_catalog()).externals_for(BACKEND)
    spec = load_backend(BACKEND)
    artifact = module_of(generator_for(spec.kind)([fn], spec, load_catalog(), spec.option_values()))
    module = tvm_ffi.load_module(
        str(compile_library({"fused.c": artifact.text, **SUPPORT}, "fused.c", tmp_path))
    )
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = np.zeros((2, 3), np.float32)
    module[fn.name](x, np.array([3, -4], np.int64), out)
    np.testing.assert_array_equal(out, x[[3, 0]])
    with pytest.raises(ValueError, match="gather index is out of range"):
        module[fn.name](x, np.array([0, 4], np.int64), out)


def test_partition_keeps_unmapped_ops_on_the_host(tmp_path):
    """A fused spec without softmax: under --backend fused, softmax stays on the host,
    and an explicit @fused region holding it is a located error."""
    shipped = FUSED_YAML.read_text(encoding="utf-8")
    start = shipped.index("  softmax:\n")
    end = shipped.index("  log_softmax:\n")
    write_fused_copy(tmp_path, shipped[:start] + shipped[end:])
    spec = load_backend(BACKEND, spec_path=[tmp_path])
    assert "softmax" not in spec.ops and "dense" in spec.ops
    program = parse((REPO / "examples" / "mlp.graph").read_text(), "graph", file="mlp.graph")
    parted = partition(program, [spec]).functions[0]
    assert [n.op for n in parted.nodes if n.op != CALL_OP] == ["softmax"]
    explicit = "graph main(x: float32[2, 3]) {\n  y = @fused { return softmax(relu(x)) }\n  return y\n}\n"
    with pytest.raises(GraphError, match="backend fused has no op .softmax.") as info:
        lower(parse(explicit, "graph", file="e.graph"), lambda name: spec, load_catalog())
    assert (info.value.location.line, info.value.location.column) == (2, 23)


def test_dead_values_of_an_anchored_region_get_no_loop():
    text = (
        "graph main(p: float32[2]) {\n"
        "  y = @fused {\n    v = concatenate(p, p)\n    dead = concatenate(v, v)\n    return relu(v)\n  }\n"
        "  return y\n}\n"
    )
    program = parse(text, "graph", file="dead.graph")
    (fn,) = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    spec = load_backend(BACKEND)
    artifact = module_of(generator_for(spec.kind)([fn], spec, load_catalog(), spec.option_values()))
    assert "const float t1 " not in artifact.text  # dead: no statement
    assert "nest 0: t0 concatenate, t2 relu" in artifact.text and "nest 1" not in artifact.text
    p = np.array([-1.0, 2.0], np.float32)
    (got,) = build(program)(p=p)
    np.testing.assert_array_equal(got, np.maximum(np.concatenate([p, p]), 0))
