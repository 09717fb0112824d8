"""ONNX's node tests of the ops of issue 29 (comparisons, logic, casts, bit ops, Where,
Round, Sign ...) and of issue 32's first ops (normalisations, activations, composed
reductions), run through byoc against the expected outputs shipped with onnx.

``onnx.backend.test.loader.load_model_tests(kind="node")`` builds every node test in
memory (a one-node model and its data sets); collection reads their names, ops and
types from the index of tests/onnx_node_cases.py instead, and the tests are built when
the first one runs. This module keeps those whose node is one of :data:`OPS` (every node: the ``_expanded`` variants of other ops, such as
Attention's, are not theirs) and leaves out the variants of dtypes byoc does not have (float8, 4-bit
and 2-bit types, string): :data:`EXCLUDED_COUNT` says how many. Each kept case is
imported (:mod:`byoc.onnx_backend`), offloaded and run, and each output compared with
the case's expected one at the case's own tolerances (``rtol``/``atol`` of the loader,
1e-3 and 1e-7), integers and bools exactly, with the dtype the model declares.

Configurations: ``json`` (every op on the json backend, ``host_fallback=False``) and
``fused,ccompiler`` must pass all but :data:`EXPECTED_FAILURES`, each with its reason,
marked strict so that a case that starts passing is noticed.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.onnx_suite
onnx = pytest.importorskip("onnx")
from onnx_node_cases import RECORD, case, computed_index, index, recorded  # noqa: E402

from byoc.ir import dtype_name, is_float  # noqa: E402
from byoc.onnx_backend import backend_for  # noqa: E402

TYPE_OPS = frozenset(
    "Cast CastLike Equal Less LessOrEqual Greater GreaterOrEqual And Or Xor Not Where IsNaN IsInf "
    "Mod BitShift BitwiseAnd BitwiseOr BitwiseXor BitwiseNot Round Sign".split()
)
"""The ONNX ops of issue 29."""
MODEL_OPS = frozenset(
    "LayerNormalization RMSNormalization Gelu Swish HardSwish Mish Celu ThresholdedRelu Sin Cos Mean "
    "ReduceL1 ReduceL2 ReduceSumSquare ReduceLogSum ReduceLogSumExp Trilu Resize Upsample".split()
)
"""Ops of today's models (issue 32) that byoc composes from catalog ops. Their node
tests give axes as inputs: byoc.onnx_backend specialises the model to those values."""
OPS = TYPE_OPS | MODEL_OPS

UNSUPPORTED_TYPES = ("FLOAT8", "INT4", "UINT4", "FLOAT4", "INT2", "UINT2", "STRING", "COMPLEX")
"""Name fragments of the TensorProto types byoc does not have: a case that uses one
(as an input, an output or Cast's ``to``) is left out."""

EXCLUDED_COUNT = 150
"""How many node tests of :data:`OPS` use a type of :data:`UNSUPPORTED_TYPES`, left out
(onnx 1.23: 100 Cast and 48 CastLike cases from or to float8 (4 kinds and e8m0),
float4e2m1, int4, uint4, int2, uint2 or string, and the 2 string cases of Equal),
counted here so that an onnx that changes the selection is noticed. 346 are kept:
And 8, BitShift 28, BitwiseAnd/Or/Xor 4 each, BitwiseNot 3, Cast 16, CastLike 16
(half of them ``_expanded``), Equal 8, Greater 8, GreaterOrEqual 8, IsInf 4, IsNaN 2,
Less 8, LessOrEqual 8, Mod 19, Not 3, Or 8, Round 1, Sign 1, Where 2, Xor 8, and the
``_expanded`` cases of Clip, Greater and Less (10, 8, 8) whose nodes are all of these
ops (189 of issue 29's ops); Resize 39, LayerNormalization 19, RMSNormalization 19,
Trilu 18, ReduceL1, ReduceL2, ReduceLogSumExp and ReduceSumSquare 9 each, ReduceLogSum
5, Gelu 4, Celu, Mean and ThresholdedRelu 3 each, Cos and Sin 2 each, HardSwish, Mish,
Swish and Upsample 1 each (157 of issue 32's)."""

EXPECTED_FAILURES: dict[str, str] = {
    name: "an opset-1 model (Not's test is in opset 1): byoc imports opset 6 and newer, as "
    "documented (onnx.version_converter converts older models)"
    for name in ("test_not_2d", "test_not_3d", "test_not_4d")
}
"""Node tests that fail in every configuration, with the reason (checked strictly: a case that starts
passing fails the run until it leaves this list). 343 of 346 pass (99.1%)."""

CONFIGURATIONS = {
    "json": backend_for("json", host_fallback=False),
    "fused,ccompiler": backend_for("fused,ccompiler"),
}


def selection() -> tuple[list[str], list[str]]:
    """(kept, excluded): the names of the node tests of :data:`OPS`."""
    kept, excluded = [], []
    for info in index().values():
        if not all(op in OPS for op in info.ops):
            continue  # another op's test, or a function of it expanded into several ops
        if any(fragment in t for t in info.types for fragment in UNSUPPORTED_TYPES):
            excluded.append(info.name)
        else:
            kept.append(info.name)
    return kept, excluded


def test_the_selection():
    kept, excluded = selection()
    assert len(excluded) == EXCLUDED_COUNT, sorted(excluded)
    ops = {op for name in kept for op in index()[name].ops}
    assert ops == OPS, sorted(OPS - ops)
    assert len(kept) == 346
    assert set(EXPECTED_FAILURES) <= set(kept)


def test_the_recorded_index_is_the_installed_onnxs():
    version, record = recorded()
    if version != onnx.__version__:
        pytest.skip(f"{RECORD.name} is for onnx {version}; collection built the index of {onnx.__version__}")
    assert record == computed_index(), "rewrite it: .venv/bin/python tests/onnx_node_cases.py"


def _check(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, name: str) -> None:
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    if is_float(dtype_name(want.dtype) or ""):
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


def _typed(values, declared) -> list[np.ndarray]:
    """The loader's arrays in the dtypes the model declares, as its ``.pb`` files hold
    them (a Cast case's inputs are built from strings such as "NaN")."""
    out = []
    for value, info in zip(values, declared):
        dtype = onnx.helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
        if isinstance(value, onnx.TensorProto):
            value = onnx.numpy_helper.to_array(value)
        with np.errstate(all="ignore"):
            out.append(np.asarray(value).astype(dtype))
    return out


def _params():
    out = []
    for config in CONFIGURATIONS:
        for name in selection()[0]:
            marks = []
            if name in EXPECTED_FAILURES:
                marks.append(pytest.mark.xfail(strict=True, reason=EXPECTED_FAILURES[name]))
            out.append(pytest.param(config, name, marks=marks, id=f"{config}-{name}"))
    return out


@pytest.mark.parametrize(("config", "name"), _params())
def test_node_case(config, name):
    node_test = case(name)
    rep = CONFIGURATIONS[config].prepare(node_test.model)
    graph = node_test.model.graph
    for inputs, outputs in node_test.data_sets:
        inputs, outputs = _typed(inputs, graph.input), _typed(outputs, graph.output)
        got = rep.run(inputs)
        assert len(got) == len(outputs)
        for g, w in zip(got, outputs):
            _check(np.asarray(g), np.asarray(w), node_test.rtol, node_test.atol, name)
