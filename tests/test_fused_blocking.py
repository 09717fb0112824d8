"""Blocked reduction nests of the `fused` backend (option block_reductions): the same bits
as the plain nests, and numpy's results, at shapes that exercise their borders.

Each case is compiled twice, with the option on and off, and run on the same inputs: the
outputs must be identical (every output keeps its own summation order), and close to
byoc's numpy reference (byoc.api.evaluate). The cases cover padding taps, partial lane
chunks (more than 64 outputs along the innermost axis), block widths 4, 3, 2 and none,
strides, dilations, groups, batches, pooling, dense and matmul, and fused consumers;
and the register tiles of the blocks' interiors (generator/c_fused/tiles.py): interiors
narrower than a tile, of exactly one tile of 16 or of 48, tiles with an overlapping last
one, border lanes on either side, and lane bounds with a coefficient (strides).
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
from test_fused_anchors import conv_case, linear_case, pool_case, shape_text

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.generator import generator_for
from byoc.generator.c_fused.tiles import STAGED_ACCUMULATORS, STAGED_TILES, STAGED_WIDTHS, TILES, UNROLL
from byoc.generator.lowering import lower
from byoc.testing.compare import check_close

SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def generate(text: str, blocked: bool, floats: bool = False):
    """The module, blocked or plain; by default with the double sums (float32_dots=false),
    whose results are the reference's within 1e-5, so that a wrong index shows."""
    program = parse(text, "graph", file="blocking.graph")
    externals = lower(program, load_backend, load_catalog()).externals_for("fused")
    spec = load_backend("fused")
    options = {"block_reductions": str(blocked).lower(), "float32_dots": str(floats).lower()}
    values = spec.option_values(options)
    artifact = module_of(generator_for(spec.kind)(externals, spec, load_catalog(), values))
    return externals, artifact.text


def check_case(params, expr: str, tmp_path, epilogue: str = "", floats: bool = False) -> str:
    """Run ``expr`` (then ``epilogue`` over ``t``) blocked and plain; returns the blocked C.
    With ``floats`` (float32_dots) the reference is met at the float sums' tolerance."""
    args = ", ".join(f"{n}: {d}[{shape_text(s)}]" for n, d, s in params)
    body = f"return {expr}" if not epilogue else f"t = {expr}\n    return {epilogue}"
    text = f"graph main({args}) {{\n  r = @fused {{\n    {body}\n  }}\n  return r\n}}\n"
    results, blocked_text = [], ""
    for blocked in (True, False):
        externals, c = generate(text, blocked, floats)
        blocked_text = blocked_text or c
        lib = compile_library({"fused.c": c, **SUPPORT}, "fused.c", tmp_path / ("on" if blocked else "off"))
        module = tvm_ffi.load_module(str(lib))
        (fn,) = externals
        rng = np.random.default_rng(7)
        inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
        outputs = [np.full(t.shape, 99, dtype=t.dtype) for t in fn.output_types]
        module[fn.name](*inputs.values(), *outputs)
        results.append(outputs)
        if blocked:
            for got, want in zip(outputs, evaluate(fn, inputs)):
                tol = 1e-5 if got.dtype == np.float32 else 1e-12
                if floats:
                    check_close(got, want, expr)
                else:
                    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=expr)
    for on, off in zip(*results):
        np.testing.assert_array_equal(on, off, err_msg=f"{expr}: blocked and plain differ")
    return blocked_text


CASES = [
    # (x, w, attrs): lanes of 56 with padding taps on both ends, a block of 4 channels
    ((1, 8, 9, 56), (8, 8, 3, 3), "pads=[1, 1, 1, 1]"),
    # 70 lanes: a full chunk of 64 and a partial one; 3 channels: a block of 3
    ((2, 2, 3, 70), (3, 2, 1, 3), "pads=[0, 2, 1, 0]"),
    # strides and dilations: the lane guard's coefficient is not 1, the plain guard stays
    ((1, 3, 11, 13), (2, 3, 3, 3), "strides=[2, 2], dilations=[2, 1], pads=[1, 2, 0, 1]"),
    # dilation along the lanes, 5 channels: no block width divides them
    ((1, 2, 6, 17), (5, 2, 2, 3), "dilations=[1, 3], pads=[2, 2, 2, 2]"),
    # groups: the input channel depends on the output channel
    ((2, 4, 5, 9), (6, 2, 3, 3), "groups=2, pads=[1, 1, 1, 1]"),
    ((1, 4, 5, 9), (4, 1, 3, 3), "groups=4, pads=[0, 1, 0, 1]"),
    # 1-d and 3-d
    ((1, 3, 80), (4, 3, 5), "pads=[4, 0]"),
    ((1, 2, 3, 4, 10), (2, 2, 2, 2, 3), "pads=[1, 0, 1, 0, 1, 1]"),
]


