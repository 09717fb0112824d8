"""ONNX normalisations, pools and layout ops composed at import from catalog ops
(byoc/onnx/composed.py), and the losses that import as ONNX's own function bodies,
judged by onnxruntime on json and on fused,ccompiler; what byoc cannot compose is a
located refusal."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_import_support import refusal, same_as_onnxruntime  # noqa: E402

from byoc.onnx.backend import backend_for  # noqa: E402
from byoc.onnx.ops import onnx_ops  # noqa: E402

CONFIGS = ["json", "fused,ccompiler"]
RNG = np.random.default_rng(23)
F = TensorProto.FLOAT
I64 = TensorProto.INT64
B = TensorProto.BOOL


def model(nodes, inputs, outputs, initializers=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    onnx.checker.check_model(m)
    return m


def value(name, elem, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def constant(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def one_node(op, x_shape, consts=(), attrs=None, opset=18, outputs=("y",), elem=F):
    """A model of one ``op`` node on x (a model input) and constant further inputs."""
    node = helper.make_node(op, ["x", *(n for n, _ in consts)], list(outputs), **(attrs or {}))
    return model(
        [node],
        [value("x", elem, list(x_shape))],
        [value(o, 0) for o in outputs],
        [constant(n, a) for n, a in consts],
        opset,
    )


def unchecked(op, x_shape, consts=(), attrs=None, rank=2):
    """A model of one ``op`` node that ONNX's shape inference would reject: its output
    of ``rank`` unnamed dimensions."""
    node = helper.make_node(op, ["x", *(n for n, _ in consts)], ["y"], **(attrs or {}))
    y = value("y", F, [f"d{k}" for k in range(rank)])
    graph = helper.make_graph(
        [node], "g", [value("x", F, list(x_shape))], [y], [constant(n, a) for n, a in consts]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


same_as_onnxruntime = partial(same_as_onnxruntime, rtol=1e-4, atol=1e-5)


def x_of(shape) -> dict[str, np.ndarray]:
    return {"x": RNG.standard_normal(shape).astype(np.float32)}


# ---------------------------------------------------------------- judged by onnxruntime


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("p, axis", [(1, 0), (2, -1), (2, 1)])
def test_lp_normalization(config, p, axis):
    feeds = x_of((3, 4, 5))
    feeds["x"][0, 0] = 0.0  # a zero norm along every axis through it, for some of them
    feeds["x"][:, 0, 0] = 0.0
    same_as_onnxruntime(one_node("LpNormalization", (3, 4, 5), attrs={"p": p, "axis": axis}), feeds, config)


LP_POOLS = [
    {"kernel_shape": [3, 2], "p": 3},
    {"kernel_shape": [3, 3], "p": 2, "pads": [1, 0, 2, 1], "strides": [2, 1]},
    {"kernel_shape": [2, 2], "p": 1, "dilations": [2, 1], "strides": [1, 2]},
    {"kernel_shape": [3, 2], "p": 2, "auto_pad": "SAME_LOWER", "strides": [2, 2]},
    {"kernel_shape": [3, 3], "p": 4, "strides": [2, 2], "ceil_mode": 1, "pads": [1, 1, 0, 0]},
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("attrs", LP_POOLS, ids=range(len(LP_POOLS)))
def test_lp_pool(config, attrs):
    same_as_onnxruntime(one_node("LpPool", (2, 3, 8, 7), attrs=attrs), x_of((2, 3, 8, 7)), config)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_compress(config, axis):
    condition = np.array([True, False, True, True, False])  # shorter than the flattened input: cut there
    m = one_node("Compress", (5, 4), [("c", condition)], {} if axis is None else {"axis": axis})
    same_as_onnxruntime(m, x_of((5, 4)), config)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("shape, axes", [([3, 9, 2], None), ([8, 2], [1, -1]), ([1], [2])])
def test_center_crop_pad(config, shape, axes):
    m = one_node(
        "CenterCropPad", (6, 5, 4), [("s", np.array(shape, np.int64))], {} if axes is None else {"axes": axes}
    )
    same_as_onnxruntime(m, x_of((6, 5, 4)), config)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("batch_axis", [0, 1])
def test_reverse_sequence(config, batch_axis):
    lens = np.array([4, 0, 1, 3], np.int64)
    shape = (4, 5, 2) if batch_axis == 0 else (5, 4, 2)
    attrs = {"batch_axis": batch_axis, "time_axis": 1 - batch_axis}
    same_as_onnxruntime(one_node("ReverseSequence", shape, [("n", lens)], attrs), x_of(shape), config)


@pytest.mark.parametrize("config", CONFIGS)
def test_col2im_with_pads_strides_and_dilations(config):
    image, block = np.array([6, 7], np.int64), np.array([2, 3], np.int64)
    attrs = {"pads": [1, 0, 2, 1], "strides": [2, 1], "dilations": [1, 2]}
    blocks = [(6 + 3 - 1 * 1 - 1) // 2 + 1, (7 + 1 - 2 * 2 - 1) // 1 + 1]
    shape = (2, 3 * 6, blocks[0] * blocks[1])
    m = one_node("Col2Im", shape, [("i", image), ("b", block)], attrs)
    same_as_onnxruntime(m, x_of(shape), config)


@pytest.mark.parametrize("config", CONFIGS)
def test_dropout_mask_is_all_true_in_inference(config):
    m = one_node("Dropout", (3, 4), [("r", np.array(0.3, np.float32))], outputs=("y", "mask"))
    feeds = x_of((3, 4))
    y, mask = backend_for(config).prepare(m).run([feeds["x"]])
    np.testing.assert_array_equal(y, feeds["x"])
    assert mask.dtype == np.bool_ and mask.shape == (3, 4) and mask.all()


LOSSES = [
    ("NegativeLogLikelihoodLoss", "mean", -1, True, 13),
    ("NegativeLogLikelihoodLoss", "none", 2, False, 12),
    ("SoftmaxCrossEntropyLoss", "sum", 1, True, 13),
    ("SoftmaxCrossEntropyLoss", "mean", -2, False, 12),
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("op, reduction, ignore, weighted, opset", LOSSES)
def test_losses_import_as_their_functions(config, op, reduction, ignore, weighted, opset):
    """The losses have no row: ONNX's function bodies, with the target known only at
    run time, N-D targets, weights and a negative ignore_index."""
    assert op not in onnx_ops()
    inputs = ["x", "t"] + (["w"] if weighted else [])
    outputs = ["y", "log_prob"] if op.startswith("Softmax") else ["y"]
    node = helper.make_node(op, inputs, outputs, reduction=reduction, ignore_index=ignore)
    declared = [value("x", F, [3, 5, 2]), value("t", I64, [3, 2])] + (
        [value("w", F, [5])] if weighted else []
    )
    m = model([node], declared, [value(o, 0) for o in outputs], opset=opset)
    target = RNG.integers(0, 5, (3, 2)).astype(np.int64)
    target[1, 0] = ignore
    feeds = {"x": RNG.standard_normal((3, 5, 2)).astype(np.float32), "t": target}
    if weighted:
        feeds["w"] = RNG.random(5).astype(np.float32)
    same_as_onnxruntime(m, feeds, config)


# ---------------------------------------------------------------- located refusals


def test_lp_normalization_of_p_3_is_invalid():
    message = refusal(one_node("LpNormalization", (2, 3), attrs={"p": 3}))
    assert "LpNormalization" in message and "its p is 3" in message


def test_compress_beyond_its_axis_is_invalid():
    condition = np.array([False, True, False, True])
    message = refusal(one_node("Compress", (3, 2), [("c", condition)], {"axis": 0}))
    assert "Compress" in message and "position 3" in message


def test_center_crop_pad_needs_one_size_per_axis():
    message = refusal(unchecked("CenterCropPad", (4, 4), [("s", np.array([2, 2, 2], np.int64))]))
    assert "CenterCropPad" in message and "not 2 integers" in message


def test_reverse_sequence_longer_than_its_time_axis_is_invalid():
    m = one_node("ReverseSequence", (3, 2), [("n", np.array([1, 4], np.int64))])
    message = refusal(m)
    assert "ReverseSequence" in message and "[1, 4]" in message


def test_col2im_of_the_wrong_number_of_blocks_is_invalid():
    consts = [("i", np.array([4, 4], np.int64)), ("b", np.array([2, 2], np.int64))]
    message = refusal(unchecked("Col2Im", (1, 4, 8), consts, rank=4))
    assert "Col2Im" in message and "[N, C * 4, 9]" in message


def test_dropout_in_training_mode_is_refused():
    consts = [("r", np.array(0.5, np.float32)), ("t", np.array(True))]
    message = refusal(one_node("Dropout", (2, 3), consts))
    assert "Dropout" in message and "training mode" in message


def test_dropout_in_training_mode_of_ratio_0_is_the_identity():
    consts = [("r", np.array(0.0, np.float32)), ("t", np.array(True))]
    m = one_node("Dropout", (2, 3), consts, outputs=("y", "mask"))
    feeds = x_of((2, 3))
    y, mask = backend_for("json").prepare(m).run([feeds["x"]])
    np.testing.assert_array_equal(y, feeds["x"])
    assert mask.all()


def test_lp_pool_of_a_kernel_that_does_not_fit_is_invalid():
    message = refusal(unchecked("LpPool", (1, 1, 4, 4), attrs={"kernel_shape": [2, 2, 2]}, rank=4))
    assert "LpPool" in message and "kernel_shape [2, 2, 2]" in message


def test_a_condition_given_as_a_model_input_is_asked_for():
    """A model input where byoc needs a constant: the backend builds the model for the
    value it is given, and a different value gives a different result."""
    node = helper.make_node("Compress", ["x", "c"], ["y"], axis=1)
    m = model([node], [value("x", F, [2, 3]), value("c", B, [3])], [value("y", F, None)])
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    rep = backend_for("json").prepare(m)
    for condition in (np.array([True, False, True]), np.array([False, True, False])):
        (y,) = rep.run([x, condition])
        np.testing.assert_array_equal(y, x[:, condition])


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("output_shape", [None, [1, 2, 7, 6]])
def test_max_unpool_inverts_max_pool(config, output_shape):
    """onnxruntime's MaxPool values and indices into MaxUnpool: the maxima back in
    place, zeros elsewhere, as onnxruntime has it. With room added by output_shape,
    onnxruntime reads the indices as indices into that larger output, ONNX's reference
    (and its node test) as indices into the shape the attributes imply, padded at the
    end: byoc follows ONNX's reference, which judges that case."""
    pool = model(
        [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2])],
        [value("x", F, [1, 2, 6, 4])],
        [value("p", F, [1, 2, 3, 2]), value("i", I64, [1, 2, 3, 2])],
        opset=11,
    )
    session = onnxruntime.InferenceSession(pool.SerializeToString(), providers=["CPUExecutionProvider"])
    p, i = session.run(None, {"x": RNG.standard_normal((1, 2, 6, 4)).astype(np.float32)})
    inputs = ["p", "i"] + (["shape"] if output_shape else [])
    unpool = helper.make_node("MaxUnpool", inputs, ["y"], kernel_shape=[2, 2], strides=[2, 2])
    inits = [constant("shape", np.asarray(output_shape, np.int64))] if output_shape else []
    m = model(
        [unpool],
        [value("p", F, [1, 2, 3, 2]), value("i", I64, [1, 2, 3, 2])],
        [value("y", F, output_shape or [1, 2, 6, 4])],
        inits,
        opset=11,
    )
    if output_shape is None:
        same_as_onnxruntime(m, {"p": p, "i": i}, config)
        return
    from onnx.reference import ReferenceEvaluator

    (want,) = ReferenceEvaluator(m).run(None, {"p": p, "i": i})
    (got,) = backend_for(config).prepare(m).run([p, i])
    np.testing.assert_array_equal(got, want)


