"""ONNX's Attention and RotaryEmbedding (byoc/onnx/attention.py), judged by
onnxruntime on json and fused,ccompiler: a grouped-query attention block with a
causal mask and a past key and value, 3-D inputs with a run-time bool mask shorter
than the keys, softcap and the fourth output, and rotary embeddings; and the located
errors for malformed nodes."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from byoc.errors import ByocError  # noqa: E402
from byoc.onnx.backend import backend_for  # noqa: E402
from byoc.onnx.model_import import import_onnx  # noqa: E402

CONFIGS = ["json", "fused,ccompiler"]
RNG = np.random.default_rng(23)
F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=23):
    """A model of ``nodes``; ``inputs`` and ``outputs`` as (name, shape, element type)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, s, t in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, s, t in outputs],
        list(inits),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _compare(model, feeds: dict[str, np.ndarray], config: str, judge: str = "onnxruntime") -> None:
    """byoc's outputs on ``config`` against onnxruntime's, or ONNX's reference
    evaluator's where onnxruntime lacks the feature (a mask shorter than the keys)."""
    if judge == "onnxruntime":
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = session.run(None, feeds)
    else:
        want = ReferenceEvaluator(model).run(None, feeds)
    got = backend_for(config).prepare(model).run([feeds[i.name] for i in model.graph.input])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.asarray(g).shape == w.shape
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-5)


def gqa_block():
    """A decoder step of grouped-query attention: x projected to Q (4 heads) and K, V
    (2 heads) of head size 8, split into heads, attending causally to 5 cached and 3 new
    positions; the present key and value and the softmax probabilities are outputs."""
    b, s, past, hq, hkv, d = 2, 3, 5, 4, 2, 8
    weights = {
        name: numpy_helper.from_array((RNG.standard_normal((16, h * d)) * 0.3).astype(np.float32), name)
        for name, h in (("wq", hq), ("wk", hkv), ("wv", hkv))
    }
    shape = {
        n: numpy_helper.from_array(np.array([b, s, h, d], np.int64), n) for n, h in (("sq", hq), ("skv", hkv))
    }
    nodes = []
    for name, heads in (("q", "sq"), ("k", "skv"), ("v", "skv")):
        nodes += [
            helper.make_node("MatMul", ["x", f"w{name}"], [f"{name}p"]),
            helper.make_node("Reshape", [f"{name}p", heads], [f"{name}r"]),
            helper.make_node("Transpose", [f"{name}r"], [f"{name}h"], perm=[0, 2, 1, 3]),
        ]
    nodes.append(
        helper.make_node(
            "Attention",
            ["qh", "kh", "vh", "", "past_key", "past_value"],
            ["y", "present_key", "present_value", "probs"],
            is_causal=1,
            qk_matmul_output_mode=3,
        )
    )
    model = _model(
        nodes,
        [("x", [b, s, 16], F), ("past_key", [b, hkv, past, d], F), ("past_value", [b, hkv, past, d], F)],
        [
            ("y", [b, hq, s, d], F),
            ("present_key", [b, hkv, past + s, d], F),
            ("present_value", [b, hkv, past + s, d], F),
            ("probs", [b, hq, s, past + s], F),
        ],
        [*weights.values(), *shape.values()],
    )
    feeds = {
        "x": RNG.standard_normal((b, s, 16)).astype(np.float32),
        "past_key": RNG.standard_normal((b, hkv, past, d)).astype(np.float32),
        "past_value": RNG.standard_normal((b, hkv, past, d)).astype(np.float32),
    }
    return model, feeds


@pytest.mark.parametrize("config", CONFIGS)
def test_a_gqa_block_with_a_causal_mask_and_past_matches_onnxruntime(config):
    model, feeds = gqa_block()
    _compare(model, feeds, config)


def test_grouped_query_attention_copies_no_key_or_value_per_head():
    model, _ = gqa_block()
    text = import_onnx(model).text
    assert "matmul(" in text
    assert "expand(" not in text  # the query heads of a key head share one product


def test_the_causal_mask_sees_every_past_position():
    """Bottom-right alignment: with past keys, query 0 attends every past key and the
    first new one (probabilities over those, zero after)."""
    model, feeds = gqa_block()
    probs = backend_for("json").prepare(model).run([feeds[i.name] for i in model.graph.input])[3]
    past, s = 5, 3
    for i in range(s):
        assert np.all(probs[..., i, : past + i + 1] > 0)
        assert np.all(probs[..., i, past + i + 1 :] == 0)