@pytest.mark.parametrize(("x", "w", "attrs"), CASES)
def test_blocked_conv_with_consumers_is_the_plain_nest(x, w, attrs, tmp_path):
    params = [("x", "float32", x), ("w", "float32", w), ("b", "float32", (w[0],))]
    text = check_case(params, f"conv(x, w, {attrs})", tmp_path, "relu(bias_add(t, b))")
    assert "a block of outputs" in text


@pytest.mark.parametrize(("x", "w", "attrs"), CASES[:4])
def test_float_sums_blocked_are_the_plain_nest(x, w, attrs, tmp_path):
    """With the float sums (the default), too, each output keeps its order when blocked."""
    params = [("x", "float32", x), ("w", "float32", w), ("b", "float32", (w[0],))]
    text = check_case(params, f"conv(x, w, {attrs})", tmp_path, "relu(bias_add(t, b))", floats=True)
    assert "a block of outputs" in text and "float t0_acc" in text


def test_float_sums_of_dense_and_matmul_blocked_are_the_plain_nest(tmp_path):
    for k, (params, expr) in enumerate(
        [
            ([("x", "float32", (5, 7)), ("w", "float32", (130, 7))], "dense(x, w)"),
            ([("a", "float32", (2, 3, 6)), ("b", "float32", (6, 70))], "matmul(a, b)"),
        ]
    ):
        assert "float t0_acc" in check_case(params, expr, tmp_path / str(k), floats=True)


def test_blocked_conv_turns_padding_guards_into_lane_bounds(tmp_path):
    params = [("x", "float32", (1, 8, 9, 56)), ("w", "float32", (8, 8, 3, 3))]
    text = check_case(params, "conv(x, w, pads=[1, 1, 1, 1])", tmp_path)
    assert "double t0_acc[4][56];" in text  # 8 channels: two blocks of 4, not one of 8
    assert "if (t0_lo < -r2 + 1) t0_lo = -r2 + 1;" in text
    # the guard is left only in the border lanes' plain reduction, one lane at a time (in
    # the text of each vector width, when their tiles differ)
    widths = 2 if "#if defined(__AVX512F__)" in text else 1
    assert text.count("ix3 >= 56") == widths and text.count("the border lanes") == widths


def test_pooling_batch_norm_dense_and_matmul_blocked(tmp_path):
    cases = [
        (
            [("x", "float32", (2, 3, 7, 70))],
            "avg_pool(x, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])",
        ),
        (
            [("x", "float64", (1, 3, 5, 9))],
            "max_pool(x, kernel_shape=[2, 3], dilations=[1, 2], ceil_mode=true)",
        ),
        ([("x", "float32", (5, 7)), ("w", "float32", (130, 7))], "dense(x, w)"),
        ([("a", "float64", (2, 3, 6)), ("b", "float64", (6, 4))], "matmul(a, b)"),
        ([("x", "float32", (2, 3, 4, 5))], "lrn(x, size=3, alpha=0.01)"),
    ]
    for k, (params, expr) in enumerate(cases):
        check_case(params, expr, tmp_path / str(k))
    bn = [("x", "float32", (1, 4, 6, 8)), ("w", "float32", (4, 4, 3, 3))]
    bn += [(p, "float32", (4,)) for p in ("g", "be", "m", "v")]
    check_case(bn, "conv(x, w, pads=[1, 1, 1, 1])", tmp_path / "bn", "relu(batch_norm(t, g, be, m, v))")


@pytest.mark.parametrize("strategy", [conv_case, pool_case, linear_case], ids=["conv", "pool", "linear"])
def test_random_reductions_blocked_are_the_plain_nest(strategy, tmp_path_factory):
    @SETTINGS
    @given(strategy())
    def run(case):
        params, expr = case
        try:
            args = ", ".join(f"{n}: {d}[{shape_text(s)}]" for n, d, s in params)
            parse(f"graph g({args}) {{\n  return {expr}\n}}\n", "graph", file="case.graph")
        except Exception:
            return  # the catalog rejects the attributes (a kernel larger than the padded input)
        check_case(params, expr, tmp_path_factory.mktemp("case"))

    run()


