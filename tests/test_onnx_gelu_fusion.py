"""A decomposed Gelu (Div, Erf, Add, Mul, Mul, as exporters write it before opset 20)
imports as one gelu (byoc/onnx/gelu_fusion.py), computes ONNX Runtime's outputs, and
is left node by node wherever taking it whole would change what the graph computes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx_import_support import model, same_as_onnxruntime, x

from byoc.onnx.model_import import import_program

SQRT2 = math.sqrt(2.0)


def scalar(name: str, value: float, shape=()) -> object:
    return numpy_helper.from_array(np.full(shape, value, np.float32), name)


def tail(form: str, a: str = "a", out: str = "y") -> list:
    """The products after a = 1 + erf(...): (x a) 0.5, (x 0.5) a or x (a 0.5)."""
    mul = helper.make_node
    if form == "x_a_half":
        return [mul("Mul", [a, "x"], ["m"]), mul("Mul", ["m", "half"], [out])]
    if form == "x_half_a":
        return [mul("Mul", ["half", "x"], ["h"]), mul("Mul", [a, "h"], [out])]
    return [mul("Mul", ["half", a], ["m"]), mul("Mul", ["x", "m"], [out])]


def chain(form: str = "x_a_half", scale: str = "Div", **values) -> list:
    """The five nodes; ``scale`` Div by sqrt(2) or Mul by 1/sqrt(2)."""
    return [
        helper.make_node(scale, ["x", "s"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        *tail(form),
    ]


def constants(scale: str = "Div", s: float | None = None, one: float = 1.0, half: float = 0.5, shape=()):
    s = (SQRT2 if scale == "Div" else 1 / SQRT2) if s is None else s
    return [scalar("s", s, shape), scalar("one", one, shape), scalar("half", half, shape)]


def ops_of(m) -> list[str]:
    return [n.op for n in import_program(m, where="gelu.onnx").function("main").nodes]


@pytest.mark.parametrize("form", ["x_a_half", "x_half_a", "x_a_times_half"])
@pytest.mark.parametrize("scale", ["Div", "Mul"])
def test_each_form_imports_as_one_gelu_with_onnxruntimes_outputs(form, scale):
    m = model(chain(form, scale), [("x", [3, 40])], ["y"], constants(scale))
    assert ops_of(m) == ["gelu"]
    feeds = {"x": 4 * x(3, 40)}
    for config in ("json", "fused"):
        same_as_onnxruntime(m, feeds, config, rtol=1e-5, atol=1e-6)


def test_constants_of_constant_nodes_and_float32_sqrt2_are_taken():
    nodes = [
        helper.make_node("Constant", [], [name], value=scalar(name, value))
        for name, value in (("s", np.float32(1.4142135)), ("one", 1.0), ("half", 0.5))
    ]
    m = model([*nodes, *chain()], [("x", [2, 8])], ["y"])
    assert ops_of(m) == ["gelu"]


def test_the_chain_after_a_matmul_keeps_the_matmul():
    w = numpy_helper.from_array(x(8, 16), "w")
    nodes = [helper.make_node("MatMul", ["in", "w"], ["x"]), *chain()]
    m = model(nodes, [("in", [4, 8])], ["y"], [w, *constants()])
    assert ops_of(m) == ["matmul", "gelu"]
    same_as_onnxruntime(m, {"in": x(4, 8)}, "json")


@pytest.mark.parametrize(
    "what, nodes, outputs, values",
    [
        ("an inner value is an output", chain(), ["y", "e"], {}),
        (
            "an inner value has another reader",
            [*chain(), helper.make_node("Neg", ["a"], ["n"])],
            ["y", "n"],
            {},
        ),
        ("not sqrt(2)", chain(), ["y"], {"s": 1.5}),
        ("not 1", chain(), ["y"], {"one": 2.0}),
        ("not a half", chain(), ["y"], {"half": 0.25}),
        ("a constant of higher rank", chain(), ["y"], {"shape": (1, 1, 1)}),
    ],
)
def test_a_chain_that_is_not_gelu_alone_imports_node_by_node(what, nodes, outputs, values):
    m = model(nodes, [("x", [3, 5])], outputs, constants(**values))
    ops = ops_of(m)
    assert "gelu" not in ops and "erf" in ops, what
    same_as_onnxruntime(m, {"x": x(3, 5)}, "json")


SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def cube(form: str) -> list:
    """x^3 into ``c``: Pow(x, 3), Mul(Mul(x, x), x) or Mul(x, Mul(x, x))."""
    mul = helper.make_node
    if form == "pow":
        return [mul("Pow", ["x", "three"], ["c"])]
    if form == "square_x":
        return [mul("Mul", ["x", "x"], ["sq"]), mul("Mul", ["sq", "x"], ["c"])]
    return [mul("Mul", ["x", "x"], ["sq"]), mul("Mul", ["x", "sq"], ["c"])]


def tanh_chain(cubed: str = "pow", form: str = "x_half_a") -> list:
    """GPT-2's tanh Gelu: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    mul = helper.make_node
    return [
        *cube(cubed),
        mul("Mul", ["k", "c"], ["kc"]),
        mul("Add", ["x", "kc"], ["inner"]),
        mul("Mul", ["inner", "r"], ["u"]),
        mul("Tanh", ["u"], ["t"]),
        mul("Add", ["one", "t"], ["a"]),
        *tail(form),
    ]


