"""Fixtures of cases_onnx.yaml: hostile ONNX models, each written as m.onnx (unchecked:
most break ONNX's own rules), and the models that the ONNX fuzzer
(tests/test_fuzz_onnx.py) found crashing the importer.

The post-parse cases pair a valid model with two backend specs under specs/ whose
symbol prefixes make the generated region names collide, an error found after the
model is parsed, when its regions are named: it names the ONNX node.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

FIXTURES: dict[str, Callable[[Path], None]] = {}
SPECS = Path(__file__).resolve().parents[3] / "spec" / "backends"


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


def _value(name: str, shape, elem: int = 1):
    from onnx import helper

    return helper.make_tensor_value_info(name, elem, shape)


def _save(d: Path, nodes, inputs, outputs, initializers=(), opsets=(("", 13),), functions=()) -> None:
    """m.onnx as given, not checked: the importer must judge it."""
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid(domain, version) for domain, version in opsets],
        functions=list(functions),
    )
    (d / "m.onnx").write_bytes(model.SerializeToString())


def _node(op: str, inputs, outputs, name: str, **attrs):
    from onnx import helper

    return helper.make_node(op, list(inputs), list(outputs), name=name, **attrs)


def _tensor(values, name: str, dtype=np.float32):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


# ------------------------------------------------------------------ errors after parsing, at the node


@fixture
def onnx_region_names_collide(d: Path) -> None:
    """relu -> broadcasting add; specs/ holds mycc (ccompiler, symbols r_0, ...) and
    myjson (json, symbols r_0_0, ...): relu goes to mycc, the broadcasting add to
    myjson, and r_0_0 starts with r_0's generated names."""
    _save(
        d,
        [_node("Relu", ["x"], ["r"], "first_relu"), _node("Add", ["r", "b"], ["y"], "bias_add")],
        [_value("x", [2, 3]), _value("b", [3])],
        [_value("y", [2, 3])],
    )
    (d / "specs").mkdir()
    for shipped, name, prefix in (("ccompiler", "mycc", "r"), ("json", "myjson", "r_0")):
        lines = (SPECS / f"{shipped}.yaml").read_text(encoding="utf-8").splitlines(keepends=True)
        for k, line in enumerate(lines):
            if line.startswith("name:"):
                lines[k] = f"name: {name}\n"
            elif line.startswith("symbol_prefix:"):
                lines[k] = f"symbol_prefix: {prefix}\n"
        (d / "specs" / f"{name}.yaml").write_text("".join(lines), encoding="utf-8")


# ------------------------------------------------------------------ names


@fixture
def onnx_output_named_twice(d: Path) -> None:
    _save(
        d,
        [_node("Relu", ["x"], ["y"], "r1"), _node("Neg", ["x"], ["y"], "n1")],
        [_value("x", [2, 3])],
        [_value("y", [2, 3])],
    )


@fixture
def onnx_initializer_twice(d: Path) -> None:
    w = np.ones((2, 3))
    _save(
        d,
        [_node("Add", ["x", "w"], ["y"], "a")],
        [_value("x", [2, 3])],
        [_value("y", [2, 3])],
        [_tensor(w, "w"), _tensor(2 * w, "w")],
    )


@fixture
def onnx_output_not_produced(d: Path) -> None:
    _save(d, [_node("Relu", ["x"], ["y"], "r")], [_value("x", [2, 3])], [_value("z", [2, 3])])


@fixture
def onnx_no_outputs(d: Path) -> None:
    _save(d, [], [_value("x", [2, 3])], [])


@fixture
def onnx_ml_domain_only(d: Path) -> None:
    """A classic-ML model: its one opset is ai.onnx.ml's (no default-domain opset)."""
    node = _node("Binarizer", ["x"], ["y"], "binarize")
    node.domain = "ai.onnx.ml"
    _save(d, [node], [_value("x", [2, 3])], [_value("y", [2, 3])], opsets=(("ai.onnx.ml", 3),))


@fixture
def onnx_cycle(d: Path) -> None:
    _save(
        d,
        [_node("Add", ["x", "b"], ["a"], "first"), _node("Relu", ["a"], ["b"], "second")],
        [_value("x", [2, 3])],
        [_value("b", [2, 3])],
    )


# ------------------------------------------------------------------ types and attributes


@fixture
def onnx_attribute_wrong_type(d: Path) -> None:
    _save(d, [_node("Softmax", ["x"], ["y"], "s", axis=1.5)], [_value("x", [2, 3])], [_value("y", [2, 3])])


@fixture
def onnx_initializer_negative_dim(d: Path) -> None:
    w = _tensor(np.ones((2, 3)), "w")
    w.dims[0] = -2
    _save(d, [_node("Add", ["x", "w"], ["y"], "a")], [_value("x", [2, 3])], [_value("y", [2, 3])], [w])