def test_the_option_is_on_by_default_and_off_keeps_the_plain_nest():
    text = "graph main(x: float32[1, 2, 5, 5], w: float32[2, 2, 3, 3]) {\n  r = @fused { return conv(x, w) }\n  return r\n}\n"
    assert load_backend("fused").option_values()["block_reductions"] is True
    _, off = generate(text, False)
    assert "a block of outputs" not in off and "t0_acc = fused_madd_float32(t0_acc, " in off


TILE_CASES = [
    # (x, w, attrs) with the interior's width (lanes 1..W-2 for a 3-wide kernel, pads 1)
    # 17 lanes, interior 15: narrower than a tile, the lane loops for the whole block
    ((1, 4, 3, 17), (4, 4, 3, 3), "pads=[1, 1, 1, 1]"),
    # interior 16: exactly one tile of 16; 17: 16 and an overlapping 16; 50: 48 and an
    # overlapping 16; 48: one tile of 48
    ((1, 4, 3, 18), (4, 4, 3, 3), "pads=[1, 1, 1, 1]"),
    ((1, 4, 3, 19), (8, 4, 3, 3), "pads=[1, 1, 1, 1]"),
    ((1, 4, 2, 52), (4, 4, 3, 3), "pads=[1, 1, 1, 1]"),
    ((1, 2, 2, 50), (4, 2, 3, 3), "pads=[1, 1, 1, 1]"),
    # no padding: the interior is every lane, no borders; pads on one side only
    ((1, 3, 4, 27), (6, 3, 3, 3), ""),
    ((1, 3, 4, 27), (6, 3, 3, 3), "pads=[0, 0, 0, 2]"),
    ((1, 3, 4, 27), (6, 3, 3, 3), "pads=[0, 3, 0, 0]"),
    # strides 2 and 3 along the lanes: the lane bounds divide
    ((1, 3, 7, 41), (4, 3, 3, 3), "strides=[2, 2], pads=[1, 1, 1, 1]"),
    ((1, 2, 5, 60), (2, 2, 1, 4), "strides=[1, 3], pads=[0, 2, 0, 1]"),
    # dilations along the lanes
    ((1, 2, 6, 40), (4, 2, 2, 3), "dilations=[1, 3], pads=[2, 3, 2, 3]"),
    # groups and depthwise, batch 2, 5 channels (no block: one accumulator row)
    ((2, 4, 4, 30), (6, 2, 3, 3), "groups=2, pads=[1, 1, 1, 1]"),
    ((2, 4, 4, 30), (4, 1, 3, 3), "groups=4, pads=[1, 2, 1, 2]"),
    ((1, 2, 4, 30), (5, 2, 3, 3), "pads=[1, 1, 1, 1]"),
    # a second chunk of lanes (70 = 64 + 6): its interior is narrower than a tile
    ((1, 2, 3, 70), (4, 2, 3, 3), "pads=[1, 1, 1, 1]"),
    # 1-d and 3-d
    ((2, 3, 45), (4, 3, 5), "pads=[2, 2]"),
    ((1, 2, 3, 3, 20), (2, 2, 2, 2, 3), "pads=[1, 0, 1, 0, 1, 1]"),
]


@pytest.mark.parametrize(("x", "w", "attrs"), TILE_CASES)
def test_interior_tiles_and_borders_are_the_plain_nest(x, w, attrs, tmp_path):
    params = [("x", "float32", x), ("w", "float32", w), ("b", "float32", (w[0],))]
    conv = f"conv(x, w, {attrs})" if attrs else "conv(x, w)"
    text = check_case(params, conv, tmp_path, "relu(bias_add(t, b))")
    if "strides" in attrs:  # strided lanes read no consecutive elements: the lane loops
        assert "register tiles" not in text
        return
    assert ("register tiles of " in text) == (x[-1] >= TILES[-1]), "tiles where a tile fits the lanes"
    assert ("register tiles of " not in text) or f"{TILES[-1]} lanes over the interior" in text
    assert ("the border lanes, outside the interior" in text) == ("pads" in attrs)