def three_d(mode: int, mask_type=TensorProto.BOOL, covered: int = 6):
    """3-D Q (4 heads), K and V (2 heads) with a run-time mask of the first ``covered``
    of the 6 keys (the others padded as masked), softcap, and the fourth output in
    ``mode``."""
    b, sq, skv = 2, 4, 6
    model = _model(
        [
            helper.make_node(
                "Attention",
                ["q", "k", "v", "mask"],
                ["y", "", "", "qk"],
                q_num_heads=4,
                kv_num_heads=2,
                softcap=2.0,
                scale=0.3,
                qk_matmul_output_mode=mode,
            )
        ],
        [
            ("q", [b, sq, 32], F),
            ("k", [b, skv, 16], F),
            ("v", [b, skv, 12], F),
            ("mask", [sq, covered], mask_type),
        ],
        [("y", [b, sq, 24], F), ("qk", [b, 4, sq, skv], F)],
    )
    mask = RNG.random((sq, covered)) > 0.3
    mask[:, 0] = True  # no row masked whole: onnxruntime gives NaN there, ONNX zero
    feeds = {
        "q": RNG.standard_normal((b, sq, 32)).astype(np.float32),
        "k": RNG.standard_normal((b, skv, 16)).astype(np.float32),
        "v": RNG.standard_normal((b, skv, 12)).astype(np.float32),
        "mask": mask if mask_type == TensorProto.BOOL else np.where(mask, 0.0, -1e4).astype(np.float32),
    }
    return model, feeds


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("mode", [1, 3])
def test_3d_inputs_with_a_bool_mask_and_softcap_match_onnxruntime(config, mode):
    _compare(*three_d(mode), config)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("mode", [2, 3])
def test_a_mask_shorter_than_the_keys_is_padded_as_masked(config, mode):
    """ONNX's reference is the judge: onnxruntime refuses a short mask, and its scores
    with a bool mask (mode 2) hold the lowest float where ONNX's hold -inf."""
    _compare(*three_d(mode, covered=5), config, judge="reference")


@pytest.mark.parametrize("config", CONFIGS)
def test_a_float_mask_computed_at_run_time_matches_onnxruntime(config):
    _compare(*three_d(2, TensorProto.FLOAT), config)


def test_a_fully_masked_row_gives_zeros_not_nan():
    """ONNX: a query that may attend no key gives a zero row of Y (its node tests
    ``..._fullymasked_...``), with the mask a constant or computed at run time."""
    q, k, v = (RNG.standard_normal((1, 2, 3, 4)).astype(np.float32) for _ in range(3))
    mask = np.array([[True, True, False], [False, False, False], [True, False, True]])
    for constant in (True, False):
        model = _model(
            [helper.make_node("Attention", ["q", "k", "v", "mask"], ["y"])],
            [("q", [1, 2, 3, 4], F), ("k", [1, 2, 3, 4], F), ("v", [1, 2, 3, 4], F)]
            + ([] if constant else [("mask", [3, 3], TensorProto.BOOL)]),
            [("y", [1, 2, 3, 4], F)],
            [numpy_helper.from_array(mask, "mask")] if constant else [],
        )
        feeds = [q, k, v] + ([] if constant else [mask])
        (y,) = backend_for("json").prepare(model).run(feeds)
        assert not np.isnan(y).any()
        assert np.all(y[:, :, 1] == 0) and np.all(np.abs(y[:, :, 0]) > 0)


def rotary(interleaved: int, three_d_input: bool):
    """RotaryEmbedding of a rotary dimension 6 of head size 8, positions given."""
    b, h, s, d = 2, 3, 4, 8
    x_shape = [b, s, h * d] if three_d_input else [b, h, s, d]
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": 6}
    if three_d_input:
        attrs["num_heads"] = h
    model = _model(
        [helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], **attrs)],
        [("x", x_shape, F), ("cos", [10, 3], F), ("sin", [10, 3], F), ("pos", [b, s], TensorProto.INT64)],
        [("y", x_shape, F)],
    )
    angles = RNG.random((10, 3))
    feeds = {
        "x": RNG.standard_normal(x_shape).astype(np.float32),
        "cos": np.cos(angles).astype(np.float32),
        "sin": np.sin(angles).astype(np.float32),
        "pos": RNG.integers(0, 10, (b, s)).astype(np.int64),
    }
    return model, feeds


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("three_d_input", [False, True])
def test_rotary_embedding_matches_onnxruntime(config, interleaved, three_d_input):
    _compare(*rotary(interleaved, three_d_input), config)


# ------------------------------------------------------------------ located errors


