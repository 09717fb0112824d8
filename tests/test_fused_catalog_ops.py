"""Every op of issue 29 (comparisons, logic, where on bool, cast, isnan/isinf, mod,
bitwise, bit_shift, round) and every elementwise op at the new dtypes, run on the
``fused`` backend against the independently computed results of tests/catalog_cases.py.

One graph per op holds one ``@fused`` region per dtype the op takes (one compile per
op); each region's inputs and expected outputs are a case drawn for that dtype. The
comparison is test_catalog_ops.check's: integers and bools exactly, a 16-bit float
within one unit in its last place (the C computes in float32, the definition in
float64), float32 and float64 tightly.
"""

from __future__ import annotations

import numpy as np
import pytest
from catalog_cases import CASES
from catalog_cases_support import attr_text
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_catalog_ops import check

import byoc
from byoc.api import parse
from byoc.building import build

CATALOG = byoc.load_catalog()
FUSED = byoc.load_backend("fused")
NEW_DTYPES = ("bool", "float16", "bfloat16", "int16", "uint16", "uint32", "uint64")
ISSUE_29 = (
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "where",
    "cast",
    "isnan",
    "isinf",
    "mod",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "bit_shift",
    "round",
    "sign",
)
OPS = sorted(
    op
    for op, d in CATALOG.items()
    if op in CASES
    and op in FUSED.ops
    and (op in ISSUE_29 or (d.rule.elementwise and any(t in NEW_DTYPES for t in d.dtypes)))
)


def test_fused_maps_every_catalog_op():
    """Every op of a rule the c_fused kind computes; the others stay on the host."""
    assert set(FUSED.ops) == {op for op in CATALOG if CATALOG[op].shape_rule in FUSED.kind.shape_rules}
    assert {op for op in CATALOG if CATALOG[op].rule.elementwise} <= set(FUSED.ops)


@pytest.mark.parametrize("op", OPS)
@settings(
    max_examples=2,
    deadline=None,
    derandomize=True,
    phases=(
        Phase.explicit,
        Phase.generate,
    ),  # a failing graph is one compile per shrink step: report it as drawn
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_op_at_every_dtype_on_fused(op, data):
    params, lines, returned, inputs, expected = [], [], [], {}, []
    for k, dtype in enumerate(CATALOG[op].dtypes):
        case = data.draw(CASES[op](dtype), label=dtype)
        if case.expected is None:  # a case the op must reject
            continue
        names = [f"d{k}_{i}" for i in range(len(case.inputs))]
        for name, a in zip(names, case.inputs):
            params.append(f"{name}: {a.dtype}[{', '.join(map(str, a.shape))}]")
            inputs[name] = a
        call = f"{op}({', '.join([*names, *(f'{a}={attr_text(v)}' for a, v in case.attrs.items())])})"
        targets = [f"r{k}_{j}" for j in range(len(case.outputs))]
        lines.append(f"  {', '.join(targets)} = @fused {{ return {call} }}")
        returned += targets
        expected += [np.asarray(e) for e in case.outputs]
    text = (
        f"graph main({', '.join(params)}) {{\n" + "\n".join(lines) + f"\n  return {', '.join(returned)}\n}}\n"
    )
    program = parse(text, "graph")
    got = build(program, backends=["fused"])(**inputs)
    assert len(got) == len(expected)
    for g, e, t in zip(got, expected, program.functions[0].output_types):
        assert g.dtype == np.dtype(t.dtype) and g.shape == t.shape, text
        check(g, e)