def test_blocks_narrower_than_a_tile_keep_the_lane_loops(tmp_path):
    params = [("x", "float32", (1, 4, 3, 7)), ("w", "float32", (4, 4, 3, 3))]
    text = check_case(params, "conv(x, w, pads=[1, 1, 1, 1])", tmp_path)
    assert "a block of outputs" in text and "register tiles" not in text


def test_conv3x3_interior_is_lanes_1_to_54(tmp_path):
    params = [("x", "float32", (1, 8, 5, 56)), ("w", "float32", (16, 8, 3, 3))]
    text = check_case(params, "conv(x, w, pads=[1, 1, 1, 1])", tmp_path)
    assert "if (t0_in_lo < 1) t0_in_lo = 1;" in text and "if (t0_in_hi > 55) t0_in_hi = 55;" in text
    # its weights are staged as doubles (generator/c_fused/staging.py): blocks of 8 channels, the staged
    # tiles whose accumulators fit, unrolled loops
    assert STAGED_WIDTHS[0] == 8 and "i0b += 8" in text
    sizes = [size for size in STAGED_TILES if 8 * size <= STAGED_ACCUMULATORS]
    assert sizes and all(f"double t0_acc_tile[8][{size}];" in text for size in sizes)
    assert not any(f"t0_acc_tile[8][{size}]" in text for size in STAGED_TILES if size not in sizes)
    assert "#pragma GCC unroll 3" in text and "#pragma GCC unroll 8" in text


@pytest.mark.parametrize("channels", [12, 8])
def test_staged_blocks_fall_back_to_narrower_widths(channels, tmp_path):
    """12 output channels: no block of 8 divides them; 8: one block of 8 would leave the
    thread pool nothing to share. So blocks of 4, with every staged tile (4 x 40
    accumulators fit)."""
    params = [("x", "float32", (1, 3, 4, 56)), ("w", "float32", (channels, 3, 3, 3))]
    text = check_case(params, "conv(x, w, pads=[1, 1, 1, 1])", tmp_path)
    assert "i0b += 4" in text and "converted to double once" in text
    assert all(f"double t0_acc_tile[4][{size}];" in text for size in STAGED_TILES)


def test_staging_converts_lane_independent_reads_of_dot_updates_once(tmp_path):
    """A float32 conv's weights (read alike by every lane of a tile, and converted to
    double by the spec's update) are converted once into a workspace buffer; its input
    (a different element per lane) is read as it is. The results are the plain nest's
    bits (check_case), and a float64 conv, a pool and a nest without tiles stage nothing."""
    params = [("x", "float32", (1, 3, 6, 20)), ("w", "float32", (4, 3, 3, 3))]
    text = check_case(params, "conv(x, w, pads=[1, 1, 1, 1])", tmp_path)
    assert "for (int64_t s = 0; s < 108; ++s) tmp0_x1[s] = (double)in1[s];" in text
    assert "(double)tmp0_x1[" in text and "(double)in0[" in text and "tmp0_x0" not in text
    wide = [("x", "float64", (1, 3, 6, 20)), ("w", "float64", (4, 3, 3, 3))]
    pool = [("x", "float32", (2, 3, 5, 40))]
    narrow = [("x", "float32", (1, 4, 3, 7)), ("w", "float32", (4, 4, 3, 3))]
    for case, expr in [
        (wide, "conv(x, w, pads=[1, 1, 1, 1])"),
        (pool, "max_pool(x, kernel_shape=[3, 3], pads=[1, 1, 1, 1])"),
        (narrow, "conv(x, w, pads=[1, 1, 1, 1])"),
    ]:
        other = check_case(case, expr, tmp_path / expr[:4] / case[0][1])
        assert "converted to double once" not in other and "#pragma GCC unroll" not in other, expr


def test_staged_weights_follow_an_earlier_nest(tmp_path):
    """Weights that an earlier nest computes (a buffer of the workspace) are staged after
    it, into a buffer of their own: the conv reads relu(w) converted, not stale memory."""
    params = [("x", "float32", (1, 3, 6, 20)), ("w", "float32", (4, 3, 3, 3))]
    text = check_case(params, "conv(x, relu(w), pads=[1, 1, 1, 1])", tmp_path, "relu(t)")
    assert "converted to double once" in text