def tanh_constants(k: float = 0.044715, r: float = SQRT_2_OVER_PI, three: float = 3.0) -> list:
    return [scalar("k", k), scalar("r", r), scalar("three", three), scalar("one", 1.0), scalar("half", 0.5)]


@pytest.mark.parametrize("form", ["x_a_half", "x_half_a", "x_a_times_half"])
@pytest.mark.parametrize("cubed", ["pow", "square_x", "x_square"])
def test_each_tanh_form_imports_as_one_gelu_tanh_with_onnxruntimes_outputs(cubed, form):
    m = model(tanh_chain(cubed, form), [("x", [3, 40])], ["y"], tanh_constants())
    assert ops_of(m) == ["gelu_tanh"]
    feeds = {"x": 4 * x(3, 40)}
    for config in ("json", "fused"):
        same_as_onnxruntime(m, feeds, config, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "what, nodes, outputs, values",
    [
        ("not 0.044715", tanh_chain(), ["y"], {"k": 0.04}),
        ("not sqrt(2/pi)", tanh_chain(), ["y"], {"r": 0.8}),
        ("a square, not a cube", tanh_chain(), ["y"], {"three": 2.0}),
        ("an inner value is an output", tanh_chain(), ["y", "u"], {}),
        (
            "the cube of another value",
            [
                helper.make_node("Neg", ["x"], ["z"]),
                helper.make_node("Pow", ["z", "three"], ["c"]),
                *[n for n in tanh_chain() if n.op_type != "Pow"],
            ],
            ["y"],
            {},
        ),
    ],
)
def test_a_tanh_chain_that_is_not_gelu_alone_imports_node_by_node(what, nodes, outputs, values):
    m = model(nodes, [("x", [3, 5])], outputs, tanh_constants(**values))
    ops = ops_of(m)
    assert "gelu_tanh" not in ops and "tanh" in ops, what
    same_as_onnxruntime(m, {"x": x(3, 5)}, "json")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_onnx_gelu_of_opset_20_imports_as_the_catalog_op(approximate):
    node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
    m = model([node], [("x", [3, 40])], ["y"], opset=20)
    assert ops_of(m) == ["gelu" if approximate == "none" else "gelu_tanh"]
    for config in ("json", "fused"):
        same_as_onnxruntime(m, {"x": 6 * x(3, 40)}, config, rtol=1e-5, atol=1e-6)
