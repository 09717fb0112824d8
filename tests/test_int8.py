"""The 8-bit dtypes, int8 and uint8, end to end: the DSL (types, constants, their
range checks, the printer), the C generators (golden text, compiled and run), the
JSON runtime, the host, bundles, `byoc run`'s random inputs, and the argument checks
of a compiled module.

Every numeric check compares with the numpy reference (byoc's evaluator), which
computes in the tensors' own dtype, wrapping around modulo 256 as C's store into an
8-bit type does.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_gen_fused import compile_text, generate

from byoc.api import evaluate, load_backend, load_catalog, parse, print_program
from byoc.building import build
from byoc.errors import GraphError, RuntimeFailure
from byoc.generator.lowering import lower
from byoc.runtime.model import load

# An image-like uint8 tensor moved around (transpose, pad, slice, reshape, concatenate,
# gather, split), plus int8 arithmetic that overflows and wraps; @BACKEND is replaced.
IMAGE = """\
graph main(img: uint8[1, 3, 4, 5], s: int8[2, 6]) {
  r, q = @BACKEND {
    t = transpose(img, perm=[0, 2, 3, 1])
    p = pad(t, pads=[0, 1, 0, 0, 0, 1, 2, 0], value=7.0)
    c = slice(p, starts=[1], ends=[5], axes=[1])
    f = add(reshape(c, newshape=[-1]), k)
    return f, multiply(s, s)
  }
  k = const uint8[1] [200]
  idx = const int32[3] [19, 0, -3]
  g = gather(flatten(img, axis=2), idx, axis=1)
  a, b = split(g, axis=1, sizes=[1, 2])
  return r, q, concatenate(b, a, axis=1), maximum(q, negative(s))
}
"""

BACKENDS = ("json", "fused", "ccompiler")


def image_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Full-range values: the sums and products above overflow 8 bits."""
    return {
        "img": rng.integers(0, 256, size=(1, 3, 4, 5)).astype(np.uint8),
        "s": rng.integers(-128, 128, size=(2, 6)).astype(np.int8),
    }


