"""Patterns computed by other ops (``lowering:``, byoc/spec/lowerings.py), as fused.yaml's
QDQ patterns use them: partitioning replaces a match by the lowering's nodes, which run
on the backend (a QDQ conv becomes an integer product in one nest), within one step of
the float reference for random QDQ convolutions and matmuls; a match the lowering does
not type on stays float, with the reason in ``--explain``; and a bad lowering is a
located spec error."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shipped_fused import FUSED_YAML, write_fused_copy

from byoc.api import evaluate, load_backend, parse, print_program
from byoc.building import build
from byoc.errors import GraphError, SpecError
from byoc.generator.partition import partition

QDQ_CONV = """\
graph main(x: uint8[{n}, {c}, {h}, {w}]) {{
  xs = const float32[] [{xs}]
  xz = const uint8[] [{xz}]
  w = const int8[{m}, {cg}, 3, 3] [{weights}]
  ws = const float32[{m}, 1, 1, 1] [{ws}]
  wz = const int8[{m}, 1, 1, 1] [{wz}]
  b = const int32[{m}] [{bias}]
  bs = const float32[{m}] [{bs}]
  bz = const int32[{m}] [{bz}]
  ys = const float32[] [{ys}]
  yz = const uint8[] [{yz}]
  c = conv(dequantize_linear(x, xs, xz), dequantize_linear(w, ws, wz), pads=[1, 1, 1, 1], strides=[{s}, 1], groups={g})
  return quantize_linear({value}, ys, yz)
}}
"""


def value(relu: bool) -> str:
    """What the QDQ conv quantizes: the conv plus its bias, with a relu or not."""
    biased = "bias_add(c, dequantize_linear(b, bs, bz), axis=1)"
    return f"relu({biased})" if relu else biased


def listed(values) -> str:
    return ", ".join(str(v) for v in np.ravel(values).tolist())


@st.composite
def qdq_convs(draw):
    """A QDQ conv as quantize_static writes it (per-channel int8 weights, the int32 bias
    at scale xs * ws), with a relu or not, grouped or not, and a uint8 input."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    g = draw(st.sampled_from([1, 2]))
    cg, m = draw(st.integers(1, 4)), g * draw(st.integers(1, 3))
    xs, ys = float(np.float32(rng.uniform(0.01, 0.05))), float(np.float32(rng.uniform(0.02, 0.2)))
    ws = rng.uniform(0.002, 0.02, m).astype(np.float32)
    text = QDQ_CONV.format(
        n=draw(st.integers(1, 2)),
        c=g * cg,
        h=draw(st.integers(3, 8)),
        w=draw(st.integers(3, 20)),
        xs=xs,
        xz=int(rng.integers(0, 256)),
        m=m,
        cg=cg,
        weights=listed(rng.integers(-127, 128, (m, cg, 3, 3))),
        ws=listed(ws),
        wz=listed(np.zeros(m, np.int8) if draw(st.booleans()) else rng.integers(-3, 4, m)),
        bias=listed(rng.integers(-2000, 2000, m)),
        bs=listed((np.float32(xs) * ws).astype(np.float32)),
        bz=listed(np.zeros(m, np.int32)),
        ys=ys,
        yz=int(rng.integers(0, 256)),
        s=draw(st.integers(1, 2)),
        g=g,
        value=value(draw(st.booleans())),
    )
    return text


def fused_program(text: str):
    return partition(parse(text, "graph", file="qdq.graph"), [load_backend("fused")])


def ops_of(program) -> list[str]:
    return [
        n.op
        for fn in program.functions
        for node in fn.nodes
        for n in (node.callee.nodes if node.callee else [node])
    ]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=qdq_convs(), seed=st.integers(0, 2**16))
