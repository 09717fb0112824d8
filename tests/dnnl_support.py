"""What the dnnl tests share: how close a oneDNN result must be to the reference, DSL
constants for the weights that `_const` patterns pack at init, graphs of the patterns
(layer normalization, a linear layer, attention), and copies of the spec with its
support C edited."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from byoc.spec import SHIPPED_BACKENDS

RTOL = ATOL = 1e-4
"""float32 sums of up to a few hundred terms, in oneDNN's order (or through Winograd's
transforms): relative to each element, and (for the elements where a sum cancels) to
the largest one."""


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * scale)


def const(rng: np.random.Generator, shape: tuple[int, ...], low: float, high: float) -> str:
    """A DSL constant of ``shape`` with seeded values in [low, high)."""
    values = ", ".join(repr(float(v)) for v in rng.uniform(low, high, shape).astype(np.float32).ravel())
    return f"const float32[{', '.join(map(str, shape))}] [{values}]"


def dnnl_copy(directory: Path, name: str, edit: Callable[[str], str] = lambda text: text) -> Path:
    """A copy of the shipped dnnl spec as backend ``name``, in its own folder under
    ``directory`` (its support files renamed ``<name>_support.*``, as the spec format
    requires), ``edit`` applied to the text of its support source; returns
    ``directory``, the search path that finds it."""
    shipped = SHIPPED_BACKENDS / "dnnl"
    folder = directory / name
    folder.mkdir(parents=True)
    spec = (shipped / "dnnl.yaml").read_text().replace("dnnl_support.", f"{name}_support.")
    assert "\nname: dnnl\n" in spec
    (folder / f"{name}.yaml").write_text(spec.replace("\nname: dnnl\n", f"\nname: {name}\n"))
    (folder / f"{name}_support.h").write_text((shipped / "dnnl_support.h").read_text())
    source = (shipped / "dnnl_support.c").read_text()
    assert '#include "dnnl_support.h"\n' in source
    source = source.replace('#include "dnnl_support.h"\n', f'#include "{name}_support.h"\n')
    (folder / f"{name}_support.c").write_text(edit(source))
    for other in shipped.iterdir():  # the probe's C, the README: copied as they are
        if not other.name.startswith(("dnnl.", "dnnl_support.")):
            (folder / other.name).write_bytes(other.read_bytes())
    return directory


def support_source(spec) -> str:
    """The C of ``spec``'s support files as one translation unit's text (its header, then
    its sources), for a test entry point appended to it that calls their static helpers."""
    return "".join(f"{f.text}\n" for f in spec.support if not f.is_header)


def without_support(spec):
    """``spec`` with no support files to link: for a test that compiles them itself
    (:func:`support_source`), which would otherwise define them twice."""
    return replace(spec, support=())


def int8_refusal() -> str | None:
    """Why the dnnl backend takes no int8 on this machine, or None: its probe finds
    that oneDNN's int8 sums are not exact here (no VNNI: pairs of products saturate
    in int16), or its library is missing (then the tests skip for that anyway)."""
    from byoc.api import load_backend
    from byoc.runtime.probe import machine_computes

    spec = load_backend("dnnl")
    if spec.missing_library() or machine_computes(spec, "int8"):
        return None
    assert spec.probe is not None
    return f"dnnl takes no int8 on this machine: {spec.probe.doc}"


def layer_norm_graph(scale: int = 8) -> str:
    """LayerNormalization over the last axis as byoc imports it (the pattern layer_norm);
    a scale and shift of ``scale`` values (8, or 1: broadcast)."""
    return f"""\
graph main(x: float32[2, 3, 8], g: float32[{scale}], b: float32[{scale}]) {{
  e = const float32[] [0.00001]
  m = mean(x, axes=[2], keepdims=true)
  c = subtract(x, m)
  v = mean(multiply(c, c), axes=[2], keepdims=true)
  return add(multiply(multiply(c, rsqrt(add(v, e))), g), b)
}}
"""


def rms_norm_graph(
    scale: int = 8, shape: tuple[int, int, int] = (2, 3, 8), power: str = "2.0", axis: int = 2
) -> str:
    """RMSNorm over the last axis (``axis`` 2 or -1) as Llama writes it (the pattern
    rms_norm): a constant exponent ``power``, and a scale of ``scale`` values (the last
    extent, or 1: broadcast)."""
    dims = ", ".join(map(str, shape))
    return f"""\
graph main(x: float32[{dims}], g: float32[{scale}]) {{
  p = const float32[] [{power}]
  e = const float32[] [0.000001]
  v = mean(power(x, p), axes=[{axis}], keepdims=true)
  return multiply(divide(x, sqrt(add(v, e))), g)
}}
"""


def weights(k: int) -> str:
    """The values of a k x 2 weight matrix, as the DSL writes them: -0.5 to 1.0 in steps of 0.25."""
    return ", ".join(str(round(0.25 * (j % 7) - 0.5, 3)) for j in range(k * 2))


def linear(k: int = 5, bias: int = 2, dtype: str = "float32") -> str:
    """A linear layer: matmul by constant weights (k x 2), plus a bias of ``bias`` values."""
    return f"""\