def _hosted(text: str) -> str:
    """The graph without its region: every op on the host."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "@BACKEND" in line)
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == "}")
    body = [line[2:] for line in lines[start + 1 : end - 1]]  # the region's return last
    body += ["  r = copy(f)", "  q = multiply(s, s)"]
    return "\n".join([*lines[:start], *body, *lines[end + 1 :]]) + "\n"


def assert_matches(outputs, expected) -> None:
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_8_bit_graph_matches_the_reference(backend, rng):
    """On ccompiler, which maps no data-movement op, those run on the host (the
    reference kernels, through the host graph) around the offloaded multiply."""
    if backend == "ccompiler":
        text = _hosted(IMAGE).replace("  q = multiply(s, s)", "  q = @ccompiler { return multiply(s, s) }")
    else:
        text = IMAGE.replace("@BACKEND", f"@{backend}")
    program = parse(text, "graph", file="image.graph")
    inputs = image_inputs(rng)
    outputs = build(program)(**inputs)
    expected = evaluate(program.functions[0], inputs)
    assert_matches(outputs, expected)
    assert outputs[0].dtype == np.uint8 and outputs[1].dtype == np.int8


def test_partitioned_8_bit_graph_and_its_bundle(rng, tmp_path):
    """Automatic partitioning offloads the 8-bit ops; a saved bundle runs the same."""
    program = parse(_hosted(IMAGE), "graph", file="image.graph")
    model = build(program, backends=["fused"])
    inputs = image_inputs(rng)
    expected = evaluate(program.functions[0], inputs)
    assert_matches(model(**inputs), expected)
    model.save(tmp_path / "image.byoc")
    assert_matches(load(tmp_path / "image.byoc")(**inputs), expected)


def test_the_reference_wraps_modulo_256():
    """The property the C code relies on, checked against plain Python integers."""
    program = parse(_hosted(IMAGE), "graph")
    s = np.array([[127, -128, 100, -100, 16, -1]] * 2, np.int8)
    inputs = {"img": np.full((1, 3, 4, 5), 100, np.uint8), "s": s}
    r, q, _, m = evaluate(program.functions[0], inputs)
    assert set(r.tolist()) <= {(100 + 200) % 256, (7 + 200) % 256}
    wrap = [((v * v + 128) % 256) - 128 for v in s[0].tolist()]
    assert q[0].tolist() == wrap
    assert m[0].tolist() == [max(w, ((-v + 128) % 256) - 128) for w, v in zip(wrap, s[0].tolist())]


SMALL = """\
graph main(x: uint8[2, 3], y: int8[3]) {
  r, n, t = @fused {
    k = const uint8[3] [0, 128, 255]
    m = const int8[3] [-128, -1, 127]
    return add(x, k), relu(multiply(y, m)), pad(transpose(x, perm=[1, 0]), pads=[1, 0, 0, 1])
  }
  return r, n, t
}
"""


def test_golden_uint8_fused(golden, tmp_path, rng):
    program = parse(SMALL, "graph", file="small8.graph")
    (fn,) = lower(program, load_backend, load_catalog()).externals_for("fused")
    text = generate([fn])
    assert text == golden("c")
    assert "static const uint8_t fused_0_const_0[3] = {0, 128, 255};" in text
    assert "static const int8_t fused_0_const_1[3] = {-128, -1, 127};" in text
    module = compile_text(text, tmp_path)  # -Wall -Wextra -Werror, the spec's flags
    x = rng.integers(0, 256, size=(2, 3)).astype(np.uint8)
    y = np.array([-128, 5, 127], np.int8)
    outs = [np.empty(t.shape, t.dtype) for t in fn.output_types]
    module[fn.name](x, y, *outs)
    assert_matches(outs, evaluate(fn, {"x": x, "y": y}))


def test_compiled_module_refuses_an_int8_array_for_a_uint8_argument(rng, tmp_path):
    program = parse(SMALL, "graph", file="small8.graph")
    (fn,) = lower(program, load_backend, load_catalog()).externals_for("fused")
    f = compile_text(generate([fn]), tmp_path)[fn.name]
    x = rng.integers(-128, 128, size=(2, 3)).astype(np.int8)  # int8, the entry wants uint8
    outs = [np.empty(t.shape, t.dtype) for t in fn.output_types]
    with pytest.raises(
        TypeError, match=r"argument 0 \(input x\) must be uint8, got DLPack type code 0, 8 bits"
    ):
        f(x, np.zeros(3, np.int8), *outs)
    with pytest.raises(
        TypeError, match=r"argument 1 \(input y\) must be int8, got DLPack type code 1, 8 bits"
    ):
        f(x.view(np.uint8), np.zeros(3, np.uint8), *outs)
    model = build(program)
    with pytest.raises(RuntimeFailure, match="input 'x' must be uint8") as info:
        model(x=x, y=np.zeros(3, np.int8))
    assert info.value.hint or "x" in str(info.value)


@pytest.mark.parametrize(
    ("constant", "message"),
    [
        ("const uint8[2] [1, 300]", "constant value 300 is out of range for uint8"),
        ("const uint8[1] [-1]", "constant value -1 is out of range for uint8"),
        ("const int8[1] [128]", "constant value 128 is out of range for int8"),
        ("const int8[1] [-129]", "constant value -129 is out of range for int8"),
        ("const uint8[1] [1.5]", "a uint8 constant takes integers only"),
    ],
)
def test_out_of_range_8_bit_constants_are_located(constant, message):
    text = f"graph main(x: uint8[2]) {{\n  k = {constant}\n  return add(x, k)\n}}\n"
    with pytest.raises(GraphError, match=message) as info:
        parse(text, "graph", file="k.graph")
    assert (info.value.location.line, info.value.location.column) == (2, 7)
    if "range" in message:
        assert "values lie in" in info.value.hint


def test_8_bit_types_and_constants_round_trip():
    text = (
        "graph main(a: int8[2], b: uint8[2, 2]) {\n"
        "  k = const int8[2] [-128, 127]\n"
        "  u = const uint8[2] [0, 255]\n"
        "  return add(a, k), add(b, u)\n"
        "}\n"
    )
    program = parse(text, "graph")
    assert parse(print_program(program, "graph"), "graph") == program
    assert "const int8[2] [-128, 127]" in print_program(program, "graph")


OFFLOADED = _hosted(IMAGE).replace("  q = multiply(s, s)", "  q = @fused { return multiply(s, s) }")


def test_byoc_run_draws_8_bit_inputs(tmp_path, capsys):
    from byoc.cli import main

    path = tmp_path / "image.graph"
    path.write_text(OFFLOADED)
    assert main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "uint8" in out and "int8" in out and "every output matches the numpy reference" in out


def test_byoc_run_takes_8_bit_npz_inputs(tmp_path, capsys, rng):
    from byoc.cli import main

    path = tmp_path / "image.graph"
    path.write_text(OFFLOADED)
    npz = tmp_path / "in.npz"
    np.savez(npz, **image_inputs(rng))
    assert main(["run", str(path), "--inputs", str(npz)]) == 0
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{**image_inputs(rng), "img": np.zeros((1, 3, 4, 5), np.int8)})
    assert main(["run", str(path), "--inputs", str(bad)]) == 2
    assert "'img' is int8[1, 3, 4, 5], but main takes uint8[1, 3, 4, 5]" in capsys.readouterr().err