def test_a_lowered_qdq_conv_is_within_one_step_of_the_float_reference(case, seed):
    text = case
    program = parse(text, "graph", file="qdq.graph")
    assert "conv_integer" in ops_of(fused_program(text)) and "conv" not in ops_of(fused_program(text))
    x_type = program.functions[0].params[0].type
    x = np.random.default_rng(seed).integers(0, 256, x_type.shape).astype(np.uint8)
    (got,) = build(program, backends=["fused"])(x=x)
    (want,) = evaluate(program.functions[0], {"x": x})
    diff = np.abs(np.asarray(got).astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= 1  # a float sum's rounding may move a value across a tie
    assert (diff == 0).mean() > 0.95


QDQ_MATMUL = """\
graph main(x: uint8[{m}, {k}]) {{
  xs = const float32[] [0.021]
  xz = const uint8[] [{xz}]
  w = const int8[{k}, {n}] [{weights}]
  ws = const float32[1, {n}] [{ws}]
  wz = const int8[1, {n}] [{wz}]
  ys = const float32[] [0.17]
  yz = const uint8[] [128]
  return quantize_linear(matmul(dequantize_linear(x, xs, xz), dequantize_linear(w, ws, wz)), ys, yz)
}}
"""


@pytest.mark.parametrize("seed", range(4))
def test_a_lowered_qdq_matmul_is_within_one_step_of_the_float_reference(seed):
    rng = np.random.default_rng(seed)
    m, k, n = (int(v) for v in rng.integers(1, 40, 3))
    text = QDQ_MATMUL.format(
        m=m,
        k=k,
        n=n,
        xz=int(rng.integers(0, 256)),
        weights=listed(rng.integers(-127, 128, (k, n))),
        ws=listed(rng.uniform(0.001, 0.01, n).astype(np.float32)),
        wz=listed(rng.integers(-2, 3, n)),
    )
    program = parse(text, "graph", file="qdq.graph")
    assert "matmul_integer" in ops_of(fused_program(text))
    x = rng.integers(0, 256, (m, k)).astype(np.uint8)
    (got,) = build(program, backends=["fused"])(x=x)
    (want,) = evaluate(program.functions[0], {"x": x})
    assert np.abs(np.asarray(got).astype(np.int32) - want.astype(np.int32)).max() <= 1


def test_a_match_the_lowering_does_not_type_on_stays_float(capsys, tmp_path):
    """x's zero point per channel: conv_integer takes one value, so the lowering does
    not apply; the conv runs in float on fused, and --explain says why."""
    text = (
        QDQ_CONV.format(
            n=1, c=2, h=4, w=4, xs=0.02, xz=0, m=2, cg=2, weights=listed(range(36)), ws="0.01, 0.02",
            wz="0, 0", bias="1, 2", bs="0.0002, 0.0004", bz="0, 0", ys=0.1, yz=0, s=1, g=1, value=value(True),
        )
        .replace("xz = const uint8[] [0]", "xz = const uint8[1, 2, 1, 1] [0, 3]")
    )  # fmt: skip
    assert "conv_integer" not in ops_of(fused_program(text))
    path = tmp_path / "qdq.graph"
    path.write_text(text)
    rc, out, _ = run_cli(capsys, "partition", path, "--backend", "fused", "--explain")
    assert rc == 0
    assert "fused pattern qdq_conv_bias_relu: its lowering does not apply here" in out
    assert "x's zero point (input 2) has shape [1, 2, 1, 1], not one value" in out


def _spec_error(tmp_path, old: str, new: str) -> SpecError:
    shipped = FUSED_YAML.read_text(encoding="utf-8")
    at = shipped.index(old, shipped.index("  qdq_conv:\n"))
    write_fused_copy(tmp_path, shipped[:at] + shipped[at:].replace(old, new, 1))
    with pytest.raises(SpecError) as info:
        load_backend("fused", spec_path=[tmp_path])
    assert info.value.location.file.endswith("fused.yaml")
    assert info.value.location.line >= shipped.count("\n", 0, shipped.index("  qdq_conv:\n")) + 1
    return info.value


LOWERING = (
    '      c = multiply(cast(p, to="float32"), multiply(xs, reshape(ws, newshape=[-1, 1, 1])))\n'
    "      return quantize_linear(c, ys, yz)\n"
)
"""The last two lines of qdq_conv's lowering (its match ends as its lowering does)."""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("groups=${conv.groups}", "groups=${conv.group}", "${conv.group} names no attribute of a node"),
        ("groups=${conv.groups}", "groups=${conv.groups0}", "${conv.groups0} names no attribute of a node"),
        ("cast(p, ", "kast(p, ", "unknown op 'kast'"),
        ("cast(p, ", "argmax(p, axis=0, ", "the backend does not map argmax"),
        ("multiply(xs, ", "multiply(xq, ", "undefined name 'xq'"),
        (LOWERING, "      return p, ys\n", "a lowering returns one value"),
        ("      p = conv_integer(", "      xs = conv_integer(", "xs is an input of the pattern"),
        (LOWERING, "      q = const float32[] [1.0]\n" + LOWERING, "a lowering cannot define a constant"),
        ("    lowering: |\n", "    variants: {x: {}}\n    lowering: |\n", "cannot have `variants`"),
        ("{relu: {after: c}}", "{relu: {after: conv}}", "optional: relu: the lowering binds no value 'conv'"),
    ],
    ids=[
        "unknown attribute",
        "an element",
        "unknown op",
        "op not mapped",
        "undefined name",
        "two results",
        "an input bound again",
        "a constant",
        "variants",
        "an optional op after a value the lowering lacks",
    ],
)
def test_a_bad_lowering_is_a_located_spec_error(tmp_path, old, new, message):
    error = _spec_error(tmp_path, old, new)
    assert message in error.message
    assert error.message.startswith("pattern qdq_conv: ")


