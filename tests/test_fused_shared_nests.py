"""One function per distinct parallel nest (generator/c_fused/outline.py): nests whose
text differs only in the names of their arrays (constants included) and values share
one outlined function, each call passing its own arrays; and they compute what the
serial nests compute, bit for bit."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import random_array
from test_fused_float32_dots import constant
from test_fused_pool import PARALLEL, SERIAL
from test_gen_fused import BACKEND, compile_text, ffi_array, generate

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.generator.c_fused.outline import _canonical
from byoc.generator.lowering import lower


def layers(widths=(24, 24, 24)) -> str:
    """Three dense + bias + relu layers of constant weights: of equal widths, their
    nests are one function's calls."""
    rng = np.random.default_rng(9)
    lines, x, k = [], "x", 24
    for j, n in enumerate(widths):
        lines.append(f"    w{j} = {constant(rng, (n, k))}")
        lines.append(f"    b{j} = {constant(rng, (n,))}")
        lines.append(f"    h{j} = relu(bias_add(dense({x}, w{j}), b{j}, axis=1))")
        x, k = f"h{j}", n
    body = "\n".join(lines)
    return (
        f"graph main(x: float32[6, 24]) {{\n  r = @fused {{\n{body}\n    return {x}\n  }}\n  return r\n}}\n"
    )


def externals(text: str):
    return lower(parse(text, "graph", file="layers.graph"), load_backend, load_catalog()).externals_for(
        BACKEND
    )


def test_equal_layers_call_one_function_each_with_its_own_weights(tmp_path):
    fns = externals(layers())
    text = generate(fns, PARALLEL)
    assert text.count("static void fused_0_loop") == 1
    calls = [
        line.strip() for line in text.splitlines() if line.strip().startswith("fused_0_loop0_args args = {")
    ]
    assert len(calls) == 3 and len(set(calls)) == 3  # each with its own arrays
    assert "Also runs nest 1, nest 2: the same code on their own arrays." in text
    module = compile_text(text, tmp_path)
    x = random_array(np.random.default_rng(1), (6, 24), "float32")
    out = np.full((6, 24), 99, np.float32)
    module["fused_0"](ffi_array(x), ffi_array(out))
    serial = compile_text(generate(fns, SERIAL), tmp_path / "serial")
    want = np.full((6, 24), 99, np.float32)
    serial["fused_0"](ffi_array(x), ffi_array(want))
    np.testing.assert_array_equal(out, want)  # the serial nests' bits
    (ref,) = evaluate(fns[0], {fns[0].params[0].name: x})
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_equal_serial_nests_call_one_function_and_give_the_parallel_bits(tmp_path):
    """Below the pool's thresholds the three layers' nests are serial: one function, which
    the body calls three times with each layer's arrays."""
    fns = externals(layers())
    text = generate(fns, SERIAL)
    assert text.count("static void fused_0_nest") == 1 and "byoc_parallel_for" not in text
    assert text.count("  fused_0_nest0_(&args);") == 3
    x = random_array(np.random.default_rng(2), (6, 24), "float32")
    got, want = (np.full((6, 24), 99, np.float32) for _ in range(2))
    compile_text(text, tmp_path / "serial")["fused_0"](ffi_array(x), ffi_array(got))
    compile_text(generate(fns, PARALLEL), tmp_path / "parallel")["fused_0"](ffi_array(x), ffi_array(want))
    np.testing.assert_array_equal(got, want)


def test_a_serial_nest_that_can_fail_stays_in_the_body():
    """A gather's nest reports an index out of range through the body's status: it is
    never moved into a function, however often its code repeats."""
    text = """\
graph main(x: float32[5, 4], i: int64[3], j: int64[3]) {
  r, s = @fused {
    return gather(x, i, axis=0), gather(x, j, axis=0)
  }
  return r, s
}
"""
    out = generate(externals(text), SERIAL)
    assert "fused_0_nest" not in out and out.count("status = 2; goto done;") == 2


