"""ONNX control flow imported in place (byoc/onnx/control.py): If by a condition known
at import, Loop and Scan unrolled. Results are judged by onnxruntime on json and on
fused,ccompiler; what byoc cannot unroll is a located refusal."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_import_support import same_as_onnxruntime  # noqa: E402

from byoc.errors import ByocError  # noqa: E402
from byoc.onnx.backend import backend_for  # noqa: E402
from byoc.onnx.control import UNROLL_LIMIT  # noqa: E402

CONFIGS = ["json", "fused,ccompiler"]
RNG = np.random.default_rng(5)
F = TensorProto.FLOAT


def model(nodes, inputs, outputs, initializers=(), opset=16):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def loop_model(trips: int, opset=16):
    """Loop carrying s (s = s * 0.5 + x), with a scan output s + i per iteration."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Mul", ["s", "half"], ["scaled"]),
            helper.make_node("Add", ["scaled", "x"], ["s_out"]),
            helper.make_node("Cast", ["i"], ["i_float"], to=F),
            helper.make_node("Add", ["s_out", "i_float"], ["scan"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s", F, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s_out", F, [2, 3]),
            helper.make_tensor_value_info("scan", F, [2, 3]),
        ],
    )
    inits = [
        numpy_helper.from_array(np.asarray(trips, np.int64), "trips"),
        numpy_helper.from_array(np.asarray(True), "go"),
        numpy_helper.from_array(np.asarray(0.5, np.float32), "half"),
    ]
    return model(
        [helper.make_node("Loop", ["trips", "go", "s0"], ["s_final", "scans"], body=body)],
        [helper.make_tensor_value_info(n, F, [2, 3]) for n in ("s0", "x")],
        [
            helper.make_tensor_value_info("s_final", F, [2, 3]),
            helper.make_tensor_value_info("scans", F, [trips, 2, 3]),
        ],
        inits,
        opset,
    )


@pytest.mark.parametrize("config", CONFIGS)
def test_loop_unrolls_its_carried_state_and_scan_outputs(config):
    feeds = {n: RNG.standard_normal((2, 3)).astype(np.float32) for n in ("s0", "x")}
    same_as_onnxruntime(loop_model(4), feeds, config)


def test_a_loop_over_the_unroll_limit_is_refused():
    with pytest.raises(ByocError, match=rf"more than {UNROLL_LIMIT} iterations") as info:
        backend_for("json").prepare(loop_model(UNROLL_LIMIT + 1))
    assert "ONNX node 0 (Loop" in str(info.value)


def test_a_loop_whose_condition_comes_from_an_input_specialises():
    """The body's condition is the state's sum > 0, the state x negated each time: how
    many iterations run depends on x, so byoc import names x, and the ONNX backend
    builds the model for each x it is given (here 3 iterations, and 1)."""
    body = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["s"], ["total"], keepdims=0),
            helper.make_node("Greater", ["total", "zero"], ["cond_out"]),
            helper.make_node("Neg", ["s"], ["s_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s", F, [2]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s_out", F, [2]),
        ],
    )
    m = model(
        [helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)],
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("y", F, [2])],
        [
            numpy_helper.from_array(np.asarray(3, np.int64), "trips"),
            numpy_helper.from_array(np.asarray(0, np.float32), "zero"),
        ],
    )
    from byoc.onnx.model_import import import_program

    with pytest.raises(ByocError, match="condition of its body is computed from the model input 'x'") as info:
        import_program(m)
    assert "ONNX node 0 (Loop" in str(info.value)
    for x in ([1.0, 2.0], [-1.0, -2.0]):
        same_as_onnxruntime(m, {"x": np.asarray(x, np.float32)}, "json")


def if_model():
    """y = If(c, then: x * w, else: x - w) with the condition a model input: the
    model is specialised to its value."""

    def branch(op, name):
        return helper.make_graph(
            [helper.make_node(op, ["x", "w"], [f"{name}_y"])],
            name,
            [],
            [helper.make_tensor_value_info(f"{name}_y", F, [3])],
        )

    return model(
        [
            helper.make_node(
                "If", ["c"], ["y"], then_branch=branch("Mul", "then"), else_branch=branch("Sub", "else")
            )
        ],
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", F, [3]),
        ],
        [helper.make_tensor_value_info("y", F, [3])],
        [numpy_helper.from_array(RNG.standard_normal(3).astype(np.float32), "w")],
    )


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("condition", [True, False])
def test_if_takes_the_branch_its_condition_names(config, condition):
    feeds = {"c": np.asarray(condition), "x": RNG.standard_normal(3).astype(np.float32)}
    same_as_onnxruntime(if_model(), feeds, config)


