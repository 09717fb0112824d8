"""Scaled dot-product attention on the fused backend: the catalog op ``attention``, computed
by a support function of the spec (``call:``, fused_attention.h's streaming softmax), and
fused.yaml's patterns that lower a transformer's chain (matmul, divide or multiply, add,
softmax, matmul) to it.

Every result is compared with byoc's numpy reference (of the op, or of the chain the
pattern replaced); the generated C of one attention is a golden file."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shipped_fused import FUSED_YAML, module_of, write_fused_copy

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build
from byoc.errors import ByocError, SpecError
from byoc.generator import generator_for
from byoc.generator.lowering import lower
from byoc.generator.partition import partition
from byoc.testing.compare import check_close

CHAIN = """\
graph main(q: {t}[{b}, {h}, {s}, {d}], k: {t}[{b}, {h}, {n}, {d}], v: {t}[{b}, {h}, {n}, {e}]{bias_param}) {{
  c = const {t}[] [{c}]
  kt = transpose(k, perm=[0, 1, 3, 2])
  s = {scale}(matmul(q, kt), c)
  return matmul(softmax({scores}, axis={axis}), v)
}}
"""


def chain(
    scale: str = "divide",
    bias: tuple[int, ...] | None = (1, 1, 5, 70),
    *,
    dtype: str = "float32",
    sizes: tuple[int, int, int, int, int, int] = (1, 2, 5, 4, 70, 33),
    axis: int = -1,
    c: float = 2.0,
) -> str:
    """The chain as an ONNX export writes it, with sizes (batch, heads, rows, depth, keys,
    width), a scale by ``divide`` or ``multiply``, and an additive bias of shape ``bias``
    (a graph input) or none."""
    b, h, s, d, n, e = sizes
    bias_param = f", bias: {dtype}[{', '.join(map(str, bias))}]" if bias is not None else ""
    scores = "add(s, bias)" if bias is not None else "s"
    return CHAIN.format(
        t=dtype,
        b=b,
        h=h,
        s=s,
        d=d,
        n=n,
        e=e,
        bias_param=bias_param,
        scale=scale,
        scores=scores,
        axis=axis,
        c=c,
    )


def ops_of(program) -> list[str]:
    return [
        n.op
        for fn in program.functions
        for node in fn.nodes
        for n in (node.callee.nodes if node.callee else [node])
    ]


def inputs_of(program, seed: int, masked: bool = True) -> dict[str, np.ndarray]:
    """Random inputs; a bias input is 0 or -inf (a causal mask where it has rows and keys,
    and a row masked whole), as a transformer's masks are."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in program.functions[0].params:
        shape, dtype = p.type.shape, p.type.dtype
        if p.name == "bias" and masked:
            keys = shape[-1]
            rows = shape[-2] if len(shape) > 1 else 1
            mask = np.triu(np.ones((rows, keys), bool), k=1 + max(0, keys - rows))
            value = np.where(mask, -np.inf, rng.uniform(-1, 1, (rows, keys)))
            value = np.broadcast_to(value, shape) if len(shape) > 1 else value.reshape(shape)
            out[p.name] = value.astype(dtype)
        else:
            out[p.name] = rng.standard_normal(shape).astype(dtype)
    return out


