"""Winograd F(2x2, 3x3) in the dnnl support code (spec/backends/dnnl/dnnl_support.c): the 3x3 stride-1
convolutions that dnnl_byoc_winograd_fits accepts run as input and result transforms
around one oneDNN batched matmul. These tests check which convolutions take it (the
support code compiled with a small entry point), and run it end to end against the numpy
reference across geometries, padding, ragged channel blocks and edge tiles, with a
bias, a folded batch_norm or a residual (also passed as the output), for constant
weights (transformed once, at init) and weights that are inputs (each call).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from conftest import random_array
from dnnl_support import assert_close, const, support_source, without_support
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from libraries import missing_library

import byoc
from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.generator.partition import partition
from byoc.runtime.build import build_spec_module

if missing_library("dnnl"):
    pytest.skip(missing_library("dnnl"), allow_module_level=True)

BACKEND = "dnnl"

ENTRY = """
/* 1 when the packed conv of geometry g runs as Winograd, 0 when it runs oneDNN's
   convolution, -1 when it cannot be made. */
int byoc_test_winograd(const dnnl_byoc_conv_geometry* g) {
  dnnl_engine_t engine = NULL;
  if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) return -1;
  dnnl_byoc_packed_conv_t c;
  memset(&c, 0, sizeof c);
  const int layouts[3] = {DNNL_BYOC_LAYOUT_plain, DNNL_BYOC_LAYOUT_plain, DNNL_BYOC_LAYOUT_plain};
  const int made = dnnl_byoc_packed_conv2d(&c, engine, g, 1, 0, 1, NULL, NULL, 0.0, layouts) == 0;
  const int winograd = made ? c.winograd.n > 0 : -1;
  if (made) dnnl_byoc_packed_conv_free(&c);
  dnnl_engine_destroy(engine);
  return winograd;
}
"""


class ConvGeometry(ctypes.Structure):
    """dnnl_support.h's dnnl_byoc_conv_geometry."""

    _fields_ = [
        (name, ctypes.c_int64)
        for name in "n c h w o kh kw oh ow stride_h stride_w pad_top pad_left pad_bottom pad_right".split()
        + "dilation_h dilation_w groups".split()
    ]


@pytest.fixture(scope="module")
def winograd():
    spec = load_backend(BACKEND)
    values = spec.template_values()
    sources = {"winograd.c": support_source(spec) + ENTRY, **{f.name: f.text for f in spec.support}}
    library = build_spec_module(without_support(spec), sources, "winograd.c", values)
    fn = ctypes.CDLL(str(library)).byoc_test_winograd
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p]

    def runs_winograd(n, c, h, w, m, kh=3, kw=3, stride=1, pad=1, dilation=1, groups=1) -> int:
        oh = (h + 2 * pad - (kh - 1) * dilation - 1) // stride + 1
        ow = (w + 2 * pad - (kw - 1) * dilation - 1) // stride + 1
        g = ConvGeometry(
            n=n, c=c, h=h, w=w, o=m, kh=kh, kw=kw, oh=oh, ow=ow, stride_h=stride, stride_w=stride,
            pad_top=pad, pad_left=pad, pad_bottom=pad, pad_right=pad,
            dilation_h=dilation, dilation_w=dilation, groups=groups,
        )  # fmt: skip
        return fn(ctypes.byref(g))

    return runs_winograd


INTEL = "GenuineIntel" in Path("/proc/cpuinfo").read_text()
"""An Intel CPU, whose brgconv beats the Winograd from 256 x 256 channels
(dnnl_byoc_intel_cpu in dnnl_support.c)."""

# (geometry, whether it runs as Winograd): ResNet-50's 3x3 layers but its last stage;
# then each condition of dnnl_byoc_winograd_fits failing on its own
FITS = [
    (dict(n=1, c=64, h=56, w=56, m=64), 1),
    (dict(n=1, c=128, h=28, w=28, m=128), 1),
    (dict(n=1, c=256, h=14, w=14, m=256), 0 if INTEL else 1),
    (dict(n=1, c=128, h=14, w=14, m=256), 1),  # under 256 x 256 channels: Winograd on Intel too
    (dict(n=2, c=32, h=9, w=9, m=40, pad=0), 1),  # 2 images of 4x4 tiles (7x7 results)
    (dict(n=1, c=512, h=7, w=7, m=512), 0),  # 16 tiles: the matmuls too short
    (dict(n=1, c=16, h=56, w=56, m=64), 0),  # too few input channels
    (dict(n=1, c=64, h=56, w=56, m=16), 0),  # too few output channels
    (dict(n=1, c=1024, h=14, w=14, m=512), 0),  # 32 MB of transformed weights
    (dict(n=5, c=64, h=56, w=56, m=64), 1),  # 30.6 MB of transforms a call
    (dict(n=6, c=64, h=56, w=56, m=64), 0),  # 36.8 MB: left to oneDNN
    (dict(n=1, c=64, h=56, w=56, m=64, stride=2), 0),
    (dict(n=1, c=64, h=56, w=56, m=64, dilation=2, pad=2), 0),
    (dict(n=1, c=64, h=56, w=56, m=64, groups=2), 0),
    (dict(n=1, c=64, h=56, w=56, m=64, kh=1, kw=1, pad=0), 0),
    (dict(n=1, c=64, h=56, w=56, m=64, kh=5, kw=5, pad=2), 0),
]


