"""What every module of catalog cases (tests/catalog_cases_*.py) builds on: :class:`OpCase`,
the DSL text of a case's graph, random arrays and broadcasting shapes, and the per-element
computation of an expected result in Python numbers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from byoc.ir import is_float, is_integer

Attr = int | float | bool | str | tuple[int, ...]


@dataclass
class OpCase:
    inputs: list[np.ndarray]
    attrs: dict[str, Attr] = field(default_factory=dict)
    expected: np.ndarray | tuple[np.ndarray, ...] | None = None
    """None: the op must reject the case (``error`` is a fragment of the message); a tuple
    for an op of several outputs, one array per output."""
    error: str = ""
    out_dtype: str | tuple[str, ...] | None = None
    """The outputs' dtype when it is not the drawn one (a comparison's bool, a cast's
    ``to``), or one per output when they differ (top_k's values and int64 indices)."""

    @property
    def outputs(self) -> tuple[np.ndarray, ...]:
        """The expected outputs, one or several."""
        return self.expected if isinstance(self.expected, tuple) else (self.expected,)

    def targets(self) -> str:
        """The names the case's node binds: ``r``, or ``r0, r1, ...`` for several outputs."""
        if not isinstance(self.expected, tuple):
            return "r"
        return ", ".join(f"r{k}" for k in range(len(self.expected)))


def attr_text(value: Attr) -> str:
    """An attribute value as the graph DSL writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def call_text(op: str, case: OpCase, first: str = "p0") -> str:
    """``op(p0, p1, ..., key=value, ...)``; ``first`` names the first input."""
    names = [first] + [f"p{i}" for i in range(1, len(case.inputs))]
    args = names[: len(case.inputs)] + [f"{k}={attr_text(v)}" for k, v in case.attrs.items()]
    return f"{op}({', '.join(args)})"


def graph_text(op: str, case: OpCase, body: list[str] | None = None) -> str:
    """One graph computing ``op`` on parameters p0, p1, ... of the inputs' types; ``body``
    replaces the statement that binds the case's targets."""
    params = ", ".join(f"p{i}: {a.dtype}[{', '.join(map(str, a.shape))}]" for i, a in enumerate(case.inputs))
    lines = body if body is not None else [f"{case.targets()} = {call_text(op, case)}"]
    statements = "".join(f"  {line}\n" for line in lines)
    return f"graph main({params}) {{\n{statements}  return {case.targets()}\n}}\n"


# ------------------------------------------------------------------------------ arrays


def draw_rng(draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def shapes(min_rank=0, max_rank=3, min_side=1, max_side=4):
    return st.lists(st.integers(min_side, max_side), min_size=min_rank, max_size=max_rank).map(tuple)


def array(rng: np.random.Generator, shape, dtype: str, low=-3.0, high=3.0) -> np.ndarray:
    """Random data of ``dtype``: floats uniform in [low, high) rounded to the dtype,
    integers in [low - 2, high + 2] (negative ones wrap for an unsigned dtype, as numpy's
    astype does), bools half true."""
    if dtype == "bool":
        return rng.random(size=shape) < 0.5
    if is_integer(dtype):
        return rng.integers(int(low) - 2, int(high) + 3, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def wrapped(values, dtype: str, shape=None) -> np.ndarray:
    """Python integers reduced modulo 2**bits into ``dtype`` (two's complement for a
    signed one): what C's and numpy's fixed-width integer arithmetic gives."""
    info = np.iinfo(dtype)
    bits, low = info.bits, int(info.min)
    flat = [(int(v) - low) % 2**bits + low for v in np.ravel(np.asarray(values, dtype=object))]
    out = np.array(flat, dtype=object).astype(dtype)
    return out.reshape(np.shape(values) if shape is None else shape)


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast (numpy's rule), in either order."""
    a = draw(shapes())
    keep = draw(st.integers(0, len(a)))
    b = tuple(1 if draw(st.booleans()) else d for d in a[len(a) - keep :])
    return (a, b) if draw(st.booleans()) else (b, a)


@st.composite
def broadcast_triple(draw):
    """Three shapes that broadcast together: a shape and two broadcast partners of it."""
    a, b = draw(broadcast_pair())
    c, _ = draw(broadcast_pair())
    return draw(st.permutations([a, b, c if _broadcasts(a, b, c) else a]))


def _broadcasts(*shapes) -> bool:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------ elementwise results


def with_special(rng: np.random.Generator, x: np.ndarray, values) -> np.ndarray:
    """``x`` with about a quarter of its elements replaced by ``values`` (NaN, inf, ...)."""
    x = np.array(x)
    if x.size and is_float(str(x.dtype)):
        mask = rng.random(x.shape) < 0.25
        with np.errstate(over="ignore", invalid="ignore"):
            picks = np.array(values, np.float64)[rng.integers(0, len(values), size=x.shape)].astype(x.dtype)
        x[mask] = picks[mask]
    return x


def python_scalar(v):
    """One element as a Python bool, int or float."""
    return v.item() if v.dtype.kind in "biu" else float(v)


def elementwise_expected(fn, arrays, out_dtype) -> np.ndarray:
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    flat = zip(*(np.broadcast_to(a, shape).ravel() for a in arrays))
    values = [fn(*map(python_scalar, items)) for items in flat]
    if is_integer(out_dtype):
        return wrapped(values, out_dtype, shape)
    return np.array(values, dtype=np.float64 if is_float(out_dtype) else out_dtype).reshape(shape)