def _attention(q, k, v, attrs=None, mask=None, past=None, opset=23):
    inputs = [("q", q, F), ("k", k, F), ("v", v, F)]
    names = ["q", "k", "v"]
    if mask is not None or past is not None:
        names.append("mask" if mask is not None else "")
        if mask is not None:
            inputs.append(("mask", mask, F))
    if past is not None:
        names += ["pk", "pv"][: len(past)]
        inputs += [(n, s, F) for n, s in zip(("pk", "pv"), past)]
    return _model(
        [helper.make_node("Attention", names, ["y"], name="attn", **(attrs or {}))],
        inputs,
        [("y", ["a", "b", "c"][: len(q)] + ["d"] * (len(q) - 3), F)],
        opset=opset,
    )


Q4, K4 = [1, 4, 3, 8], [1, 2, 5, 8]

BAD_ATTENTION = {
    "3-D without heads": (_attention([1, 3, 8], [1, 5, 8], [1, 5, 8]), "q_num_heads and kv_num_heads"),
    "heads not dividing": (
        _attention([1, 3, 8], [1, 5, 8], [1, 5, 8], {"q_num_heads": 3, "kv_num_heads": 3}),
        "not a multiple of its 3 heads",
    ),
    "query heads not a multiple": (_attention([1, 3, 3, 8], K4, K4), "do not fit together"),
    "head sizes differ": (_attention(Q4, [1, 2, 5, 6], K4), "do not fit together"),
    "rank 2": (_attention([3, 8], [5, 8], [5, 8]), "not all 3-D or all 4-D"),
    "past key alone": (_attention(Q4, K4, K4, past=[[1, 2, 4, 8]]), "without the other"),
    "past of another shape": (_attention(Q4, K4, K4, past=[[1, 2, 4, 8], [1, 2, 3, 8]]), "do not fit"),
    "mode 4": (_attention(Q4, K4, K4, {"qk_matmul_output_mode": 4}), "qk_matmul_output_mode is 4"),
    "integer softmax precision": (
        _attention(Q4, K4, K4, {"softmax_precision": TensorProto.INT32}),
        "softmax_precision 6 is not a float type",
    ),
    "mask longer than the keys": (_attention(Q4, K4, K4, mask=[3, 7]), "not 1 to 5 keys long"),
    "mask of other queries": (_attention(Q4, K4, K4, mask=[2, 5]), "does not broadcast"),
    "negative scale": (_attention(Q4, K4, K4, {"scale": -0.5}), "scale -0.5 is negative"),
}


@pytest.mark.parametrize("case", sorted(BAD_ATTENTION))
def test_a_malformed_attention_is_a_located_error(case):
    model, reason = BAD_ATTENTION[case]
    with pytest.raises(ByocError) as caught:
        import_onnx(model)
    message = str(caught.value)
    assert "ONNX node 0 (Attention 'attn', opset 23)" in message
    assert reason in message


def _rope(x, cos, pos=(1, 3), attrs=None, position_values=None):
    inputs = [("x", x, F), ("cos", cos, F), ("sin", cos, F)]
    names = ["x", "cos", "sin"]
    inits = []
    if pos is not None:
        names.append("pos")
        if position_values is None:
            inputs.append(("pos", list(pos), TensorProto.INT64))
        else:
            inits.append(numpy_helper.from_array(np.array(position_values, np.int64).reshape(pos), "pos"))
    return _model(
        [helper.make_node("RotaryEmbedding", names, ["y"], name="rope", **(attrs or {}))],
        inputs,
        [("y", x, F)],
        inits,
    )


BAD_ROTARY = {
    "3-D without num_heads": (_rope([1, 3, 16], [10, 4]), "num_heads is None"),
    "num_heads not dividing": (_rope([1, 3, 16], [10, 4], attrs={"num_heads": 3}), "num_heads is 3"),
    "odd rotary dimension": (_rope([1, 2, 3, 8], [10, 4], attrs={"rotary_embedding_dim": 5}), "dim 5"),
    "rotary dimension beyond the head": (
        _rope([1, 2, 3, 8], [10, 6], attrs={"rotary_embedding_dim": 12}),
        "dim 12",
    ),
    "cache of another width": (_rope([1, 2, 3, 8], [10, 3]), "not (positions, 4)"),
    "2-D cache without positions": (_rope([1, 2, 3, 8], [10, 4], pos=None), "not (batch, sequence"),
    "position beyond the cache": (
        _rope([1, 2, 3, 8], [10, 4], position_values=[0, 4, 10]),
        "beyond its 10 cached positions",
    ),
    "rank 2": (_rope([3, 8], [10, 4]), "rank 2, not 3 or 4"),
}


@pytest.mark.parametrize("case", sorted(BAD_ROTARY))
def test_a_malformed_rotary_embedding_is_a_located_error(case):
    model, reason = BAD_ROTARY[case]
    with pytest.raises(ByocError) as caught:
        import_onnx(model)
    message = str(caught.value)
    assert "ONNX node 0 (RotaryEmbedding 'rope', opset 23)" in message
    assert reason in message