def test_pooling_dense_and_matmul_tiles(tmp_path):
    cases = [
        ([("x", "float32", (2, 3, 5, 40))], "max_pool(x, kernel_shape=[3, 3], pads=[1, 1, 1, 1])"),
        (
            [("x", "float64", (1, 2, 4, 33))],
            "avg_pool(x, kernel_shape=[2, 3], pads=[0, 2, 1, 2], count_include_pad=true)",
        ),
        (
            [("x", "float32", (1, 2, 3, 29))],
            "avg_pool(x, kernel_shape=[1, 4], strides=[1, 2], ceil_mode=true)",
        ),
        ([("x", "float32", (6, 9)), ("w", "float32", (75, 9))], "dense(x, w)"),
        ([("x", "float64", (6, 9)), ("w", "float64", (75, 9))], "dense(x, w)"),
        ([("a", "float64", (2, 3, 5)), ("b", "float64", (5, 24))], "matmul(a, b)"),
    ]
    for k, (params, expr) in enumerate(cases):
        text = check_case(params, expr, tmp_path / str(k))
        # a float64 dense reads its weights with a stride along the lanes: no tiles; a
        # float32 one reads them packed in panels (staging.py), the same values in tiles
        strided = "strides" in expr or ("dense" in expr and params[0][1] == "float64")
        assert ("register tiles" in text) == (not strided), expr
        assert ("packed in panels" in text) == ("dense" in expr and params[0][1] == "float32"), expr


@st.composite
def wide_case(draw):
    """A conv or pooling whose innermost axis is wide enough for tiles (up to 40)."""
    n = draw(st.integers(1, 2))
    width = draw(st.integers(1, 40))
    spatial = [draw(st.integers(1, 3)) for _ in range(n - 1)] + [width]
    kernel = [draw(st.integers(1, 3)) for _ in range(n - 1)] + [draw(st.integers(1, 5))]
    attrs = [f"strides=[{', '.join(str(draw(st.integers(1, 3))) for _ in range(n))}]"]
    attrs.append(f"pads=[{', '.join(str(draw(st.integers(0, 3))) for _ in range(2 * n))}]")
    attrs.append(f"dilations=[{', '.join(str(draw(st.integers(1, 3))) for _ in range(n))}]")
    batch, dtype = draw(st.integers(1, 2)), draw(st.sampled_from(["float32", "float64"]))
    if draw(st.booleans()):
        x = (batch, draw(st.integers(1, 3)), *spatial)
        op = draw(st.sampled_from(["max_pool", "avg_pool"]))
        return [("x", dtype, x)], f"{op}(x, kernel_shape=[{', '.join(map(str, kernel))}], {', '.join(attrs)})"
    groups, cg, mg = draw(st.sampled_from([1, 2])), draw(st.integers(1, 2)), draw(st.integers(1, 4))
    x, w = (batch, cg * groups, *spatial), (mg * groups, cg, *kernel)
    return [("x", dtype, x), ("w", dtype, w)], f"conv(x, w, groups={groups}, {', '.join(attrs)})"


def test_random_wide_reductions_tiled_are_the_plain_nest(tmp_path_factory):
    @SETTINGS
    @given(wide_case())
    def run(case):
        params, expr = case
        try:
            args = ", ".join(f"{n}: {d}[{shape_text(s)}]" for n, d, s in params)
            parse(f"graph g({args}) {{\n  return {expr}\n}}\n", "graph", file="case.graph")
        except Exception:
            return  # the catalog rejects the attributes (a kernel larger than the padded input)
        check_case(params, expr, tmp_path_factory.mktemp("case"))

    run()


def test_staged_nests_unroll_kernel_taps_never_channel_loops(tmp_path):
    """A 1x1 convolution's innermost reduction loop is its channels: unrolled whole, a
    ResNet-50's 2,048 channels kept gcc busy for more than 20 minutes. Only a loop of at
    most UNROLL points (a kernel row) is unrolled."""
    params = [("x", "float32", (1, 40, 2, 20)), ("w", "float32", (4, 40, 1, 1))]
    text = check_case(params, "conv(x, w)", tmp_path)
    assert "converted to double once" in text and "#pragma GCC unroll 4" in text
    assert "#pragma GCC unroll 40" not in text
    assert UNROLL < 40