def test_equal_small_constants_are_one_array_the_shared_nest_reads_itself(tmp_path):
    """Each layer's exponent 3 is its own constant in the graph: one array in the module,
    indexed by the shared function (so gcc folds it), not passed as an argument."""
    lines = []
    for line in layers().splitlines():
        lines.append(line)
        if line.strip().startswith("b") and "= const" in line:
            j = line.strip()[1]
            lines.append(f"    e{j} = const float32[] [3.0]")
    text = "\n".join(lines).replace("relu(bias_add(dense(", "power(relu(bias_add(dense(")
    for j in range(3):
        text = text.replace(f"b{j}, axis=1))", f"b{j}, axis=1)), e{j})")
    fns = externals(text)
    out = generate(fns, PARALLEL)
    assert out.count("static void fused_0_loop") == 1
    assert out.count("[1] = {") == 1  # the three exponents: one array
    shared = out[out.index("static void fused_0_loop0_(") :]
    shared = shared[: shared.index("\n}\n")]
    (exponent,) = {m for m in re.findall(r"fused_0_const_\d+\[0\]", shared)}
    assert f"restrict {exponent[:-3]} = a->" not in shared  # read where it is, not through args
    x = random_array(np.random.default_rng(4), (6, 24), "float32")
    got = np.full((6, 24), 99, np.float32)
    compile_text(out, tmp_path)["fused_0"](ffi_array(x), ffi_array(got))
    (ref,) = evaluate(fns[0], {fns[0].params[0].name: x})
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("floats", [False, True])
def test_equal_small_weights_share_one_array_and_its_panels(floats, tmp_path):
    """Two equal 4x4 weights (16 elements: one array) that two dense nests read packed:
    one panels array, written once (a GRU's gates met this)."""
    values = ", ".join(str(0.125 * (k % 5) - 0.25) for k in range(16))
    text = f"""\
graph main(x: float32[8, 4]) {{
  r = @fused {{
    w1 = const float32[4, 4] [{values}]
    w2 = const float32[4, 4] [{values}]
    return dense(relu(dense(x, w1)), w2)
  }}
  return r
}}
"""
    fns = externals(text)
    out = generate(fns, {"float32_dots": "true" if floats else "false"})
    assert (
        out.count("static const float fused_0_const_0[16]") + out.count("fused_0_const_0_panels[16] =") >= 1
    )
    assert "fused_0_const_1" not in out  # the second weight is the first one's array
    x = random_array(np.random.default_rng(6), (8, 4), "float32")
    got = np.full((8, 4), 99, np.float32)
    compile_text(out, tmp_path)["fused_0"](ffi_array(x), ffi_array(got))
    (ref,) = evaluate(fns[0], {fns[0].params[0].name: x})
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_nests_of_other_shapes_keep_their_own_functions():
    text = generate(externals(layers((24, 16, 24))), PARALLEL)
    assert text.count("static void fused_0_loop") == 3 and "Also runs" not in text


@pytest.mark.parametrize("options", ["parallel", "serial"])
def test_golden_shared(options, golden):
    assert generate(externals(layers((24, 24))), PARALLEL if options == "parallel" else SERIAL) == golden("c")


@pytest.mark.parametrize(
    "a, b, same",
    [
        (
            "t5 = in0[i] * fused_0_const_1[i]; out0[i] = t5;",
            "t9 = in1[i] * fused_0_const_7[i]; out2[i] = t9;",
            True,
        ),
        ("t5_acc = in0[i]; t6 = t5_acc;", "t9_acc = in0[i]; t9 = t9_acc;", False),  # t5, t6 against t9, t9
        ("out0[i] = in0[i] + 1;", "out0[i] = in0[i] + 2;", False),
        ("out0[i] = in0[i] + in1[i];", "out0[i] = in1[i] + in0[i];", True),  # the arrays by first use
        ("out0[i] = in0[i] + in0[i];", "out0[i] = in0[i] + in1[i];", False),
    ],
)
def test_canonical_text_renames_arrays_and_values_by_first_use(a, b, same):
    arrays = ["in0", "in1", "out0", "out2", "fused_0_const_1", "fused_0_const_7"]
    assert (_canonical(a, arrays)[0] == _canonical(b, arrays)[0]) == same