def test_the_lowering_shows_in_backends(capsys):
    rc, out, _ = run_cli(capsys, "backends", "fused")
    assert rc == 0
    assert "qdq_conv: dequantize_linear -> dequantize_linear -> conv -> quantize_linear" in out
    assert "lowered to p = conv_integer(x, w, xz" in out


def test_the_lowered_graph_prints_and_parses_back():
    """What partitioning gives (the lowering's nodes in a fused region, named after the
    pattern) prints as DSL that parses back to the same program."""
    text = QDQ_MATMUL.format(m=2, k=3, n=2, xz=3, weights="1, 2, 3, 4, 5, 6", ws="0.01, 0.02", wz="0, 1")
    program = fused_program(text)
    printed = print_program(program, "graph")
    assert "qdq_matmul_p_0 = matmul_integer(" in printed
    assert parse(printed, "graph") == program


def test_a_composite_of_a_lowered_pattern_written_by_hand_is_refused(tmp_path):
    """A lowering pattern has no kernel, so `@fused.qdq_matmul { ... }` is refused where
    it stands, with what to write instead."""
    text = QDQ_MATMUL.format(m=2, k=3, n=2, xz=3, weights="1, 2, 3, 4, 5, 6", ws="0.01, 0.02", wz="0, 1")
    body = "  return quantize_linear(matmul(dequantize_linear(x, xs, xz), dequantize_linear(w, ws, wz)), ys, yz)\n"
    wrapped = (
        "  y = @fused {\n    r = @fused.qdq_matmul {\n  " + body + "    }\n    return r\n  }\n  return y\n"
    )
    program = parse(text.replace(body, wrapped), "graph", file="hand.graph")
    with pytest.raises(GraphError) as info:
        build(program)
    assert "composite @fused.qdq_matmul: the pattern has no kernel" in info.value.message
    assert "partitioning lowers them" in (info.value.hint or "")
    assert (info.value.location.file, info.value.location.line) == ("hand.graph", 10)


def test_an_optional_op_applies_after_the_lowerings_value_of_that_name():
    """qdq_conv's `optional: {relu: {after: c}}` makes qdq_conv_relu, whose lowering puts
    the relu on the lowering's own `c` (the scaled integer product), before the
    requantisation; within one step of the float reference."""
    text = QDQ_CONV.format(
        n=1, c=2, h=5, w=6, xs=0.02, xz=100, m=2, cg=2, weights=listed(np.arange(36) - 18), ws="0.01, 0.02",
        wz="0, 1", bias="0, 0", bs="0.0002, 0.0004", bz="0, 0", ys=0.05, yz=0, s=1, g=1, value="relu(c)",
    )  # fmt: skip
    (fn,) = fused_program(text).functions
    region = next(n.callee for n in fn.nodes if n.callee is not None)
    ops = [n.op for n in region.nodes]
    assert ops.index("conv_integer") < ops.index("relu") < ops.index("quantize_linear")
    relu = next(n for n in region.nodes if n.op == "relu")
    assert relu.name.startswith("qdq_conv_relu_relu_")
    (scaled,) = [n for n in region.nodes if n.name == relu.inputs[0]]
    assert scaled.op == "multiply" and scaled.name.startswith("qdq_conv_relu_c_")
    program = parse(text, "graph", file="qdq.graph")
    x = np.random.default_rng(4).integers(0, 256, (1, 2, 5, 6)).astype(np.uint8)
    (got,) = build(program, backends=["fused"])(x=x)
    (want,) = evaluate(program.functions[0], {"x": x})
    assert np.abs(np.asarray(got).astype(np.int32) - want.astype(np.int32)).max() <= 1