def test_a_product_with_more_column_blocks_than_row_blocks_runs_them_outside(tmp_path):
    """matmul [16, 40] x [40, 200]: 4 blocks of 64 columns against 2 blocks of 8 rows, so
    the column blocks run outside (each weight panel is read once for all the row
    blocks), with the plain nest's bits and the reference's values; [64, 40] x [40, 100]
    (2 column blocks, 8 row blocks) keeps the rows outside."""
    wide = check_case([("a", "float32", (16, 40)), ("b", "float32", (40, 200))], "matmul(a, b)", tmp_path)
    assert wide.index("for (int64_t i1b = ") < wide.index("for (int64_t i0b = ")
    (tmp_path / "tall").mkdir()
    params = [("a", "float32", (64, 40)), ("b", "float32", (40, 100))]
    tall = check_case(params, "matmul(a, b)", tmp_path / "tall")
    assert tall.index("for (int64_t i0b = ") < tall.index("for (int64_t i1b = ")


def test_column_blocks_outside_share_out_on_the_thread_pool(tmp_path):
    """The same product on the thread pool: its chunks divide the column blocks, and the
    result is the plain nest's, bit for bit."""
    text = "graph main(a: float32[16, 40], b: float32[40, 200]) {\n  y = @fused { return matmul(a, b) }\n  return y\n}\n"
    program = parse(text, "graph", file="wide.graph")
    (fn,) = lower(program, load_backend, load_catalog()).externals_for("fused")
    spec = load_backend("fused")
    values = spec.option_values({"openmp_reduction_threshold": "1", "float32_dots": "false"})
    pooled = module_of(generator_for(spec.kind)([fn], spec, load_catalog(), values)).text
    assert "for (int64_t i1b = begin * 64; i1b < end * 64; i1b += 64)" in pooled
    _, plain = generate(text, False)
    rng = np.random.default_rng(5)
    a, b = (random_array(rng, p.type.shape, p.type.dtype) for p in fn.params)
    results = []
    for name, c in (("pooled", pooled), ("plain", plain)):
        module = tvm_ffi.load_module(
            str(compile_library({"fused.c": c, **SUPPORT}, "fused.c", tmp_path / name))
        )
        out = np.full((16, 200), 99, np.float32)
        module[fn.name](a, b, out)
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])
    (want,) = evaluate(fn, {"a": a, "b": b})
    np.testing.assert_allclose(results[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("shape", "dtype", "lanes"),
    [
        ((70, 1024), "float32", 8),
        ((40, 768), "float32", 16),
        ((70, 128), "float32", 32),
        ((9, 4096), "float16", 8),
    ],
)
def test_rows_of_a_last_axis_reduction_are_fewer_lanes_and_the_same_bits(shape, dtype, lanes, tmp_path):
    """A reduction along the last axis has rows for lanes: a row of 1024 floats steps 4 KB
    from lane to lane, so each step of the reduction reads lines of one L1 set, and the
    block takes 8 lanes (blocking.lane_chunk); rows of 768 floats spread over 4 sets, 16
    lanes; of 128, 32. The blocked nest stays the plain nest's bits."""
    params = [("x", dtype, shape)]
    text = check_case(params, "mean(x, axes=[1], keepdims=true)", tmp_path, "sqrt(add(t, t))")
    assert f"double t0_total[{lanes}];" in text


def test_lane_chunk_counts_the_lines_of_each_l1_set():
    from byoc.generator.c_fused.blocking import lane_chunk
    from byoc.generator.c_fused.index import Anchor

    def chunk(read: str, size: int = 4) -> int:
        return lane_chunk(Anchor(reads=(read,)), "i", [size])

    assert chunk("x[i * 1024 + r0]") == 8  # 4 KB: one set
    assert chunk("x[i * 768 + r0]") == 16  # 3 KB: four sets
    assert chunk("x[i * 1024 + r0]", 2) == 8  # 2 KB: two sets, four lines each
    assert chunk("x[i * 128 + r0]") == 32  # 512 bytes: eight sets
    assert chunk("x[i * 2 + r0]") == 64 and chunk("x[i + r0]") == 64  # within a line
    assert chunk("x[r0 * 64 + i]") == 64  # the lanes are consecutive
    assert chunk("x[ii * 1024 + r0]") == 64  # another counter's stride