@fixture
def onnx_input_negative_dim(d: Path) -> None:
    _save(d, [_node("Relu", ["x"], ["y"], "r")], [_value("x", [-2, 3])], [_value("y", [2, 3])])


@fixture
def onnx_shape_of_negative_dim(d: Path) -> None:
    """Found by the fuzzer: Shape of an input with a negative dimension was folded from
    np.zeros of that shape (a ValueError)."""
    _save(
        d,
        [_node("Shape", ["x"], ["s"], "shape"), _node("Cast", ["s"], ["y"], "cast", to=1)],
        [_value("x", [2, -1, 4])],
        [_value("y", [3])],
    )


@fixture
def onnx_huge_input(d: Path) -> None:
    big = [2**31, 2**31, 2**31]
    _save(d, [_node("Relu", ["x"], ["y"], "r")], [_value("x", big)], [_value("y", big)])


@fixture
def onnx_tile_scalar_repeats(d: Path) -> None:
    """A 0-d repeats where Tile needs one count per axis (was read as a single count,
    zipped with the first axis only)."""
    _save(
        d,
        [_node("Tile", ["x", "r"], ["y"], "tile")],
        [_value("x", [2, 3])],
        [_value("y", [4, 3])],
        [_tensor(2, "r", np.int64)],
    )


# ------------------------------------------------------------------ functions and subgraphs


@fixture
def onnx_local_function_unsupported_op(d: Path) -> None:
    """A model-local function is inlined at its call; its Unique node is then refused
    as any other."""
    from onnx import helper

    f = helper.make_function(
        "local",
        "myfun",
        ["a"],
        ["b"],
        [
            helper.make_node("Relu", ["a"], ["r"], name="inner_relu"),
            helper.make_node("Unique", ["r"], ["b"]),
        ],
        [helper.make_opsetid("", 13)],
    )
    _save(
        d,
        [helper.make_node("myfun", ["x"], ["y"], name="call", domain="local")],
        [_value("x", [2, 3])],
        [_value("y", [2, 3])],
        opsets=(("", 13), ("local", 1)),
        functions=[f],
    )


def _branch(op: str, out: str):
    from onnx import helper

    return helper.make_graph([helper.make_node(op, ["x"], [out])], f"branch_{out}", [], [_value(out, [2, 3])])


@fixture
def onnx_if_subgraph(d: Path) -> None:
    _save(
        d,
        [
            _node(
                "If",
                ["c"],
                ["y"],
                "branch",
                then_branch=_branch("Relu", "t"),
                else_branch=_branch("Neg", "e"),
            )
        ],
        [_value("x", [2, 3]), _value("c", [], 9)],
        [_value("y", [2, 3])],
    )


@fixture
def onnx_loop_subgraph(d: Path) -> None:
    from onnx import helper

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["co"]), helper.make_node("Relu", ["xi"], ["xo"])],
        "body",
        [_value("i", [], 7), _value("cond", [], 9), _value("xi", [2, 3])],
        [_value("co", [], 9), _value("xo", [2, 3])],
    )
    _save(
        d,
        [_node("Loop", ["n", "", "x"], ["y"], "loop", body=body)],
        [_value("x", [2, 3]), _value("n", [], 7)],
        [_value("y", [2, 3])],
    )


# ------------------------------------------------------------------ quantization (QDQ)


def _qdq(d: Path, op: str, initializers, x_elem: int, y_elem: int, **attrs) -> None:
    """m.onnx: y = op(x, s, z) on x [2, 3], its scale and zero point initializers."""
    _save(
        d,
        [_node(op, ["x", "s", "z"], ["y"], "q", **attrs)],
        [_value("x", [2, 3], x_elem)],
        [_value("y", [2, 3], y_elem)],
        initializers,
    )


@fixture
def onnx_quantize_zero_scale(d: Path) -> None:
    _qdq(d, "QuantizeLinear", [_tensor(0.0, "s"), _tensor(128, "z", np.uint8)], 1, 2)


@fixture
def onnx_quantize_integer_scale(d: Path) -> None:
    _qdq(d, "QuantizeLinear", [_tensor(2, "s", np.int32), _tensor(0, "z", np.uint8)], 1, 2)


@fixture
def onnx_dequantize_zero_point_type(d: Path) -> None:
    _qdq(d, "DequantizeLinear", [_tensor(0.5, "s"), _tensor(0, "z", np.int8)], 2, 1)


@fixture
def onnx_dequantize_axis_out_of_range(d: Path) -> None:
    scales = [_tensor([0.5, 0.25, 1.0], "s"), _tensor([0, 1, 2], "z", np.uint8)]
    _qdq(d, "DequantizeLinear", scales, 2, 1, axis=2)


@fixture
def onnx_dequantize_scales_per_wrong_axis(d: Path) -> None:
    scales = [_tensor([0.5, 0.25, 1.0], "s"), _tensor([0, 1, 2], "z", np.uint8)]
    _qdq(d, "DequantizeLinear", scales, 2, 1, axis=0)
