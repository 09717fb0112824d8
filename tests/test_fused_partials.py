"""A pass of a `fused` reduction of several passes (softmax, log_softmax) over a
contiguous row runs in vector lanes of partial accumulators, merged by the spec's
`merge` (generator/c_fused/partials.py): the C (a golden), results within one float of
the reference with NaN and infinities where it has them, the loops that keep one
accumulator (a strided row, a short one), and located errors for a bad `merge`."""

from __future__ import annotations

import numpy as np
import pytest
from test_fused_anchors import FUSED_YAML, write_fused_copy
from test_fused_math import ulps_apart
from test_gen_fused import BACKEND, compile_text, generate

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.errors import SpecError
from byoc.generator.lowering import lower


def graph(expr: str, shape: tuple[int, ...]) -> str:
    dims = ", ".join(map(str, shape))
    return f"graph main(x: float32[{dims}]) {{\n  y = @fused {{ return {expr} }}\n  return y\n}}\n"


def externals(text: str):
    program = parse(text, "graph", file="partials.graph")
    return lower(program, load_backend, load_catalog()).externals_for(BACKEND), program


def test_golden_softmax_over_rows_in_lanes(golden):
    """Rows of 45: five groups of eight lanes, then five points one by one."""
    fns, _ = externals(graph("softmax(x, axis=-1)", (3, 45)))
    text = generate(fns)
    assert "double t0_top_part[8];" in text and "double t0_total_part[8];" in text
    assert "for (int64_t r0 = 40; r0 < 45; ++r0) {" in text
    assert text == golden("c")


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(2, 5, 128), (7, 45), (3, 16)])
def test_rows_in_lanes_are_the_reference_within_one_float(op, shape, tmp_path):
    """Random rows, a row holding a NaN, one holding +inf, one -inf: NaN exactly where
    the reference has it, every other element the reference's float or the one beside
    it (a sum in another order differs from it in its last bits, rarely in the float)."""
    fns, program = externals(graph(f"{op}(x, axis=-1)", shape))
    text = generate(fns)
    assert "_part[8];" in text
    module = compile_text(text, tmp_path)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32) * 4
    rows = x.reshape(-1, shape[-1])
    rows[0, 3], rows[1, 7], rows[-1, 0] = np.nan, np.inf, -np.inf
    out = np.full(shape, 99, np.float32)
    module["fused_0"](x, out)
    with np.errstate(all="ignore"):
        (want,) = evaluate(program.functions[0], {"x": x})
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    finite = ~np.isnan(want)
    assert ulps_apart(out[finite], want[finite]).max() <= 1


@pytest.mark.parametrize(
    ("expr", "shape"),
    [("softmax(x, axis=1)", (2, 40, 3)), ("softmax(x, axis=-1)", (4, 15))],
    ids=["strided row", "a row shorter than two groups of lanes"],
)
def test_other_rows_keep_one_accumulator(expr, shape):
    fns, _ = externals(graph(expr, shape))
    assert "_part[" not in generate(fns)


@pytest.mark.parametrize(
    ("merge", "message"),
    [("${total} + ${other}", "${other}"), ("${total} + ${x0}", "${x0}")],
    ids=["unknown placeholder", "an input"],
)
def test_a_bad_merge_is_a_located_spec_error(tmp_path, merge, message):
    shipped = FUSED_YAML.read_text(encoding="utf-8")
    at = shipped.index('merge: "${total} + ${part}"', shipped.index("  softmax:\n"))  # softmax's total
    write_fused_copy(tmp_path, shipped[:at] + shipped[at:].replace("${total} + ${part}", merge, 1))
    with pytest.raises(SpecError) as info:
        load_backend(BACKEND, spec_path=[tmp_path])
    assert message in info.value.message and "merge of accumulator total" in info.value.message
    assert info.value.location.file.endswith("fused.yaml")
    assert info.value.location.line == shipped.count("\n", 0, at) + 1
