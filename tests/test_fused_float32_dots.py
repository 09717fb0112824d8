"""The `fused` option float32_dots: float accumulators for the float32 (float16,
bfloat16) dot products, and a matmul's weights packed in panels.

With the option, conv, conv_transpose, dense and matmul sum in C floats (the spec's
``float_update``), so their results are no longer the float64 reference's bits. Each
executed case is checked against that reference with the classic bound of a float
dot product of ``k`` terms, ``|got - want| <= k * u * sum(|a| * |b|)`` (``u`` the
float's unit roundoff), computed by running the same graph on the inputs' absolute
values: a bound that a wrong index or a lost term breaks, and reordering does not.
The generated text is checked for what the option changes (float accumulators,
packed panels) and for what it leaves alone (float64, pooling, softmax).
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm_ffi
from compile_util import compile_library
from conftest import random_array
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shipped_fused import SUPPORT, module_of
from test_fused_anchors import shape_text

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.generator import generator_for
from byoc.generator.c_fused.staging import Panel, panel_read, panel_width
from byoc.generator.lowering import lower

UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11}


def generate(text: str, floats: bool = True):
    program = parse(text, "graph", file="float32_dots.graph")
    (fn,) = lower(program, load_backend, load_catalog()).externals_for("fused")
    spec = load_backend("fused")
    values = spec.option_values({"float32_dots": "true" if floats else "false"})
    return fn, module_of(generator_for(spec.kind)([fn], spec, load_catalog(), values)).text


def graph(params, expr: str) -> str:
    args = ", ".join(f"{n}: {d}[{shape_text(s)}]" for n, d, s in params)
    return f"graph main({args}) {{\n  r = @fused {{\n    return {expr}\n  }}\n  return r\n}}\n"


def run(fn, text: str, inputs, out_dir):
    module = tvm_ffi.load_module(str(compile_library({"fused.c": text, **SUPPORT}, "fused.c", out_dir)))
    outputs = [np.full(t.shape, 99, dtype=t.dtype) for t in fn.output_types]
    module[fn.name](*inputs.values(), *outputs)
    return outputs


def check(params, expr: str, terms: int, tmp_path, seed: int = 7) -> str:
    """Run ``expr`` with float32_dots against the reference, within the dot-product bound
    of ``terms`` terms; returns the generated C."""
    fn, text = generate(graph(params, expr))
    rng = np.random.default_rng(seed)
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    (got,) = run(fn, text, inputs, tmp_path)
    (want,) = evaluate(fn, inputs)
    (magnitude,) = evaluate(fn, {k: np.abs(v) for k, v in inputs.items()})
    u = UNIT_ROUNDOFF[str(got.dtype)]
    # the sums' roundings, and the result's own rounding to its dtype
    bound = terms * u * magnitude.astype(np.float64) + u * np.abs(want.astype(np.float64))
    error = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.all(error <= bound), (
        f"{expr}: error {error.max()} beyond the bound at {np.argmax(error > bound)}"
    )
    return text


# (params, expr, terms of each dot product, packed): matmuls whose weights are packed,
# with a last panel narrower than 64 columns, batches that broadcast, and the ops that
# keep their weights' layout
CASES = [
    ([("x", "float32", (8, 40)), ("w", "float32", (40, 200))], "matmul(x, w)", 40, True),
    ([("x", "float32", (2, 3, 5, 70)), ("w", "float32", (70, 130))], "matmul(x, w)", 70, True),
    ([("x", "float32", (2, 6, 33)), ("w", "float32", (2, 33, 96))], "matmul(x, w)", 33, True),
    ([("x", "float32", (12, 64)), ("w", "float32", (64, 64))], "matmul(x, w)", 64, False),
    ([("x", "float32", (9, 50)), ("w", "float32", (70, 50))], "dense(x, w)", 50, True),
    ([("x", "float32", (2, 4, 50)), ("w", "float32", (40, 50))], "dense(x, w)", 50, True),
    ([("x", "float16", (4, 30)), ("w", "float16", (30, 80))], "matmul(x, w)", 30, False),
    (
        [("x", "float32", (1, 8, 9, 56)), ("w", "float32", (8, 8, 3, 3))],
        "conv(x, w, pads=[1, 1, 1, 1])",
        72,
        True,  # the weights, in panels of the block of 8 output channels (border lanes)
    ),
    (
        [("x", "float32", (1, 4, 5, 7)), ("w", "float32", (4, 3, 3, 3))],
        "conv_transpose(x, w, strides=[2, 2])",
        36,
        False,
    ),
]


@pytest.mark.parametrize(
    "case", CASES, ids=lambda c: f"{c[1].split('(')[0]}-{'x'.join(map(str, c[0][0][2]))}"
)
def test_float_accumulators_stay_within_the_dot_product_bound(case, tmp_path):
    params, expr, terms, packed = case
    text = check(params, expr, terms, tmp_path)
    assert "float t0_acc" in text and "double t0_acc" not in text
    assert "= fused_maddf(" in text and "= fused_madd_float" not in text
    assert ("packed in panels of" in text) == packed


def test_golden(golden):
    """A matmul with bias and relu after it: the float tiles, the packing and the epilogue."""
    params = [("x", "float32", (8, 40)), ("w", "float32", (40, 100)), ("b", "float32", (100,))]
    assert generate(graph(params, "relu(add(matmul(x, w), b))"))[1] == golden("c")


def test_golden_constant_weights(golden):
    """A dense whose weights are a constant: its panels written in the module, and read
    through a pointer (dots.PANEL_POINTER_NOTE)."""
    rng = np.random.default_rng(11)
    text = (
        "graph main(x: float32[8, 6]) {\n  r = @fused {\n"
        f"    w = {constant(rng, (20, 6))}\n    return dense(x, w)\n  }}\n  return r\n}}\n"
    )
    assert generate(text)[1] == golden("c")


def test_float_sums_are_the_default_and_false_keeps_the_double_sums():
    """Without options, a float32 dot product sums in float, as a BLAS does."""
    spec = load_backend("fused")
    assert spec.option_values({})["float32_dots"] is True
    text = graph([("x", "float32", (8, 40)), ("w", "float32", (40, 200))], "matmul(x, w)")
    (fn,) = lower(
        parse(text, "graph", file="float32_dots.graph"), load_backend, load_catalog()
    ).externals_for("fused")
    default = module_of(generator_for(spec.kind)([fn], spec, load_catalog(), spec.option_values({}))).text
    assert default == generate(text)[1]
    assert "float t0_acc" in default and "double t0_acc" not in default
    assert "double t0_acc" in generate(text, False)[1]


def test_packed_weights_are_read_in_panels_of_a_blocks_columns(tmp_path):
    text = check([("x", "float32", (8, 40)), ("w", "float32", (40, 200))], "matmul(x, w)", 40, tmp_path)
    # 200 columns: 4 panels of 64 (the last one holding 8), each of the 40 rows of w
    assert "float* const tmp0_x1 = (float*)(ws + 0); /* holds w in panels of 64 columns (nest 0) */" in text
    assert "tmp0_x1[c * 40 + p * 64 + l] = in1[p * 200 + c + l];" in text
    assert "const int64_t n = (c + 64 <= 200 ? 64 : 8);" in text
    assert "tmp0_x1[i1b * 40 + r0 * 64 + (i1 - i1b)]" in text


def code(text: str) -> str:
    """The module's text but its header's list of option values, which names the option."""
    assert "float32_dots=true." in text or "float32_dots=false." in text
    return text.replace("float32_dots=true.", "float32_dots=false.")


def test_the_option_leaves_float64_pooling_and_softmax_as_they_are():
    params = [("x", "float64", (8, 40)), ("w", "float64", (40, 100))]
    assert (
        code(generate(graph(params, "matmul(x, w)"))[1]) == generate(graph(params, "matmul(x, w)"), False)[1]
    )
    params = [("x", "float32", (1, 3, 9, 9))]
    for expr in (
        "max_pool(x, kernel_shape=[2, 2])",
        "softmax(x, axis=3)",
        "avg_pool(x, kernel_shape=[3, 3])",
    ):
        assert code(generate(graph(params, expr))[1]) == generate(graph(params, expr), False)[1], expr


def test_without_the_option_a_dot_keeps_its_double_accumulators_and_packs_its_weights(tmp_path):
    """Packing moves values, it computes nothing: without the option, a dot reads its
    packed weights in double accumulators and keeps the reference's bits."""
    params = [("x", "float32", (8, 40)), ("w", "float32", (40, 200))]
    fn, text = generate(graph(params, "matmul(x, w)"), False)
    assert "double t0_acc" in text and "fused_maddf" not in text and "packed in panels of 64" in text
    inputs = {p.name: random_array(np.random.default_rng(3), p.type.shape, p.type.dtype) for p in fn.params}
    (got,) = run(fn, text, inputs, tmp_path)
    x, w = inputs["x"].astype(np.float64), inputs["w"].astype(np.float64)
    total = np.zeros((8, 200))
    for k in range(40):  # the nest's order: k = 0, 1, ...; each float32 product exact in double
        total = total + x[:, k, None] * w[None, k, :]
    np.testing.assert_array_equal(got, total.astype(np.float32))