def test_max_unpool_to_a_smaller_output_is_refused():
    unpool = helper.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    m = helper.make_model(
        helper.make_graph(
            [unpool],
            "g",
            [value("x", F, [1, 1, 2, 2]), value("i", I64, [1, 1, 2, 2])],
            [value("y", F, [1, 1, 3, 3])],
            [constant("shape", np.asarray([1, 1, 3, 3], np.int64))],
        ),
        opset_imports=[helper.make_opsetid("", 11)],
    )
    assert "output_shape [1, 1, 3, 3] smaller than the shape [1, 1, 4, 4]" in refusal(m)


# ---------------------------------------------------------------- TensorScatter (opset 24)


def tensor_scatter_model(cache, update, attrs, with_indices=True, checked=True):
    """A TensorScatter of a cache and an update (and write indices); unchecked: not run
    through ONNX's shape inference, which would reject it first."""
    inputs = [value("past", F, list(cache)), value("update", F, list(update))]
    inputs += [value("write", I64, [cache[0]])] if with_indices else []
    node = helper.make_node("TensorScatter", [i.name for i in inputs], ["present"], **attrs)
    if checked:
        return model([node], inputs, [value("present", F, list(cache))], opset=24)
    graph = helper.make_graph([node], "g", inputs, [value("present", F, list(cache))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_at_write_indices_given_at_run_time(config, mode):
    """A KV cache's update: each batch entry's steps written from its own write index
    (a model input), wrapping around the cache in mode circular; judged by ONNX's
    reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    m = tensor_scatter_model((2, 3, 6, 4), (2, 3, 3, 4), {"mode": mode, "axis": 2})
    feeds = {
        "past": RNG.standard_normal((2, 3, 6, 4)).astype(np.float32),
        "update": RNG.standard_normal((2, 3, 3, 4)).astype(np.float32),
        "write": np.array([1, 4 if mode == "circular" else 3], np.int64),
    }
    (want,) = ReferenceEvaluator(m).run(None, feeds)
    (got,) = backend_for(config).prepare(m).run([feeds[i.name] for i in m.graph.input])
    np.testing.assert_array_equal(got, want)


def test_tensor_scatter_along_the_batch_axis_is_invalid():
    message = refusal(
        tensor_scatter_model((2, 5, 4), (2, 5, 4), {"axis": 0}, with_indices=False, checked=False)
    )
    assert "TensorScatter" in message and "not a sequence axis" in message


def test_tensor_scatter_of_more_steps_than_the_cache_is_invalid():
    message = refusal(
        tensor_scatter_model((2, 3, 4), (2, 5, 4), {"axis": 1}, with_indices=False, checked=False)
    )
    assert "TensorScatter" in message and "5 steps, more than the cache's 3" in message


# ---------------------------------------------------------------- MaxPool's indices


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize(
    "shape, attrs",
    [
        ((2, 3, 6, 7), {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "strides": [2, 1]}),
        ((2, 3, 6, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "storage_order": 1}),
        ((1, 2, 7, 7), {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]}),
        ((2, 2, 9), {"kernel_shape": [3], "strides": [2], "auto_pad": "SAME_UPPER"}),
    ],
)
def test_max_pool_indices_match_onnxruntime(config, shape, attrs):
    """The second output: each maximum's number in the flattened input, row- or
    column-major (storage_order), through pads, strides, dilations and ceil_mode, with
    repeated values so that ties pick the first."""
    m = one_node("MaxPool", shape, attrs=attrs, outputs=("y", "i"))
    x = RNG.integers(-3, 4, size=shape).astype(np.float32)
    same_as_onnxruntime(m, {"x": x}, config)


@pytest.mark.parametrize("attr", ["kernel_shape", "strides", "dilations"])
def test_max_pool_indices_of_a_kernel_of_another_rank_are_refused(attr):
    """A kernel_shape (strides, dilations) of 3 entries on an input of 2 spatial axes: a
    located refusal, not numpy's broadcasting error (the fuzzer found one)."""
    attrs = {"kernel_shape": [2, 2], attr: [2, 2, 2] if attr == "kernel_shape" else [1, 1, 1]}
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    outputs = [value("y", F, [1, 2, 4, 4]), value("i", TensorProto.INT64, [1, 2, 4, 4])]
    graph = helper.make_graph([node], "g", [value("x", F, [1, 2, 5, 5])], outputs)
    message = refusal(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    assert f"its {attr} has 3 entries for an input of 2 spatial axes" in message


def test_max_pool_storage_order_without_indices_is_only_the_values():
    """storage_order says how the indices are numbered; without them it changes nothing."""
    m = one_node("MaxPool", (1, 2, 5, 5), attrs={"kernel_shape": [2, 2], "storage_order": 1})
    same_as_onnxruntime(m, x_of((1, 2, 5, 5)), "json")
