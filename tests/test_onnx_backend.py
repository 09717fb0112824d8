"""byoc.onnx.backend: ONNX's backend interface (prepare, run, run_model, run_node) on
byoc backends, with dynamic shapes, host fallback and inputs specialised by value,
compared with onnxruntime."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402
from onnx_import_support import FLOAT, INT64, model, onnx_outputs, weight, x  # noqa: E402

from byoc.errors import GraphError, UsageError  # noqa: E402
from byoc.onnx.backend import ByocBackend, backend_for  # noqa: E402


def _small_model(dims=(3, 4)):
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Sign", ["x"], ["s"]),
        helper.make_node("MatMul", ["r", "w"], ["m"]),
    ]
    return model(nodes, [("x", list(dims))], ["m", "s"], [weight(4, 2, name="w")])


def test_backend_runs_positional_and_named_inputs_in_output_order():
    m = _small_model()
    feeds = {"x": x(3, 4)}
    want = onnx_outputs(m, feeds)
    rep = ByocBackend.prepare(m, "CPU", backends="json")
    for inputs in ([feeds["x"]], feeds, feeds["x"]):
        got = rep.run(inputs)
        assert [g.dtype for g in got] == [w.dtype for w in want]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.m, want[0], rtol=1e-5, atol=1e-6)  # outputs by name too
    np.testing.assert_allclose(ByocBackend.run_model(m, [feeds["x"]], backends="json")[1], want[1])


def test_backend_builds_a_dynamic_model_once_per_input_shape():
    m = _small_model(("N", 4))
    rep = backend_for("json").prepare(m)
    assert rep.built == {}  # prepare has no inputs: nothing to fix the batch size by
    for n in (3, 5, 3):
        feeds = {"x": x(n, 4)}
        for g, w in zip(rep.run(feeds), onnx_outputs(m, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert sorted(rep.built) == [((3, 4),), ((5, 4),)]
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"  # the caller's model is unchanged
    with pytest.raises(UsageError, match=r"input 'x' has shape \[3, 5\], but the model takes \[\?, 4\]"):
        rep.run([x(3, 5)])
    with pytest.raises(UsageError, match="input 'x' is float64, but the model takes float32"):
        rep.run([np.zeros((3, 4))])
    with pytest.raises(UsageError, match="takes 1 input"):
        rep.run([x(3, 4), x(3, 4)])
    with pytest.raises(UsageError, match="the inputs lack 'x'"):
        rep.run({"y": x(3, 4)})
    with pytest.raises(UsageError, match="the inputs name 'y', which the model does not take"):
        rep.run({"x": x(3, 4), "y": x(3, 4)})


def test_backend_host_fallback_and_full_offload():
    """ccompiler has no sign: with host fallback the host runs it; without, that is an
    error naming the op."""
    m = _small_model()
    feeds = {"x": x(3, 4)}
    rep = backend_for("ccompiler").prepare(m)
    (built,) = rep.built.values()
    assert built.host_ops == ("sign",)
    for g, w in zip(rep.run(feeds), onnx_outputs(m, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    with pytest.raises(GraphError, match=r"backend\(s\) ccompiler do not take 1 op\(s\) of the model: sign"):
        backend_for("ccompiler", host_fallback=False).prepare(m)
    json_rep = backend_for("json", host_fallback=False).prepare(m)
    assert [b.host_ops for b in json_rep.built.values()] == [()]


def test_backend_run_node_matches_onnxruntime():
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=0.5)
    a, b, c = x(3, 4), x(5, 4), x(5)
    (got,) = ByocBackend.run_node(node, [a, b, c], backends="json")
    m = model([node], [("a", [3, 4]), ("b", [5, 4]), ("c", [5])], ["y"])
    np.testing.assert_allclose(got, onnx_outputs(m, {"a": a, "b": b, "c": c})[0], rtol=1e-5, atol=1e-6)


def test_backend_usage_errors():
    m = _small_model()
    assert ByocBackend.supports_device("CPU") and not ByocBackend.supports_device("CUDA:0")
    with pytest.raises(UsageError, match="runs on the CPU, not on 'CUDA'"):
        ByocBackend.prepare(m, "CUDA", backends="json")
    with pytest.raises(UsageError, match="needs the byoc backends to offload to") as info:
        ByocBackend.prepare(m)
    assert 'backend_for("fused,ccompiler")' in info.value.hint
    with pytest.raises(UsageError, match="unknown keyword"):
        ByocBackend.prepare(m, backends="json", rtol=1e-3)
    with pytest.raises(UsageError, match="no_such"):
        ByocBackend.prepare(m, backends="no_such")


def test_backend_module_imports_without_onnx():
    code = (
        "import sys; sys.modules['onnx'] = None\n"
        "from byoc.errors import UsageError\n"
        "from byoc.onnx.backend import ByocBackend, backend_for\n"
        "try:\n    backend_for('json').prepare(None)\n"
        "except UsageError as e:\n    print(e.message, '|', e.hint)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "needs the onnx package" in out.stdout and "pip install 'byoc-codegen[onnx]'" in out.stdout


def test_backend_specialises_a_model_to_the_values_of_shape_inputs():
    """Reshape's shape given as a model input: prepare cannot build the model, run builds
    it for the value given, once per distinct value; each run matches onnxruntime."""
    import onnxruntime

    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["x", "shape"], ["r"]),
            helper.make_node("Softmax", ["r"], ["y"], axis=-1),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", FLOAT, [3, 4]),
            helper.make_tensor_value_info("shape", INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", FLOAT, ["a", "b"])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rep = ByocBackend.prepare(m, backends="json", host_fallback=False)
    assert rep.specialised == ["shape"] and not rep.built
    x_value = x(3, 4)
    for target in ([4, 3], [2, 6], [4, 3]):
        feeds = {"x": x_value, "shape": np.asarray(target, np.int64)}
        (got,) = rep.run(feeds)
        (want,) = session.run(None, feeds)
        assert got.shape == want.shape == tuple(target)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert len(rep.built) == 2, "one build per distinct value"


def test_backend_folds_constant_of_shape_and_range_of_input_values():
    """ConstantOfShape and Range, which byoc only folds, of model inputs: specialised to
    the values given (the issue's 'at run time'), matching onnxruntime."""
    import onnxruntime

    fill = helper.make_tensor("fill", FLOAT, [1], [1.5])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["c"], value=fill),
        helper.make_node("Range", ["start", "limit", "delta"], ["steps"]),
        helper.make_node("Add", ["x", "c"], ["y"]),
        helper.make_node("Mul", ["y", "steps"], ["z"]),
    ]
    inputs = [("x", FLOAT, [2, 3]), ("shape", INT64, [2]), ("start", FLOAT, []), ("limit", FLOAT, [])]
    inputs.append(("delta", FLOAT, []))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info("z", FLOAT, ["a", "b"])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rep = ByocBackend.prepare(m, backends="json", host_fallback=False)
    scalar = lambda v: np.asarray(v, np.float32)  # noqa: E731
    feeds = {"x": x(2, 3), "shape": np.asarray([2, 3], np.int64), "start": scalar(1), "limit": scalar(4)}
    feeds["delta"] = scalar(1)
    (got,) = rep.run(feeds)
    (want,) = session.run(None, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert sorted(rep.specialised) == ["delta", "limit", "shape", "start"]