def run_both(text: str, seed: int = 0, masked: bool = True) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The graph's outputs on fused, and the reference's."""
    program = parse(text, "graph", file="attention.graph")
    inputs = inputs_of(program, seed, masked)
    got = build(program, backends=["fused"])(**inputs)
    want = evaluate(program.functions[0], inputs)
    return [np.asarray(g) for g in (got if isinstance(got, tuple) else (got,))], list(want)


def check_matches(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert np.array_equal(np.isnan(g), np.isnan(w))  # a row masked whole is NaN in both
        check_close(np.nan_to_num(g), np.nan_to_num(w))


def fused(text: str):
    return partition(parse(text, "graph", file="attention.graph"), [load_backend("fused")])


# ---------------------------------------------------------------------- the patterns


@pytest.mark.parametrize("scale", ["divide", "multiply"])
@pytest.mark.parametrize(
    "bias",
    [(5, 70), (1, 1, 5, 70), (1, 2, 1, 70), (70,), None],
    ids=["causal", "causal-4d", "padding", "keys-only", "unmasked"],
)
def test_the_chain_becomes_one_attention_and_matches_the_reference(scale, bias):
    text = chain(scale, bias)
    ops = ops_of(fused(text))
    assert ops.count("attention") == 1 and "softmax" not in ops and "matmul" not in ops
    check_matches(*run_both(text))


def test_a_bias_that_widens_the_batch_broadcasts_q_k_and_v():
    """bias [2, 1, 5, 70] against heads of batch 1: the scores, and the result, have
    batch 2, q, k and v read the same block for both."""
    check_matches(*run_both(chain("divide", (2, 1, 5, 70))))


def test_float64_computes_in_double():
    text = chain("multiply", (5, 70), dtype="float64", c=0.3)
    assert "attention" in ops_of(fused(text))
    got, want = run_both(text)
    np.testing.assert_allclose(np.nan_to_num(got[0]), np.nan_to_num(want[0]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "text",
    [
        chain(axis=2, bias=(5, 5), sizes=(1, 2, 5, 4, 5, 33)),  # a softmax over the rows
        chain(dtype="float16"),  # fused_attention.h has no float16 kernel
        chain(bias=None, sizes=(1, 2, 5, 4, 2, 3)).replace("[] [2.0]", "[2] [1.0, 2.0]"),  # a scale per key
    ],
    ids=["softmax-over-rows", "float16", "two-scales"],
)
def test_a_chain_the_patterns_refuse_runs_op_by_op(text):
    ops = ops_of(fused(text))
    assert "attention" not in ops and "softmax" in ops
    check_matches(*run_both(text))


# ---------------------------------------------------------------------- the op itself

OP = """\
graph main(q: {t}[{q}], kt: {t}[{kt}], v: {t}[{v}], s: {t}[{s}]{bias_param}) {{
  return attention(q, kt, v, s{bias_arg})
}}
"""


def op_graph(q, kt, v, scale=(), bias=None, dtype="float32") -> str:
    def dims(shape):
        return ", ".join(map(str, shape))

    return OP.format(
        t=dtype,
        q=dims(q),
        kt=dims(kt),
        v=dims(v),
        s=dims(scale),
        bias_param=f", b: {dtype}[{dims(bias)}]" if bias is not None else "",
        bias_arg=", b" if bias is not None else "",
    )


def _broadcast_of(draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``shape``: some leading axes dropped, some extents 1."""
    kept = shape[draw(st.integers(0, len(shape))) :]
    return tuple(1 if draw(st.booleans()) else n for n in kept)


@st.composite
def attentions(draw):
    """q, kt, v and a bias with broadcast batch axes, of sizes around the kernel's tiles
    (8 rows, 32 lanes, 64 keys)."""
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    rows, depth = draw(st.integers(1, 19)), draw(st.integers(1, 9))
    keys = draw(st.sampled_from([1, 3, 31, 32, 33, 64, 65, 130]))
    width = draw(st.sampled_from([1, 5, 32, 33, 70]))
    q = _broadcast_of(draw, batch) + (rows, depth)
    kt = _broadcast_of(draw, batch) + (depth, keys)
    v = batch + (keys, width)  # one full batch, so the result has it
    bias = draw(st.none() | st.just(_broadcast_of(draw, batch + (rows, keys))))
    return q, kt, v, bias, draw(st.sampled_from(["float32", "float64"])), draw(st.booleans())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=attentions(), seed=st.integers(0, 2**16))
def test_random_attentions_match_the_reference(case, seed):
    q, kt, v, bias, dtype, masked = case
    text = op_graph(q, kt, v, (1,), bias, dtype)
    check_matches(*run_both(text, seed, masked))