def _computed_condition(source_op: str):
    """if_model with its condition Greater(v, 0), v = source_op(x0)."""
    m = if_model()
    m.graph.node.insert(0, helper.make_node(source_op, ["x0"], ["v"]))
    m.graph.node.insert(1, helper.make_node("Greater", ["v", "zero"], ["c_computed"]))
    m.graph.node[2].input[0] = "c_computed"
    del m.graph.input[0]
    m.graph.input.insert(0, helper.make_tensor_value_info("x0", F, []))
    m.graph.initializer.append(numpy_helper.from_array(np.asarray(0, np.float32), "zero"))
    return m


def test_an_if_on_a_condition_computed_from_model_inputs_specialises():
    """byoc import cannot know the branch and names the input behind it; the ONNX
    backend builds the model for the value it is given, and matches onnxruntime."""
    from byoc.onnx.model_import import import_program

    m = _computed_condition("Neg")
    with pytest.raises(ByocError, match="computed from the model input 'x0'"):
        import_program(m)
    for x0 in (-1.0, 2.0):
        feeds = {"x0": np.asarray(x0, np.float32), "x": RNG.standard_normal(3).astype(np.float32)}
        same_as_onnxruntime(m, feeds, "json")


def test_an_if_on_a_value_of_the_loop_body_specialises():
    """Inside an unrolled Loop, an If whose condition is the carried state's sign: it
    is computed from the model input x alone, so byoc import names x, and the ONNX
    backend builds the model for each value of x, matching onnxruntime."""
    then = helper.make_graph(
        [helper.make_node("Neg", ["s"], ["t"])], "then", [], [helper.make_tensor_value_info("t", F, [])]
    )
    other = helper.make_graph(
        [helper.make_node("Abs", ["s"], ["e"])], "else", [], [helper.make_tensor_value_info("e", F, [])]
    )
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Greater", ["s", "zero"], ["positive"]),
            helper.make_node("If", ["positive"], ["s_out"], then_branch=then, else_branch=other),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s", F, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s_out", F, []),
        ],
    )
    m = model(
        [helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)],
        [helper.make_tensor_value_info("x", F, [])],
        [helper.make_tensor_value_info("y", F, [])],
        [
            numpy_helper.from_array(np.asarray(3, np.int64), "trips"),
            numpy_helper.from_array(np.asarray(0, np.float32), "zero"),
        ],
    )
    from byoc.onnx.model_import import import_program

    with pytest.raises(ByocError, match="computed from the model input 'x'") as info:
        import_program(m)
    assert "(If " in str(info.value)
    for x in (-1.5, 0.25):
        same_as_onnxruntime(m, {"x": np.asarray(x, np.float32)}, "json")


@pytest.mark.parametrize("config", CONFIGS)
def test_scan_in_reverse_along_axis_1_with_an_if_in_its_body(config):
    """Scan over x's axis 1 backwards, summing into a state; its body holds an If on a
    constant that reads a body value (renamed per iteration)."""
    then = helper.make_graph(
        [helper.make_node("Add", ["sum", "xt"], ["then_out"])],
        "then",
        [],
        [helper.make_tensor_value_info("then_out", F, [2])],
    )
    other = helper.make_graph(
        [helper.make_node("Sub", ["sum", "xt"], ["else_out"])],
        "else",
        [],
        [helper.make_tensor_value_info("else_out", F, [2])],
    )
    body = helper.make_graph(
        [
            helper.make_node("If", ["yes"], ["sum_out"], then_branch=then, else_branch=other),
            helper.make_node("Mul", ["sum_out", "xt"], ["scan"]),
        ],
        "body",
        [helper.make_tensor_value_info("sum", F, [2]), helper.make_tensor_value_info("xt", F, [2])],
        [helper.make_tensor_value_info("sum_out", F, [2]), helper.make_tensor_value_info("scan", F, [2])],
    )
    m = model(
        [
            helper.make_node(
                "Scan",
                ["s0", "x"],
                ["s", "ys"],
                body=body,
                num_scan_inputs=1,
                scan_input_axes=[1],
                scan_input_directions=[1],
                scan_output_axes=[1],
            )
        ],
        [helper.make_tensor_value_info("s0", F, [2]), helper.make_tensor_value_info("x", F, [2, 5])],
        [helper.make_tensor_value_info("s", F, [2]), helper.make_tensor_value_info("ys", F, [2, 5])],
        [numpy_helper.from_array(np.asarray(True), "yes")],
    )
    feeds = {
        "s0": RNG.standard_normal(2).astype(np.float32),
        "x": RNG.standard_normal((2, 5)).astype(np.float32),
    }
    same_as_onnxruntime(m, feeds, config)
