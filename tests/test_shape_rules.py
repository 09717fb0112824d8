"""The shape rule vocabulary (byoc/shape_rules.py), the reference machinery of the
catalog (numpy expressions, reference kernels, float64 evaluation) and the rule that no
op name appears in Python outside the rule library."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import byoc.spec
from byoc import shape_rule_model
from byoc.catalog import (
    SHAPE_RULES,
    AttrDef,
    OpDef,
    RuleError,
    compile_reference,
    evaluate_op,
    infer_type,
    kernel_reference,
    normalize_attrs,
)
from byoc.ir import TensorType

ROOT = Path(__file__).resolve().parents[1]
CATALOG = byoc.spec.load_catalog()
RULE_LIBRARY = {
    *(p.relative_to(ROOT).as_posix() for p in (ROOT / "byoc").glob("shape_*.py")),
    *(p.relative_to(ROOT).as_posix() for p in (ROOT / "byoc/reference_kernels").glob("*.py")),
}
"""The modules that may name ops: the rules and the kernels they wrap."""


def test_no_op_name_is_spelled_in_python_outside_the_rule_library():
    """A string naming a shape rule is the rule vocabulary, which code generators may
    key on (the c_fused kind's loops by rule), even where an op shares the rule's name."""
    found = []
    for folder in ("byoc", "grammar", "spec", "generator", "runtime"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in RULE_LIBRARY:
                continue
            text = path.read_text(encoding="utf-8")
            for m in re.finditer(r"""(["'])([a-z_][a-z0-9_]*)\1""", text):
                if m.group(2) in CATALOG and m.group(2) not in SHAPE_RULES:
                    found.append(f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    assert found == []


def test_the_vocabulary_and_which_rules_broadcast():
    assert set(SHAPE_RULES) == {
        "elementwise",
        "unidirectional",
        "concatenate",
        "conv",
        "conv_transpose",
        "pool",
        "global_pool",
        "dense",
        "matmul",
        "conv_integer",
        "matmul_integer",
        "bias_add",
        "batch_norm",
        "lrn",
        "softmax",
        "attention",
        "reduce",
        "reshape",
        "flatten",
        "transpose",
        "squeeze",
        "unsqueeze",
        "expand",
        "pad",
        "slice",
        "split",
        "gather",
        "compare",
        "predicate",
        "select",
        "cast",
        "bitcast",
        "dequantize",
        "quantize",
        "mod",
        "arg_reduce",
        "gather_elements",
        "scatter_elements",
        "gather_nd",
        "scatter_nd",
        "cumulative",
        "top_k",
        "one_hot",
    }
    elementwise = {
        "elementwise",
        "unidirectional",
        "compare",
        "predicate",
        "select",
        "cast",
        "bitcast",
        "dequantize",
        "quantize",
        "mod",
    }
    assert {n for n, r in SHAPE_RULES.items() if r.elementwise} == elementwise
    assert all(rule.name == name and rule.doc for name, rule in SHAPE_RULES.items())
    assert (SHAPE_RULES["batch_norm"].min_inputs, SHAPE_RULES["batch_norm"].max_inputs) == (5, 5)
    assert (SHAPE_RULES["concatenate"].min_inputs, SHAPE_RULES["concatenate"].max_inputs) == (1, None)
    assert {n for n, r in SHAPE_RULES.items() if r.max_outputs != 1} == {"split", "top_k"}
    assert (SHAPE_RULES["top_k"].min_outputs, SHAPE_RULES["top_k"].max_outputs) == (2, 2)
    assert dict(SHAPE_RULES["pool"].attrs) == {
        "kernel_shape": "ints",
        "strides": "ints",
        "pads": "ints",
        "dilations": "ints",
        "ceil_mode": "bool",
    }


def test_every_rule_is_used_and_documented():
    used = {op.shape_rule for op in CATALOG.values()}
    assert used == set(SHAPE_RULES)
    readme = (ROOT / "spec" / "README.md").read_text(encoding="utf-8")
    for name in SHAPE_RULES:
        assert f"| `{name}` |" in readme, name


def t(*shape: int, dtype: str = "float32") -> TensorType:
    return TensorType(shape, dtype)


def _infer(op: str, types, **given):
    return infer_type(CATALOG[op], types, normalize_attrs(CATALOG[op], list(given.items())))


def test_rule_errors_name_the_attribute_at_fault():
    with pytest.raises(RuleError) as info:
        _infer("conv", [t(1, 4, 8, 8), t(4, 4, 3, 3)], strides=(0, 1))
    assert info.value.key == "strides" and info.value.message == "strides[0] = 0 must be positive"
    with pytest.raises(RuleError) as info:
        _infer("conv", [t(1, 4, 2, 2), t(4, 4, 5, 5)], pads=(1, 1, 1, 1))
    assert info.value.key == "pads"
    with pytest.raises(RuleError) as info:
        _infer("max_pool", [t(1, 4, 2, 2)], kernel_shape=(3, 3))
    assert info.value.key == "kernel_shape" and not info.value.message.startswith("max_pool")
    with pytest.raises(RuleError) as info:  # the shapes are at fault, not an attribute
        _infer("dense", [t(4, 3), t(2, 5)])
    assert info.value.key is None
    with pytest.raises(RuleError, match="not an integer type"):
        _infer("gather", [t(4, 3), t(2)])
    with pytest.raises(RuleError, match="do not broadcast to the first input's"):
        _infer("prelu", [t(3), t(2, 3)])


def test_empty_int_lists_and_bools_reach_rules_and_kernels_as_their_defaults():
    conv = CATALOG["conv"]
    attrs = normalize_attrs(conv, [])
    assert conv.kwargs(attrs) == {"strides": None, "pads": None, "dilations": None, "groups": 1}
    assert _infer("conv", [t(1, 2, 5, 5), t(3, 2, 3, 3)]) == t(1, 3, 3, 3)
    reduce = CATALOG["sum"]
    assert reduce.kwargs(normalize_attrs(reduce, [("keepdims", True)])) == {"axes": None, "keepdims": 1}
    unsqueeze = CATALOG["unsqueeze"]  # required: an empty list stays empty
    assert unsqueeze.kwargs(normalize_attrs(unsqueeze, [("axes", ())])) == {"axes": ()}


def test_attribute_values_are_checked_against_choices_and_finiteness():
    pad = CATALOG["pad"]
    assert dict(normalize_attrs(pad, [("pads", (1, 1)), ("mode", "edge")]))["mode"] == "edge"
    with pytest.raises(RuleError, match="must be one of 'constant', 'reflect', 'edge'") as info:
        normalize_attrs(pad, [("pads", (1, 1)), ("mode", "wrap")])
    assert info.value.key == "mode"
    with pytest.raises(RuleError, match="finite") as info:
        normalize_attrs(pad, [("pads", (1, 1)), ("value", float("nan"))])
    assert info.value.key == "value"


def test_kernel_references_are_checked_when_the_catalog_loads():
    with pytest.raises(RuleError, match="unknown reference kernel 'nope'"):
        kernel_reference("nope", 1, False, [])
    with pytest.raises(RuleError, match="cannot take 1 input"):
        kernel_reference("relu", 1, False, ["alpha"])
    with pytest.raises(RuleError, match="cannot take 1 input"):
        kernel_reference("dense", 1, False, [])
    with pytest.raises(RuleError, match="returns several outputs; the op declares one"):
        kernel_reference("split", 1, False, ["axis"])
    with pytest.raises(RuleError, match="returns one output; the op declares several"):
        kernel_reference("relu", 1, False, [], several=True)
    kernel_reference("split", 1, False, ["axis", "sizes"], several=True)
    with pytest.raises(RuleError, match="_windows"):  # private helpers are not kernels
        kernel_reference("_windows", 1, False, [])


def test_numpy_references_call_ufuncs_only():
    for text, message in [
        ("concatenate(x0, x1)", "is not a numpy ufunc"),
        ("add(x0, x1, dtype=x0)", "keyword arguments are not allowed"),
        ("x0.T", "Attribute is not allowed"),
        ("add(x0, x2)", "x2 is out of range"),
    ]:
        with pytest.raises(RuleError, match=re.escape(message)):
            compile_reference(text, 2, [])
    with pytest.raises(RuleError, match="a variadic op's reference must be a kernel"):
        compile_reference("negative(x0)", None, [])


def _op(numpy: str, arity: int = 2) -> OpDef:
    op = OpDef("t", arity, arity, "elementwise", ("float32", "float64", "int32", "int64"), (), numpy, None)
    return OpDef(
        **{
            **{f: getattr(op, f) for f in op.__dataclass_fields__},
            "reference": compile_reference(numpy, arity, []),
        }
    )


def test_float_inputs_compute_in_float64_and_round_once(rng):
    a = (rng.standard_normal(10_000) * 10.0 ** rng.integers(-30, 30, 10_000)).astype(np.float32)
    b = (rng.standard_normal(10_000) * 10.0 ** rng.integers(-30, 30, 10_000)).astype(np.float32)
    out = t(10_000)
    with np.errstate(all="ignore"):
        # The basic operations are exact in float64 then rounded: numpy's float32 results.
        for ufunc in ("add", "subtract", "multiply", "true_divide", "maximum"):
            got = evaluate_op(_op(f"{ufunc}(x0, x1)"), [a, b], (), out)
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, getattr(np, ufunc)(a, b))
        # A transcendental one is the float64 result rounded, as C's (float)exp((double)x).
        small = (a / np.float32(1e30)).astype(np.float32)
        got = evaluate_op(_op("exp(x0)", 1), [small], (), out)
        np.testing.assert_array_equal(got, np.exp(small.astype(np.float64)).astype(np.float32))


def test_integer_inputs_keep_their_dtype_and_wrap_around():
    big = np.array([2**62, -(2**62)], np.int64)
    got = evaluate_op(_op("add(x0, x1)"), [big, big], (), t(2, dtype="int64"))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, big + big)
    assert got.dtype == np.int64


def test_the_rule_library_raises_rule_errors_only_for_shape_function_errors():
    assert shape_rule_model.RuleError is RuleError
    with pytest.raises(RuleError, match="dtype mismatch"):
        _infer("conv", [t(1, 2, 5, 5), t(3, 2, 3, 3, dtype="float64")])
    assert AttrDef("mode", "str", "constant", ("constant",)).choices == ("constant",)
