"""ONNX GridSample composed at import from catalog ops (byoc/onnx/grid_sample.py), the
grid a model input: on json and on fused,ccompiler, judged by ONNX's reference
implementation, whose arithmetic byoc follows, and by onnxruntime, except for cubic
sampling with border padding (onnxruntime, as PyTorch, clamps only the taps there,
the reference the position first). The grids reach past [-1, 1], and a third of
their values are multiples of 1/4, which put positions exactly halfway between pixels
(nearest rounds those to even). A grid or a mode that ONNX does not define is a
located refusal."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from onnx_import_support import refusal  # noqa: E402

from byoc.onnx.backend import backend_for  # noqa: E402

CONFIGS = ["json", "fused,ccompiler"]
F, D, H, I32 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT32
PADDINGS = ("zeros", "border", "reflection")
EVERY_PADDING = [(p, a) for p in PADDINGS for a in (0, 1)]
RNG = np.random.default_rng(16)


def samplers(x_shape, grid_shape, settings, opset=20, elem=F, grid_elem=F, strict=True):
    """A model of one GridSample node per ``(mode, padding_mode, align_corners, x)`` of
    ``settings``, of the model input ``x`` (of ``elem``: a list gives each input x its
    own) and of one grid, the model input ``grid``: outputs y0, y1, ..."""
    elems = elem if isinstance(elem, list) else [elem]
    xs = sorted({s[3] if len(s) > 3 else "x" for s in settings})
    nodes = [
        helper.make_node(
            "GridSample",
            [s[3] if len(s) > 3 else "x", "grid"],
            [f"y{k}"],
            mode=s[0],
            padding_mode=s[1],
            align_corners=s[2],
        )
        for k, s in enumerate(settings)
    ]
    inputs = [helper.make_tensor_value_info(x, e, list(x_shape)) for x, e in zip(xs, elems * len(xs))]
    inputs.append(helper.make_tensor_value_info("grid", grid_elem, list(grid_shape)))
    dims = [f"d{k}" for k in range(len(x_shape))]
    outputs = [helper.make_tensor_value_info(f"y{k}", 0 if strict else F, dims) for k in range(len(nodes))]
    m = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs), opset_imports=[helper.make_opsetid("", opset)]
    )
    if strict:
        m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        onnx.checker.check_model(m)
    return m


def a_grid(shape, reach=1.6, dtype=np.float32) -> np.ndarray:
    """Positions in [-reach, reach], every third one a multiple of 1/4."""
    grid = RNG.uniform(-reach, reach, shape)
    quarters = np.round(grid * 4) / 4
    pick = np.arange(grid.size).reshape(shape) % 3 == 0
    return np.where(pick, quarters, grid).astype(dtype)


def by_byoc(m, feeds, config):
    return backend_for(config).prepare(m).run([feeds[i.name] for i in m.graph.input])


def by_reference(m, feeds):
    return ReferenceEvaluator(m).run(None, feeds)


def by_onnxruntime(m, feeds):
    session = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def same(got, want, setting, rtol=1e-5, atol=1e-6) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, setting
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=str(setting))


def onnxruntime_agrees(setting) -> bool:
    """Whether onnxruntime computes ``setting`` as the reference does."""
    return not (setting[0] in ("cubic", "bicubic") and setting[1] == "border")


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_every_padding_and_alignment_matches_the_reference_and_onnxruntime(config, mode):
    settings = [(mode, padding, align) for padding, align in EVERY_PADDING]
    m = samplers([2, 3, 3, 4], [2, 4, 5, 2], settings)
    feeds = {"x": RNG.standard_normal([2, 3, 3, 4]).astype(np.float32), "grid": a_grid([2, 4, 5, 2])}
    got = by_byoc(m, feeds, config)
    for setting, g, want, ort in zip(settings, got, by_reference(m, feeds), by_onnxruntime(m, feeds)):
        same(g, want, setting)
        if onnxruntime_agrees(setting):
            same(g, ort, setting)


@pytest.mark.parametrize("config", CONFIGS)
def test_volumetric_sampling_matches_the_reference_and_onnxruntime(config):
    """5-D X (N, C, D, H, W): every mode and padding (onnxruntime samples it, but not
    cubic)."""
    settings = [
        ("linear", "zeros", 1),
        ("linear", "border", 0),
        ("linear", "reflection", 1),
        ("nearest", "zeros", 0),
        ("nearest", "border", 1),
        ("nearest", "reflection", 0),
        ("cubic", "reflection", 1),
    ]
    m = samplers([1, 2, 3, 2, 4], [1, 2, 3, 2, 3], settings)
    feeds = {"x": RNG.standard_normal([1, 2, 3, 2, 4]).astype(np.float32), "grid": a_grid([1, 2, 3, 2, 3])}
    got = by_byoc(m, feeds, config)
    for setting, g, want in zip(settings, got, by_reference(m, feeds)):
        same(g, want, setting)
    sampled = samplers([1, 2, 3, 2, 4], [1, 2, 3, 2, 3], settings[:-1])
    for setting, g, ort in zip(settings, got, by_onnxruntime(sampled, feeds)):
        same(g, ort, setting)


@pytest.mark.parametrize("config", CONFIGS)
def test_opset_16_names_its_modes_bilinear_and_bicubic(config):
    """GridSample-16 (4-D only): bilinear, nearest and bicubic, as linear, nearest and
    cubic of GridSample-20, and as onnxruntime's GridSample-16."""
    settings = [
        ("bilinear", "zeros", 0),
        ("bilinear", "border", 1),
        ("nearest", "reflection", 0),
        ("bicubic", "border", 0),
        ("bicubic", "reflection", 1),
    ]
    m = samplers([1, 2, 4, 3], [1, 3, 3, 2], settings, opset=16)
    renamed = [({"bilinear": "linear", "bicubic": "cubic"}.get(s[0], s[0]), *s[1:]) for s in settings]
    feeds = {"x": RNG.standard_normal([1, 2, 4, 3]).astype(np.float32), "grid": a_grid([1, 3, 3, 2], reach=3)}
    got = by_byoc(m, feeds, config)
    wanted = by_reference(samplers([1, 2, 4, 3], [1, 3, 3, 2], renamed), feeds)
    for setting, g, want, ort in zip(settings, got, wanted, by_onnxruntime(m, feeds)):
        same(g, want, setting)
        if onnxruntime_agrees(setting):
            same(g, ort, setting)