def geometry_id(case) -> str:
    geometry, expected = case
    return "_".join(f"{k}{v}" for k, v in geometry.items()) + ("-winograd" if expected else "-onednn")


@pytest.mark.parametrize("geometry, expected", FITS, ids=[geometry_id(case) for case in FITS])
def test_winograd_takes_the_3x3_convolutions_it_fits(winograd, geometry, expected):
    assert winograd(**geometry) == expected


# what follows the conv: a bias and a relu; a residual (r) and a relu; a batch_norm
TAILS = {
    "bias_relu": ("b: float32[{m}]", "relu(bias_add(y, b, axis=1))"),
    "residual": ("r: float32[{n}, {m}, {oh}, {ow}]", "relu(add(y, r))"),
    "batch_norm": (
        "s: float32[{m}], t: float32[{m}], mu: float32[{m}], v: float32[{m}]",
        "batch_norm(y, s, t, mu, abs(v))",
    ),
}

GRAPH = """\
graph main(x: float32[{n}, {c}, {h}, {w}], {k_param}{tail_params}) {{
{k_const}  y = conv(x, k, pads=[{pt}, {pl}, {pb}, {pr}])
  return {tail}
}}
"""


@st.composite
def winograd_geometries(draw):
    """A 3x3 stride-1 conv that Winograd takes: 32 to 80 channels (a block of 64 and a
    ragged one past it), odd and even results (edge tiles of one pixel), unequal pads,
    and at least 25 tiles (results of at least 9x9)."""
    p = {"n": draw(st.integers(1, 2)), "c": draw(st.sampled_from([32, 37, 64, 80]))}
    p["m"] = draw(st.sampled_from([32, 48, 72]))
    p.update({k: draw(st.integers(0, 2)) for k in ("pt", "pl", "pb", "pr")})
    p["h"] = draw(st.integers(11, 15))
    p["w"] = draw(st.integers(11, 15))
    p["oh"] = p["h"] + p["pt"] + p["pb"] - 2
    p["ow"] = p["w"] + p["pl"] + p["pr"] - 2
    assert p["n"] * ((p["oh"] + 1) // 2) * ((p["ow"] + 1) // 2) >= 25
    return p


SLOW = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("constant", [True, False], ids=["constant_weights", "input_weights"])
@pytest.mark.parametrize("tail", list(TAILS))
@SLOW
@given(p=winograd_geometries(), seed=st.integers(0, 2**16))
def test_winograd_matches_the_reference(constant, tail, p, seed):
    rng = np.random.default_rng(seed)
    shape = (p["m"], p["c"], 3, 3)
    tail_params, expression = TAILS[tail]
    if constant:
        p.update(k_param="", k_const=f"  k = {const(rng, shape, -0.5, 0.5)}\n")
    else:
        p.update(k_param=f"k: float32[{', '.join(map(str, shape))}], ", k_const="")
    graph = GRAPH.format(tail_params=tail_params.format(**p), tail=expression, **p)
    program = partition(parse(graph, "graph"), [load_backend(BACKEND)], load_catalog())
    fn = program.functions[0]
    conv = [n for n in fn.nodes if n.callee is not None and n.callee.backend == BACKEND]
    assert conv, "the conv went to dnnl"
    inputs = {q.name: random_array(rng, q.type.shape, q.type.dtype) for q in fn.params}
    (want,) = evaluate(fn, inputs)
    model = byoc.build(program)
    (got,) = model(**inputs)
    assert_close(got, want)
    if tail == "residual" and all(n.callee is not None for n in fn.nodes):
        (module,) = [m for m in model.modules if m.kind == "library"]
        (symbol,) = module.symbols()
        args = [inputs[q.name].copy() for q in fn.params]
        module.get_function(symbol)(*args, args[-1])  # the residual r, last, is the output too
        assert_close(args[-1], want)


def test_winograd_agrees_with_onednns_convolution(rng):
    """The same graph built with the option on and off: Winograd's results are within a
    few ulps of oneDNN's direct convolution, on ResNet's first stage shape."""
    graph = GRAPH.format(
        n=1,
        c=64,
        h=56,
        w=56,
        pt=1,
        pl=1,
        pb=1,
        pr=1,
        k_param="k: float32[64, 64, 3, 3], ",
        k_const="",
        tail_params="b: float32[64]",
        tail="relu(bias_add(y, b, axis=1))",
    )
    program = partition(parse(graph, "graph"), [load_backend(BACKEND)], load_catalog())
    inputs = {q.name: random_array(rng, q.type.shape, q.type.dtype) for q in program.functions[0].params}
    (winograd,) = byoc.build(program)(**inputs)
    (direct,) = byoc.build(program, options={"winograd": "false"})(**inputs)
    scale = float(np.max(np.abs(direct)))
    np.testing.assert_allclose(winograd, direct, rtol=1e-5, atol=1e-6 * scale)
    assert not np.array_equal(winograd, direct), "the option switched the algorithm"


def assert_same_specials(got: np.ndarray, want: np.ndarray) -> None:
    """NaN where the reference has NaN, infinities of its signs where it has them, and
    the finite elements close (assert_close alone would take an inf as its scale)."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    finite = np.isfinite(want)
    assert_close(got[finite], want[finite])


# (what is not finite, where): one source element (the case: inf became NaN in
# most of the pixels it reaches), a whole source pixel (every channel: NaN where weights
# of both signs meet it), one at a corner (an edge tile), and one weight
SPECIALS = {
    "inf-element": ("x", np.inf, (0, 5, 6, 7)),
    "minus-inf-element": ("x", -np.inf, (0, 3, 0, 10)),
    "nan-element": ("x", np.nan, (0, 0, 12, 12)),
    "inf-pixel": ("x", np.inf, (0, slice(None), 4, 4)),
    "inf-corner": ("x", np.inf, (0, 7, 0, 0)),
    "inf-weight": ("k", np.inf, (3, 5, 1, 1)),
}


@pytest.mark.parametrize("constant", [True, False], ids=["constant_weights", "input_weights"])
@pytest.mark.parametrize("tail", list(TAILS))
@pytest.mark.parametrize("special", list(SPECIALS))
def test_winograd_keeps_infinities_and_nans(constant, tail, special):
    """A value that is not finite gives what the direct convolution gives: the tiles it
    reaches are computed directly (the transforms would subtract inf from inf)."""
    rng = np.random.default_rng(7)
    p = dict(n=1, c=40, m=36, h=13, w=13, pt=1, pl=1, pb=1, pr=1, oh=13, ow=13)
    shape = (p["m"], p["c"], 3, 3)
    name, value, at = SPECIALS[special]
    weights = rng.uniform(-0.5, 0.5, shape).astype(np.float32)
    if name == "k":
        weights[at] = value
    if constant:
        values = ", ".join(repr(float(v)) for v in weights.ravel())
        p.update(k_param="", k_const=f"  k = const float32[{', '.join(map(str, shape))}] [{values}]\n")
    else:
        p.update(k_param=f"k: float32[{', '.join(map(str, shape))}], ", k_const="")
    tail_params, expression = TAILS[tail]
    graph = GRAPH.format(tail_params=tail_params.format(**p), tail=expression, **p)
    program = partition(parse(graph, "graph"), [load_backend(BACKEND)], load_catalog())
    fn = program.functions[0]
    inputs = {q.name: random_array(rng, q.type.shape, q.type.dtype) for q in fn.params}
    if not constant:
        inputs["k"] = weights
    if name == "x":
        inputs["x"][at] = value
    (want,) = evaluate(fn, inputs)
    assert not np.all(np.isfinite(want)), "the case reaches the result"
    (got,) = byoc.build(program)(**inputs)
    assert_same_specials(got, want)


def test_winograd_in_blocks_of_tiles_of_uneven_size_keeps_a_late_infinity():
    """841 tiles (a 57x57 result) in blocks that each thread takes in turn, the last one
    short: every tile's result lands where it belongs, and an infinity in a late block
    is computed directly as in the first."""
    rng = np.random.default_rng(11)
    p = dict(n=1, c=32, m=32, h=57, w=57, pt=1, pl=1, pb=1, pr=1)
    p.update(k_param="k: float32[32, 32, 3, 3], ", k_const="")
    tail_params, expression = TAILS["bias_relu"]
    graph = GRAPH.format(tail_params=tail_params.format(**p), tail=expression, **p)
    program = partition(parse(graph, "graph"), [load_backend(BACKEND)], load_catalog())
    fn = program.functions[0]
    inputs = {q.name: random_array(rng, q.type.shape, q.type.dtype) for q in fn.params}
    inputs["x"][0, 3, 55, 50] = np.inf  # in tile 27 * 29 + 25, of the last block
    (want,) = evaluate(fn, inputs)
    (got,) = byoc.build(program)(**inputs)
    assert_same_specials(got, want)
    assert not np.all(np.isfinite(want))