@pytest.mark.parametrize(
    "read, expected",
    [
        ("w[r0 * 200 + i1]", "buf[i1b * 40 + r0 * 64 + (i1 - i1b)]"),
        ("w[i0 * 8000 + r0 * 200 + i1]", "buf[i1b * 40 + i0 * 2560 + r0 * 64 + (i1 - i1b)]"),
        ("w[i1]", "buf[i1b * 40 + (i1 - i1b)]"),
        ("w[i1 * 40 + r0]", None),  # the lanes stride through the rows (a dense's weights)
        ("w[r0 * 200 + i1 * 2]", None),  # a strided lane
        ("w[r0 * 100 + i1]", None),  # a row step that is not a whole row
        ("w[r0 * 200 + i1 + 1]", None),  # an offset
        ("v[r0 * 200 + i1]", None),  # another array
    ],
)
def test_panel_read_rewrites_only_a_whole_rows_plus_lane_index(read, expected):
    assert panel_read(read, "w", "buf", "i1", "i1b", Panel(40, 200, 64)) == expected


@pytest.mark.parametrize(
    "read, expected",
    [
        ("w[i1 * 40 + r0]", "buf[i1b * 40 + r0 * 64 + (i1 - i1b)]"),  # a dense's w[n, k], transposed
        ("w[r0 * 200 + i1]", None),  # the lanes along the last axis: another panel
        ("w[i1 * 40 + r0 * 40]", None),  # a term that steps across columns
    ],
)
def test_panel_read_of_lanes_along_the_first_axis(read, expected):
    assert panel_read(read, "w", "buf", "i1", "i1b", Panel(40, 200, 64, 40)) == expected