@pytest.mark.parametrize("config", CONFIGS)
def test_float64_matches_onnxruntime(config):
    """X and grid of float64: positions and weights computed in float64 too."""
    settings = [("linear", "zeros", 1), ("nearest", "border", 0), ("cubic", "reflection", 0)]
    m = samplers([1, 2, 3, 5], [1, 4, 2, 2], settings, elem=D, grid_elem=D)
    feeds = {"x": RNG.standard_normal([1, 2, 3, 5]), "grid": a_grid([1, 4, 2, 2], dtype=np.float64)}
    for setting, g, ort in zip(settings, by_byoc(m, feeds, config), by_onnxruntime(m, feeds)):
        same(g, ort, setting, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("config", CONFIGS)
def test_nearest_sampling_of_integers_and_linear_of_float16(config):
    """Nearest sampling takes X of any dtype (a gather); a float16 X is interpolated
    with float32 positions and float16 sums, as the reference does."""
    settings = [("nearest", "zeros", 0, "a"), ("nearest", "reflection", 1, "a"), ("linear", "border", 0, "b")]
    m = samplers([1, 2, 3, 4], [1, 3, 3, 2], settings, elem=[I32, H])
    feeds = {
        "a": RNG.integers(-1000, 1000, [1, 2, 3, 4]).astype(np.int32),
        "b": RNG.standard_normal([1, 2, 3, 4]).astype(np.float16),
        "grid": a_grid([1, 3, 3, 2]),
    }
    for setting, g, want in zip(settings, by_byoc(m, feeds, config), by_reference(m, feeds)):
        if want.dtype == np.int32:
            assert g.dtype == want.dtype and np.array_equal(g, want), setting
        else:
            same(g, want, setting, rtol=1e-2, atol=1e-2)


def test_a_grid_whose_last_axis_is_not_the_spatial_rank_is_invalid():
    m = samplers([1, 1, 3, 4], [1, 2, 2, 3], [("linear", "zeros", 0)], strict=False)
    message = refusal(m)
    assert "ONNX node 0 (GridSample '', opset 20)" in message
    assert "its grid of shape [1, 2, 2, 3] does not fit X of shape [1, 1, 3, 4]" in message


def test_a_mode_named_as_another_opset_names_it_is_invalid():
    m = samplers([1, 1, 3, 4], [1, 2, 2, 2], [("bilinear", "zeros", 0)], strict=False)
    message = refusal(m)
    assert "ONNX node 0 (GridSample '', opset 20)" in message
    assert "its mode 'bilinear' is not one of linear, nearest, cubic" in message