def test_a_large_attention_runs_on_the_thread_pool():
    """Enough outputs times keys for option openmp_reduction_threshold: the nest's calls
    (one per head) run in chunks on the pool, with the same result."""
    text = op_graph((1, 4, 128, 16), (1, 4, 16, 130), (1, 4, 130, 64), (), (128, 130))
    source = generated(text)
    assert "byoc_parallel_for(fused_0_loop0_, &args, 4);" in source
    check_matches(*run_both(text))


def generated(text: str) -> str:
    program = partition(parse(text, "graph", file="attention.graph"), [load_backend("fused")])
    externals = lower(program, load_backend, load_catalog()).externals_for("fused")
    spec = load_backend("fused")
    return module_of(generator_for(spec.kind)(externals, spec, load_catalog(), spec.option_values({}))).text


def test_golden_gpt2_style_attention(golden):
    """A causal attention of GPT-2's form, 2 heads: the transpose of k as its own nest,
    then one call of fused_attention_float32 per head, the scale 1 / 8 folded."""
    text = chain("divide", (6, 6), sizes=(1, 2, 6, 8, 6, 8), c=8.0)
    assert generated(text) == golden("c")


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (((2, 4), (5, 3), (3, 2), ()), "q's last axis and kt's axis -2 differ"),
        (((2, 4), (4, 3), (2, 2), ()), "kt's last axis and v's axis -2 differ"),
        (((2, 4), (4, 3), (3, 2), (2,)), "scale must be one value"),
        (((2, 4), (4, 3), (3, 2), (), (4, 3)), "does not broadcast to the scores"),
        (((2, 2, 4), (3, 4, 3), (3, 2), ()), "do not broadcast"),
    ],
)
def test_shapes_that_do_not_fit_are_located_errors(shapes, message):
    text = op_graph(*shapes[:4], shapes[4] if len(shapes) > 4 else None)
    with pytest.raises(ByocError) as info:
        parse(text, "graph", file="bad.graph")
    assert message in str(info.value)
    assert info.value.location is not None and info.value.location.line == 2


# ---------------------------------------------------------------------- the spec's `call`


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('call: "fused_attention_${dtype}"', 'call: "fused attention"', "must be a C function name"),
        ('call: "fused_attention_${dtype}"', 'c: "${x0}"', "c does not apply to a attention op"),
        ("  relu: {}\n", '  relu: {call: "f"}\n', "call does not apply to a elementwise op"),
        ('call: "fused_attention_${dtype}"', 'call: "fused_attention_${ctype}"', "must be a C function name"),
    ],
    ids=["not-a-name", "an-expression", "call-on-elementwise", "unknown-placeholder"],
)
def test_a_bad_call_is_a_located_spec_error(tmp_path, old, new, message):
    shipped = FUSED_YAML.read_text(encoding="utf-8")
    assert old in shipped
    write_fused_copy(tmp_path, shipped.replace(old, new, 1))
    with pytest.raises(SpecError) as info:
        load_backend("fused", spec_path=[tmp_path])
    assert message in str(info.value)
    assert info.value.location.file.endswith("fused.yaml")
    line = shipped[: shipped.index(old)].count("\n") + 1
    assert info.value.location.line in (line, line - 1)


def test_a_value_returned_twice_is_written_once_and_copied():
    """A region that returns the attention twice: the call writes the first output, a
    loop copies each block to the second."""
    text = op_graph((2, 3, 4), (2, 4, 5), (2, 5, 6)).replace(
        "  return attention(q, kt, v, s)\n",
        "  a, b = @fused {\n    y = attention(q, kt, v, s)\n    return y, y\n  }\n  return add(a, b)\n",
    )
    source = generated(text)
    assert "for (int64_t e = 0; e < 18; ++e) out1[(i) * 18 + e] = out0[(i) * 18 + e];" in source
    check_matches(*run_both(text))