def test_panel_source_indexes_each_layout():
    assert Panel(40, 200, 64).source("p", "c + l") == "p * 200 + c + l"
    assert Panel(40, 200, 64, 40).source("p", "c + l") == "(c + l) * 40 + p"
    # w[2, 200, 40] with the lanes along the middle axis: rows p = (batch, k)
    assert Panel(80, 200, 64, 40).source("p", "c") == "p / 40 * 8000 + (c) * 40 + p % 40"


def test_panel_size_rounds_the_last_panel_up():
    assert Panel(40, 200, 64).size == 4 * 64 * 40
    assert Panel(3, 128, 64).size == 128 * 3


@st.composite
def matmul_case(draw):
    small = st.integers(1, 9)
    m, k = draw(small), draw(st.integers(1, 80))
    n = draw(st.sampled_from([16, 63, 64, 65, 130, 200]))
    batch_a = tuple(draw(st.sampled_from([1, 2, 3])) for _ in range(draw(st.integers(0, 2))))
    batch_b = batch_a[len(batch_a) - draw(st.integers(0, len(batch_a))) :]
    batch_b = tuple(draw(st.sampled_from([1, b])) for b in batch_b)
    return [("x", "float32", (*batch_a, m, k)), ("w", "float32", (*batch_b, k, n))], k


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=matmul_case(), seed=st.integers(0, 2**16))
def test_random_matmuls_stay_within_the_bound(case, seed, tmp_path_factory):
    params, k = case
    check(params, "matmul(x, w)", k, tmp_path_factory.mktemp("mm"), seed)


def constant(rng: np.random.Generator, shape: tuple[int, ...]) -> str:
    values = ", ".join(f"{v:.3f}" for v in rng.uniform(-1.0, 1.0, size=int(np.prod(shape))))
    return f"const float32[{shape_text(shape)}] [{values}]"


