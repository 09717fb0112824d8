"""ONNX's signal ops, Einsum, Det and Pad's wrap mode composed at import from catalog
ops (byoc/onnx/signal.py), judged by onnxruntime on json and on fused,ccompiler; what
byoc cannot compose is a located refusal."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_import_support import refusal, same_as_onnxruntime  # noqa: E402

from byoc.errors import ByocError  # noqa: E402
from byoc.onnx.model_import import import_program  # noqa: E402
from byoc.onnx.signal import MAX_DET_SIZE  # noqa: E402

CONFIGS = ["json", "fused,ccompiler"]
RNG = np.random.default_rng(11)
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def model(nodes, inputs, outputs, initializers=(), opset=20, check=True):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if check:  # outputs of unknown shape get the shapes ONNX infers
        m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        onnx.checker.check_model(m)
    return m


def value(name, elem, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def constant(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


same_as_onnxruntime = partial(same_as_onnxruntime, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- DFT and STFT


DFT_CASES = [
    # input shape, axis, inverse, onesided, dft_length
    ((2, 8, 3, 1), 1, 0, 0, None),
    ((2, 8, 3, 2), 2, 0, 0, None),
    ((2, 8, 3, 2), -3, 1, 0, None),
    ((3, 9, 1), 1, 0, 1, None),
    ((3, 9, 1), 1, 0, 0, 12),
    ((3, 9, 2), 1, 1, 0, 6),
    ((2, 5, 4, 2), 1, 1, 1, None),
    ((2, 5, 4, 2), 1, 1, 1, 9),
    ((8, 2), 0, 0, 0, None),
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("shape, axis, inverse, onesided, length", DFT_CASES)
def test_dft_matches_onnxruntime(config, shape, axis, inverse, onesided, length):
    """Forward and inverse, real and complex, onesided (irfft when inverse), and a
    dft_length that truncates or zero-pads, along any signal axis (opset 20: the axis
    and the length are inputs, constants here)."""
    inits = [constant("axis", np.asarray(axis, np.int64))]
    if length is not None:
        inits.append(constant("n", np.asarray(length, np.int64)))
    node = helper.make_node(
        "DFT", ["x", "n" if length else "", "axis"], ["y"], inverse=inverse, onesided=onesided
    )
    m = model([node], [value("x", F, list(shape))], [value("y", F, None)], inits)
    same_as_onnxruntime(m, {"x": RNG.standard_normal(shape).astype(np.float32)}, config)


@pytest.mark.parametrize("elem", [F, TensorProto.DOUBLE])
def test_dft_opset_17_takes_its_axis_as_an_attribute(elem):
    m = model(
        [helper.make_node("DFT", ["x"], ["y"], axis=2)],
        [value("x", elem, [2, 3, 6, 1])],
        [value("y", elem, None)],
        opset=17,
    )
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    same_as_onnxruntime(m, {"x": RNG.standard_normal((2, 3, 6, 1)).astype(dtype)}, "json")


def test_dft_length_from_a_model_input_specialises_the_model():
    m = model(  # (ONNX Runtime 1.32 crashes on an absent axis: -2, the default, given)
        [helper.make_node("DFT", ["x", "n", "axis"], ["y"])],
        [value("x", F, [1, 6, 1]), value("n", I64, [])],
        [value("y", F, None)],
        [constant("axis", np.asarray(-2, np.int64))],
    )
    with pytest.raises(ByocError, match="model input 'n'"):
        import_program(m)
    for n in (4, 8):
        feeds = {"x": RNG.standard_normal((1, 6, 1)).astype(np.float32), "n": np.asarray(n, np.int64)}
        same_as_onnxruntime(m, feeds, "json")


def stft_model(window: str, signal_shape, step=3, length=8, onesided=1):
    inputs = [value("x", F, list(signal_shape))]
    inits = [constant("step", np.asarray(step, np.int64)), constant("length", np.asarray(length, np.int64))]
    if window == "input":
        inputs.append(value("w", F, [length]))
    elif window == "constant":
        inits.append(constant("w", np.hanning(length).astype(np.float32)))
    names = ["x", "step", "w" if window else "", "length"]
    return model(
        [helper.make_node("STFT", names, ["y"], onesided=onesided)],
        inputs,
        [value("y", F, None)],
        inits,
        opset=17,
    )


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("window", ["", "constant", "input"])
@pytest.mark.parametrize("onesided, parts", [(0, 1), (1, 1), (0, 2)])
def test_stft_matches_onnxruntime(config, window, onesided, parts):
    """Frames every frame_step samples (the signal's tail dropped), each windowed by a
    constant window (folded into the matrix), a model input (a product at run time) or
    none, then transformed; real and complex signals."""
    m = stft_model(window, (2, 30, parts), onesided=onesided)
    feeds = {"x": RNG.standard_normal((2, 30, parts)).astype(np.float32)}
    if window == "input":
        feeds["w"] = RNG.random(8).astype(np.float32)
    same_as_onnxruntime(m, feeds, config)


def test_dft_and_stft_refusals_are_located():
    last = model(
        [helper.make_node("DFT", ["x"], ["y"], axis=2)],
        [value("x", F, [2, 3, 1])],
        [value("y", F, [2, 3, 2])],
        opset=17,
        check=False,
    )
    assert "(DFT '', opset 17): its axis 2 is not a signal axis" in refusal(last)
    parts = model(
        [helper.make_node("DFT", ["x"], ["y"], axis=1)],
        [value("x", F, [2, 3, 3])],
        [value("y", F, [2, 3, 2])],
        opset=17,
        check=False,
    )
    assert "whose last dimension is not 1 (real) or 2 (complex)" in refusal(parts)
    window = stft_model("input", (1, 20, 1), length=8)
    window.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 5
    assert "(STFT '', opset 17): its window has shape [5], not [8]" in refusal(window)
    too_long = stft_model("", (1, 6, 1), length=8)
    assert "do not frame a signal of 6 samples" in refusal(too_long)


# ---------------------------------------------------------------- windows and mel matrix


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
def test_a_window_of_a_model_input_size_specialises_the_model(op):
    m = model(
        [helper.make_node(op, ["n"], ["w"], periodic=0), helper.make_node("Mul", ["w", "w"], ["y"])],
        [value("n", I64, [])],
        [value("y", F, ["n"])],
        opset=17,
    )
    with pytest.raises(ByocError, match="model input 'n'"):
        import_program(m)
    for n in (5, 12):
        same_as_onnxruntime(m, {"n": np.asarray(n, np.int64)}, "json", rtol=1e-6, atol=1e-6)


def test_mel_weight_matrix_folds_for_its_sizes():
    names = ["bins", "length", "rate", "low", "high"]
    inits = [
        constant("bins", np.asarray(6, np.int64)),
        constant("length", np.asarray(32, np.int64)),
        constant("rate", np.asarray(16000, np.int64)),
        constant("low", np.asarray(100.0, np.float32)),
    ]
    m = model(
        [helper.make_node("MelWeightMatrix", names, ["m"]), helper.make_node("MatMul", ["x", "m"], ["y"])],
        [value("x", F, [3, 17]), value("high", F, [])],
        [value("y", F, None)],
        inits,
        opset=17,
    )
    feeds = {"x": RNG.random((3, 17)).astype(np.float32), "high": np.asarray(7000.0, np.float32)}
    same_as_onnxruntime(m, feeds, "json", rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- Einsum


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("bii->b", [(2, 3, 3)]),
    ("...ii->...i", [(2, 3, 4, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 3)]),
    ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]),
    ("b i j , b j -> b i", [(2, 3, 4), (2, 4)]),
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("equation, shapes", EINSUM_CASES)
def test_einsum_matches_onnxruntime(config, equation, shapes):
    names = [f"x{k}" for k in range(len(shapes))]
    m = model(
        [helper.make_node("Einsum", names, ["y"], equation=equation)],
        [value(n, F, list(s)) for n, s in zip(names, shapes)],
        [value("y", F, None)],
        opset=12,
    )
    feeds = {n: RNG.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)}
    same_as_onnxruntime(m, feeds, config)


def test_einsum_of_integers_transposes_and_takes_diagonals_but_does_not_sum():
    I32 = TensorProto.INT32
    m = model(
        [helper.make_node("Einsum", ["x"], ["y"], equation="kii->ik")],
        [value("x", I32, [2, 3, 3])],
        [value("y", I32, None)],
        opset=12,
    )
    same_as_onnxruntime(m, {"x": RNG.integers(-9, 9, (2, 3, 3)).astype(np.int32)}, "json")
    summed = model(
        [helper.make_node("Einsum", ["x"], ["y"], equation="ij->i")],
        [value("x", I32, [2, 3])],
        [value("y", I32, None)],
        opset=12,
    )
    assert "(Einsum '', opset 12): byoc does not support an Einsum of int32 that sums" in refusal(summed)


@pytest.mark.parametrize(
    "equation, shapes, message",
    [
        ("ij,jk->ik", [(3, 4)], "has 2 operand(s), but it has 1 input(s)"),
        ("ijk->i", [(3, 4)], "operand 0 'ijk' does not fit its input of rank 2"),
        ("ij,jk->ik", [(3, 4), (5, 2)], "gives index 'j' sizes 4 and 5"),
        ("ij->iz", [(3, 4)], "repeats a label or names one no operand has"),
        ("i1->i", [(3, 4)], "is not letters and at most one '...'"),
    ],
)
def test_einsum_bad_equations_are_located(equation, shapes, message):
    names = [f"x{k}" for k in range(len(shapes))]
    m = model(
        [helper.make_node("Einsum", names, ["y"], equation=equation)],
        [value(n, F, list(s)) for n, s in zip(names, shapes)],
        [value("y", F, [3])],
        opset=12,
        check=False,
    )
    text = refusal(m)
    assert "ONNX node 0 (Einsum ''" in text and message in text


# ---------------------------------------------------------------- Det and Pad wrap


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (2, 4, 4), (2, 2, 3, 3)])
def test_det_matches_onnxruntime(config, shape):
    m = model([helper.make_node("Det", ["x"], ["y"])], [value("x", F, list(shape))], [value("y", F, None)])
    same_as_onnxruntime(m, {"x": RNG.standard_normal(shape).astype(np.float32)}, config)


def test_det_refusals_are_located():
    n = MAX_DET_SIZE + 1
    big = model([helper.make_node("Det", ["x"], ["y"])], [value("x", F, [n, n])], [value("y", F, None)])
    assert f"(Det '', opset 20): byoc does not support the determinant of {n} x {n}" in refusal(big)
    oblong = model(
        [helper.make_node("Det", ["x"], ["y"])], [value("x", F, [2, 3])], [value("y", F, [])], check=False
    )
    assert "its input has shape [2, 3], not [..., n, n]" in refusal(oblong)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize(
    "pads",
    [[0, 1, 2, 0, 3, 1], [1, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0], [2, 4, 5, 2, 4, 5], [0, -1, 2, 0, 1, -2]],
)
def test_wrap_pad_matches_onnxruntime(config, pads):
    """Wrap reads positions modulo each axis's size, also for pads wider than the axis
    (ONNX Runtime's reference) and negative ones (crops)."""
    m = model(
        [helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")],
        [value("x", TensorProto.INT32, [2, 3, 4])],
        [value("y", TensorProto.INT32, None)],
        [constant("pads", np.asarray(pads, np.int64))],
        opset=19,
    )
    same_as_onnxruntime(m, {"x": RNG.integers(-50, 50, (2, 3, 4)).astype(np.int32)}, config)


def test_wrap_pad_that_crops_an_axis_away_is_located():
    m = model(
        [helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")],
        [value("x", F, [2, 3])],
        [value("y", F, [2, 0])],
        [constant("pads", np.asarray([0, -2, 0, -1], np.int64))],
        opset=19,
        check=False,
    )
    assert "(Pad '', opset 19): its pads [0, -2, 0, -1] leave nothing of axis 1 (of size 3)" in refusal(m)
