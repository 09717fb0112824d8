"""The catalog's own C expressions (spec/ops.yaml ``c:``), compiled and run alone.

For every op with a ``c:`` and every dtype it lists, one C function applies the
expression to arrays (in the dtype's compute type: ``float`` for float16 and bfloat16),
compiled with ``-std=c99 -Wall -Wextra -Werror``: the catalog's rule that an expression
compiles warning-free for every dtype it lists (``x < 0`` on an unsigned type, a
literal -1 beside one). Each function of a non-16-bit dtype then runs (ctypes) on
edge values (0, 1, -1, the type's extremes, NaN and infinities for floats) and must
equal the catalog's numpy reference: integers and bools exactly, floats within 4
units of roundoff (the C computes in the dtype, the reference in float64), NaN as NaN. ``cast``
and ``bitcast`` are left out: their ``byoc_cast_*`` and ``byoc_bitcast_*`` functions live
in the generators' support text (tested with it, tests/test_c_dtypes.py); so are
``dequantize_linear`` and ``quantize_linear``, whose inputs have different dtypes and
whose ``byoc_saturate_*`` lives there too (they run on ``fused`` against
tests/catalog_cases.py's expected values in tests/test_fused_catalog_ops.py).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from string import Template

import numpy as np
import pytest

import byoc.spec
from byoc.catalog import evaluate_op, normalize_attrs
from byoc.ir import C_COMPUTE_TYPES, C_TYPES, TensorType, is_float, is_half

CATALOG = byoc.spec.load_catalog()
CC = shutil.which("gcc") or shutil.which("cc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")
SUPPORTED_ELSEWHERE = ("cast", "bitcast", "dequantize_linear", "quantize_linear")
"""Ops whose C calls functions of the generators' support text (see the module doc)."""
OPS = [name for name, op in CATALOG.items() if op.c is not None and name not in SUPPORTED_ELSEWHERE]


def _edges(dtype: str) -> np.ndarray:
    if dtype == "bool":
        return np.array([False, True])
    if is_float(dtype):
        values = [0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 2.5, 3.0, -7.25, np.inf, -np.inf, np.nan, 1e30, -1e-30]
        return np.array(values, dtype)
    info = np.iinfo(dtype)
    values = {0, 1, 2, 3, int(info.max), int(info.max) - 1, int(info.min)}
    if info.min < 0:
        values |= {-1, -2, -3, int(info.min) + 1}
    return np.array(sorted(values), dtype)


def _attrs(op) -> dict[str, str]:
    """A C literal per scalar attribute: its default, or 1."""
    out = {}
    for a in op.attrs:
        value = a.default if a.default is not None else 1
        out[a.name] = str(int(value)) if isinstance(value, bool) else str(value)
    return out


def _cases():
    for name in OPS:
        op = CATALOG[name]
        for dtype in op.dtypes:
            yield name, dtype


CASES = list(_cases())


def _function(k: int, name: str, dtype: str) -> tuple[str, str, list[str]]:
    """(C text, out dtype, input dtypes) of function ``f<k>``, which applies the
    expression to n elements of its inputs."""
    op = CATALOG[name]
    n = op.max_inputs
    in_dtypes = ["bool" if name == "where" and i == 0 else dtype for i in range(n)]
    out = op.rule.infer([TensorType((1,), d) for d in in_dtypes], op.kwargs(())).dtype
    subs = {f"x{i}": f"(({C_COMPUTE_TYPES[d]})a{i}[i])" for i, d in enumerate(in_dtypes)}
    subs |= {f"x{i}_dtype": d for i, d in enumerate(in_dtypes)} | {"dtype": out} | _attrs(op)
    expr = Template(op.c).substitute(subs)
    store = "float" if is_half(out) else C_TYPES[out]
    load = ["float" if is_half(d) else C_TYPES[d] for d in in_dtypes]
    params = ", ".join(f"const {t} *a{i}" for i, t in enumerate(load))
    text = (
        f"void f{k}({params}, {store} *out, long n) {{\n"
        f"  for (long i = 0; i < n; i++) out[i] = ({store})({expr});\n}}\n"
    )
    return text, out, in_dtypes


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cexpr")
    parts = ["#include <math.h>", "#include <stdint.h>", "#include <stdbool.h>"]
    parts += [_function(k, name, dtype)[0] for k, (name, dtype) in enumerate(CASES)]
    source = tmp / "expressions.c"
    source.write_text("\n".join(parts), encoding="utf-8")
    lib = tmp / "libexpressions.so"
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-fPIC", "-shared"]
    out = subprocess.run([CC, *flags, str(source), "-o", str(lib), "-lm"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[:4000]
    return ctypes.CDLL(str(lib))


def test_every_expression_compiles_warning_free(library):
    assert len(CASES) > 100


@pytest.mark.parametrize(
    ("k", "name", "dtype"), [(k, n, d) for k, (n, d) in enumerate(CASES) if not is_half(d)]
)
def test_the_expression_computes_the_reference(library, k, name, dtype):
    _, out_dtype, in_dtypes = _function(k, name, dtype)
    op = CATALOG[name]
    edges = [_edges(d) for d in in_dtypes]
    grids = np.meshgrid(*edges, indexing="ij")
    inputs = [np.ascontiguousarray(g.ravel()) for g in grids]
    result = np.zeros(inputs[0].size, out_dtype)
    fn = getattr(library, f"f{k}")
    fn(
        *(ctypes.c_void_p(a.ctypes.data) for a in inputs),
        ctypes.c_void_p(result.ctypes.data),
        ctypes.c_long(result.size),
    )
    with np.errstate(all="ignore"):  # the attributes' defaults, as _attrs gives the C
        want = evaluate_op(op, inputs, normalize_attrs(op, ()), TensorType(result.shape, out_dtype))
    if is_float(out_dtype):
        same = (result == want) | (np.isnan(result) & np.isnan(want))
        near = np.isclose(result, want, rtol=4 * np.finfo(out_dtype).eps, atol=0)
        assert (same | near).all(), (
            name,
            dtype,
            inputs[0][~(same | near)],
            result[~(same | near)],
            want[~(same | near)],
        )
    else:
        np.testing.assert_array_equal(result, want, err_msg=f"{name} {dtype}: {[a.tolist() for a in inputs]}")
