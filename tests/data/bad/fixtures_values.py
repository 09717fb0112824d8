"""Fixtures of cases_values.yaml: constant values out of range or of the wrong kind
(byoc issue 31: NaN and infinities, empty tensors, the float types' largest values), a
``${name}`` in a c_source macro's body, and paths too long for the file system or not
valid UTF-8.

Each graph fixture writes ``c.graph``, a graph whose second line is one constant (or
statement): the cases locate their errors on that line. The spec fixtures write
``mini.yaml``, a small c_source spec whose macro body holds a placeholder on line 18.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mini_spec import C_SOURCE

FIXTURES: dict[str, Callable[[Path], None]] = {}

PLAIN_GRAPH = "graph main(x: float32[4], y: float32[4]) {\n  s = @ccompiler {\n    return add(x, y)\n  }\n  return s\n}\n"

MINI_SPEC = C_SOURCE.replace("out[i] = a[i]", "out[i] = BODY a[i]")
"""tests/mini_spec.py's spec, its macro body (line 18) ready for a placeholder."""


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


def _graph_fixture(name: str, line: str) -> None:
    """A fixture ``name`` writing c.graph with ``line`` as its second line."""

    def make(d: Path) -> None:
        (d / "c.graph").write_text(f"graph main(x: float32[4]) {{\n  {line}\n  return x\n}}\n")

    make.__name__ = name
    FIXTURES[name] = make


def _spec_fixture(name: str, placeholder: str) -> None:
    """A fixture ``name`` writing mini.yaml with ``${placeholder} +`` in its macro body."""

    def make(d: Path) -> None:
        (d / "mini.yaml").write_text(MINI_SPEC.replace("BODY", f"${{{placeholder}}} +"))

    make.__name__ = name
    FIXTURES[name] = make


for _name, _line in {
    "values_empty_float32_1e39": "k = const float32[0] 1e39",
    "values_empty_int8_300": "k = const int8[2, 0] 300",
    "values_empty_uint8_negative": "k = const uint8[0] -1",
    "values_empty_bool_number": "k = const bool[0] 1",
    "values_empty_int32_nan": "k = const int32[0] nan",
    "values_float32_3_5e38": "k = const float32[2] [1, 3.5e38]",
    "values_float32_above_max": "k = const float32[1] [-3.4028236e+38]",
    "values_float16_1e5": "k = const float16[2] [inf, 1e5]",
    "values_bfloat16_3_4e38": "k = const bfloat16[1] 3.4e38",
    "values_float64_1e400": "k = const float64[2] [inf, 1e400]",
    "values_int32_nan": "k = const int32[2] [1, nan]",
    "values_uint8_minus_inf": "k = const uint8[2] [-inf, 1]",
    "values_int64_plus_inf": "k = const int64[1] +inf",
    "values_bool_nan": "k = const bool[1] [nan]",
    "values_nan_capitalised": "k = const float32[1] [NaN]",
    "values_minus_infinity_word": "k = const float32[1] [-infinity]",
    "values_nan_attribute": "y = leaky_relu(x, alpha=nan)",
}.items():
    _graph_fixture(_name, _line)

for _name, _placeholder in {
    "values_spec_body_option": "opt_level",
    "values_spec_body_backend": "backend",
    "values_spec_body_symbol": "symbol",
    "values_spec_body_input_dim": "in0_dim0",
    "values_spec_body_unknown": "x",
}.items():
    _spec_fixture(_name, _placeholder)


@fixture
def values_plain_graph(d: Path) -> None:
    """A valid graph with a ccompiler region, for the path cases."""
    (d / "g.graph").write_text(PLAIN_GRAPH)


@fixture
def values_non_utf8_graph(d: Path) -> None:
    """The valid graph under a name that is not UTF-8: g<0xff>.graph."""
    (d / "g.graph").write_text(PLAIN_GRAPH)
    with open(bytes(d) + b"/g\xff.graph", "w") as handle:
        handle.write(PLAIN_GRAPH)
