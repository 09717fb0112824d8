"""What the dnnl tests share: how close a oneDNN result must be to the reference, DSL
constants for the weights that `_const` patterns pack at init, and copies of the spec
with its support C edited."""

from __future__ import annotations

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


def linear(k: int = 5, bias: int = 2, dtype: str = "float32") -> str:
    """A linear layer: matmul by constant weights (k x 2), plus a bias of ``bias`` values."""
    values = ", ".join(str(round(0.25 * (j % 7) - 0.5, 3)) for j in range(k * 2))
    return f"""\
graph main(x: {dtype}[2, 3, {k}], b: {dtype}[{bias}]) {{
  w = const {dtype}[{k}, 2] [{values}]
  return add(matmul(x, w), b)
}}
"""