def run_near_the_reference(fn, text: str, inputs, tmp_path) -> np.ndarray:
    """The one output of ``text`` run on ``inputs``, checked near the reference."""
    (got,) = run(fn, text, inputs, tmp_path)
    (want,) = evaluate(fn, inputs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return got


def assert_plain_bits(fn, got: np.ndarray, inputs, tmp_path) -> None:
    """``got`` is the plain nests' result, bit for bit (double sums, no blocks, no
    panels: the constants read as they are)."""
    spec = load_backend("fused")
    values = spec.option_values({"block_reductions": "false", "float32_dots": "false"})
    plain = module_of(generator_for(spec.kind)([fn], spec, load_catalog(), values)).text
    assert "_panels" not in plain
    np.testing.assert_array_equal(got, run(fn, plain, inputs, tmp_path / "plain")[0])


@pytest.mark.parametrize("floats", [True, False])
def test_constant_weights_are_packed_when_the_module_is_generated(floats, tmp_path):
    """A constant read packed is written in its panels' layout, once, in the module: no
    copy at each call, and no array of its own layout that nothing reads (an unused
    static, an error under -Werror). Without float32_dots, the results are the bits of
    the plain nests, which read the constants as they are."""
    rng = np.random.default_rng(5)
    text = (
        "graph main(x: float32[6, 8]) {\n  r = @fused {\n"
        f"    w = {constant(rng, (20, 8))}\n    v = {constant(rng, (20, 100))}\n"
        "    return matmul(relu(dense(x, w)), v)\n  }\n  return r\n}\n"
    )
    fn, c = generate(text, floats)
    assert (
        "static const float fused_0_const_0_panels[" in c
        and "static const float fused_0_const_1_panels[" in c
    )
    # each nest reads its panels through a restrict pointer, never the array itself
    assert "const float* restrict t0_x1_panels = fused_0_const_0_panels;" in c
    assert "const float* restrict t2_x1_panels = fused_0_const_1_panels;" in c
    assert c.count("fused_0_const_0_panels") == 3 and "t0_x1_panels[i1b * 8 + r0 * 20" in c
    assert "static const float fused_0_const_0[" not in c and "packed in panels" not in c
    assert "constant w in panels of 20 columns" in c and "constant v in panels of 64 columns" in c
    inputs = {"x": random_array(rng, (6, 8), "float32")}
    got = run_near_the_reference(fn, c, inputs, tmp_path)
    if not floats:
        assert_plain_bits(fn, got, inputs, tmp_path)


def test_a_constant_read_packed_and_as_it_is_keeps_both_arrays(tmp_path):
    """(Both arrays, as literals, fit the function's 4096 literal values.)"""
    rng = np.random.default_rng(6)
    text = (
        "graph main(x: float32[6, 10]) {\n  r, s = @fused {\n"
        f"    w = {constant(rng, (10, 100))}\n"
        "    return matmul(x, w), relu(w)\n  }\n  return r, s\n}\n"
    )
    fn, c = generate(text)
    assert "static const float fused_0_const_0[" in c and "fused_0_const_0_panels[" in c
    inputs = {"x": random_array(rng, (6, 10), "float32")}
    got = run(fn, c, inputs, tmp_path)
    want = evaluate(fn, inputs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got[1], want[1])


PADDED_CONV = [("x", "float32", (1, 8, 9, 56)), ("w", "float32", (16, 8, 3, 3))]


def test_a_padded_convs_weights_are_packed_in_panels_of_its_block_of_channels(tmp_path):
    """The border lanes of a padded convolution compute a block of 8 output channels
    together: the block's weights at one tap are side by side in the panels."""
    text = check(PADDED_CONV, "conv(x, w, pads=[1, 1, 1, 1])", 72, tmp_path)
    assert "holds w in panels of 8 columns (nest 0)" in text
    assert "tmp0_x1[c * 72 + p * 8 + l] = in1[(c + l) * 72 + p];" in text
    border = text.index("the border lanes, outside the interior")
    assert "tmp0_x1[i0b * 72 + r0 * 72 + r1 * 24 + r2 * 8 + (i0 - i0b)]" in text[border:]
    assert text.count("in1[") == 1  # only the packing reads the weights as they are


@pytest.mark.parametrize(
    "attrs",
    ["strides=[2, 2]", "dilations=[2, 2]", "strides=[1, 2]"],
    ids=["stride-2", "dilation-2", "stride-1x2"],
)
def test_a_padded_strided_or_dilated_conv_reads_its_packed_weights_right(attrs, tmp_path):
    """Lanes that step by 2 through the input (no register tiles) or taps 2 apart: the
    blocked lane loops read the packed weights as the tiles do."""
    text = check(PADDED_CONV, f"conv(x, w, pads=[1, 2, 1, 2], {attrs})", 72, tmp_path)
    assert "holds w in panels of 8 columns (nest 0)" in text


def test_an_unpadded_conv_reads_its_weights_as_they_are(tmp_path):
    """No border lanes: every lane is in a register tile, which broadcasts each weight."""
    text = check(PADDED_CONV, "conv(x, w)", 72, tmp_path)
    assert "packed in panels" not in text and "in1[i0 * 72 + r0 * 9 + r1 * 3 + r2]" in text


@pytest.mark.parametrize("floats", [True, False])
def test_a_padded_convs_constant_weights_are_packed_when_the_module_is_generated(floats, tmp_path):
    """Constant weights: the panels written in the module with float32_dots; without it
    (double sums) the weights are converted to double as before, and the results are the
    plain nest's bits."""
    rng = np.random.default_rng(8)
    text = (
        "graph main(x: float32[1, 8, 9, 56]) {\n  r = @fused {\n"
        f"    w = {constant(rng, (16, 8, 3, 3))}\n    return relu(conv(x, w, pads=[1, 1, 1, 1]))\n"
        "  }\n  return r\n}\n"
    )
    fn, c = generate(text, floats)
    assert ("constant w in panels of 8 columns" in c) == floats
    assert ("static const float fused_0_const_0_panels[" in c) == floats
    inputs = {"x": random_array(rng, (1, 8, 9, 56), "float32")}
    got = run_near_the_reference(fn, c, inputs, tmp_path)
    if not floats:
        assert_plain_bits(fn, got, inputs, tmp_path)


@pytest.mark.parametrize(
    "panel, shape",
    [(Panel(40, 200, 64), (40, 200)), (Panel(40, 70, 64, 40), (70, 40)), (Panel(6, 10, 4, 3), (2, 10, 3))],
)
def test_panel_pack_puts_each_element_where_the_reads_look(panel, shape):
    values = np.arange(int(np.prod(shape)), dtype=np.float32)
    packed = panel.pack(values)
    assert packed.shape == (panel.size,)
    for p in range(panel.rows):
        for c in range(panel.columns):
            source = eval(panel.source(str(p), str(c)).replace("/", "//"))
            assert (
                packed[(c - c % panel.width) * panel.rows + p * panel.width + c % panel.width]
                == values[source]
            )


@pytest.mark.parametrize("floats", [True, False])
def test_an_empty_reduction_reads_no_row_and_compiles(floats, tmp_path):
    """matmul of x[4, 0] and a constant w[0, 100]: the tiles' block counter is read by no
    input (x has no elements along the rows' axis), so it is not defined (an unused
    variable is an error under -Werror), and every output is 0."""
    text = (
        "graph main(x: float32[4, 0]) {\n  r = @fused {\n"
        "    w = const float32[0, 100] []\n    return matmul(x, w)\n  }\n  return r\n}\n"
    )
    fn, c = generate(text, floats)
    (got,) = run(fn, c, {"x": np.zeros((4, 0), np.float32)}, tmp_path)
    np.testing.assert_array_equal(got, np.zeros((4, 100), np.float32))


def test_a_deep_reduction_takes_narrower_panels_that_stay_in_the_cache(tmp_path):
    """A panel of 64 columns of 2,100 rows (538 KB) would outgrow PANEL_BYTES: the
    blocks take 32 lanes, and the panels 32 columns."""
    assert [panel_width(k) for k in (768, 2048, 2049, 4096, 8192, 100_000)] == [64, 64, 32, 32, 16, 16]
    params = [("x", "float32", (3, 2100)), ("w", "float32", (2100, 70))]
    text = check(params, "matmul(x, w)", 2100, tmp_path)
    assert "packed in panels of 32 columns" in text and "i1b += 32" in text


def test_many_lane_blocks_run_outside_more_row_blocks(tmp_path):
    """536 rows (67 blocks of 8) and 520 columns (9 lane blocks of 64, the last 8): the
    lane blocks outside the row blocks, so that each panel of the weights is read once,
    and the outer loop (on the thread pool) over the lane blocks."""
    text = check([("x", "float32", (536, 300)), ("w", "float32", (520, 300))], "dense(x, w)", 300, tmp_path)
    lanes = text.index("for (int64_t i1b = begin * 64; i1b < end * 64; i1b += 64) {")
    assert lanes < text.index("for (int64_t i0b = 0; i0b < 536; i0b += 8) {")
    assert "byoc_parallel_for(fused_0_loop0_, &args, 9);" in text


def test_few_lane_blocks_keep_the_row_blocks_outside(tmp_path):
    """7 lane blocks against 67 row blocks: the row blocks stay outside (the pool shares
    them out)."""
    text = check([("x", "float32", (536, 300)), ("w", "float32", (400, 300))], "dense(x, w)", 300, tmp_path)
    rows = text.index("for (int64_t i0b = begin * 8; i0b < end * 8; i0b += 8) {")
    assert rows < text.index("for (int64_t i1b = 0; i1b < 400; i1b += 64) {")