graph main(x: {dtype}[2, 3, {k}], b: {dtype}[{bias}]) {{
  w = const {dtype}[{k}, 2] [{weights(k)}]
  return add(matmul(x, w), b)
}}
"""


def linear_gelu(op: str, k: int = 5, bias: int = 2) -> str:
    """:func:`linear` and its gelu: ``op`` is ``gelu`` or ``gelu_tanh``."""
    return linear(k, bias).replace("return add(matmul(x, w), b)", f"return {op}(add(matmul(x, w), b))")


def gate(k: int = 5, shape: str = "2, 3", dtype: str = "float32") -> str:
    """:func:`linear`'s weights, and the swish of the product: a SwiGLU gate."""
    return f"""\
graph main(x: {dtype}[{shape}, {k}]) {{
  w = const {dtype}[{k}, 2] [{weights(k)}]
  m = matmul(x, w)
  return multiply(m, sigmoid(m))
}}
"""


def swiglu(k: int = 5, shape: str = "2, 3", gate_first: bool = True, gate_shape: str | None = None) -> str:
    """A SwiGLU's product: :func:`gate`'s swish times a second matmul by constant
    weights (the up projection), ``multiply(s, up)`` or, without ``gate_first``,
    ``multiply(up, s)``. With ``gate_shape`` the first factor is a parameter of that
    shape instead of the swish (one that broadcasts, say)."""
    up = "matmul(x, u)"
    factor = "g" if gate_shape else "s"
    product = f"multiply({factor}, {up})" if gate_first else f"multiply({up}, {factor})"
    params = f"x: float32[{shape}, {k}]" + (f", g: float32[{gate_shape}]" if gate_shape else "")
    return f"""\
graph main({params}) {{
  w = const float32[{k}, 2] [{weights(k)}]
  u = const float32[{k}, 2] [{", ".join(reversed(weights(k).split(", ")))}]
  m = matmul(x, w)
  s = multiply(m, sigmoid(m))
  return {product}, s
}}
"""


def dims(shape: tuple[int, ...]) -> str:
    """A shape's extents as the DSL writes them inside its brackets."""
    return ", ".join(map(str, shape))


def causal(sq: int, sk: int) -> str:
    """GPT-2's causal mask as its ONNX graph folds it: 0 on and below the diagonal, -inf above."""
    rows = ([0.0 if j <= i else "-inf" for j in range(sk)] for i in range(sq))
    return f"const float32[{sq}, {sk}] [{', '.join(str(x) for row in rows for x in row)}]"


def attention(
    q: tuple[int, ...],
    k: tuple[int, ...],
    v: tuple[int, ...],
    bias: tuple[int, ...] | str | None = None,
    *,
    transposed: bool = True,
    scale: str = "divide",
    c: tuple[int, ...] | None = (),
    axis: int = -1,
    dtype: str = "float32",
) -> str:
    """Scaled dot-product attention (the attention patterns), as GPT-2's graph writes it: k of ``k``'s shape transposed by the chain
    (``transposed``) or given as kt; the scores divided by c = sqrt(d) or multiplied by
    c = 1/sqrt(d) (``scale``), a constant of shape ``c`` (None: a parameter c of shape
    [] that each call gives); plus a bias parameter of shape ``bias``, GPT-2's causal
    mask (``"causal"``, a constant [Sq, Sk]) or none; softmax along ``axis``."""
    d = q[-1]
    params = [f"q: {dtype}[{dims(q)}]", f"k: {dtype}[{dims(k)}]", f"v: {dtype}[{dims(v)}]"]
    body = []
    if c is None:
        params.append(f"c: {dtype}[]")
    else:
        value = math.sqrt(d) if scale == "divide" else 1 / math.sqrt(d)
        body.append(f"  c = const {dtype}[{dims(c)}] [{', '.join([repr(value)] * math.prod(c))}]")
    kt = "transpose(k, perm=[0, 1, 3, 2])" if transposed else "k"
    body.append(f"  scaled = {scale}(matmul(q, {kt}), c)")
    if bias == "causal":
        body.append(f"  bias = {causal(q[-2], k[-2] if transposed else k[-1])}")
        body.append("  s = add(scaled, bias)")
    elif bias is not None:
        params.append(f"bias: {dtype}[{dims(bias)}]")
        body.append("  s = add(scaled, bias)")
    scores = "scaled" if bias is None else "s"
    body.append(f"  return matmul(softmax({scores}, axis={axis}), v)")
    return f"graph main({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n"


def pattern_of(transposed: bool, scale: str, bias: bool) -> str:
    """The name of the attention pattern that takes the chain :func:`attention` writes so."""
    kt = "" if transposed else "_kt"
    return f"attention{kt}_{'div' if scale == 'divide' else 'mul'}{'_bias' if bias else ''}"


def attention_family() -> list[str]:
    """One small chain per attention pattern: k transposed by the chain or given as kt,
    the scores divided or multiplied, GPT-2's causal mask or no bias."""
    return [
        attention(
            (1, 2, 5, 4),
            (1, 2, 7, 4) if t else (1, 2, 4, 7),
            (1, 2, 7, 3),
            "causal" if b else None,
            transposed=t,
            scale=s,
        )
        for t in (True, False)
        for s in ("divide", "multiply")
        for b in (True, False)
    ]
