"""Fixtures of cases_options.yaml: option values that must never change the structure
of the generated code (byoc issue 31; spec/option_types.py, spec/option_uses.py).

``option_graph`` is a plain graph that the cases offload with ``--backend``;
``option_typed_spec`` adds ``specs/typed.yaml``, the shipped ccompiler spec renamed,
with a float and a str option written into its prelude (no shipped spec has either);
``option_str_in_literal_spec`` writes a str option inside a C string literal, which the
spec loader refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import byoc.spec

FIXTURES: dict[str, Callable[[Path], None]] = {}

CCOMPILER = Path(byoc.spec.__file__).parent / "backends" / "ccompiler.yaml"
PLAIN_GRAPH = "graph main(x: float32[2, 3], y: float32[2, 3]) {\n  return add(x, y)\n}\n"


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


def _spec(name: str, options: str, prelude: str) -> str:
    """The ccompiler spec renamed ``name``, with more options and prelude lines."""
    text = CCOMPILER.read_text().replace("name: ccompiler ", f"name: {name} ")
    text = text.replace("symbol_prefix: ccompiler", f"symbol_prefix: {name}")
    text = text.replace("\noptions:\n", "\noptions:\n" + options, 1)
    return text.replace("prelude: |\n", "prelude: |\n" + prelude, 1)


@fixture
def option_graph(d: Path) -> None:
    (d / "g.graph").write_text(PLAIN_GRAPH)


@fixture
def option_typed_spec(d: Path) -> None:
    (d / "g.graph").write_text(PLAIN_GRAPH)
    (d / "specs").mkdir()
    options = "  scale:\n    type: float\n    default: 0.5\n  note:\n    type: str\n    default: hi\n"
    prelude = "  double typed_scale(void) { return ${scale}; }\n  const char *typed_note(void) { return ${note}; }\n"
    (d / "specs" / "typed.yaml").write_text(_spec("typed", options, prelude))


@fixture
def option_str_in_literal_spec(d: Path) -> None:
    (d / "g.graph").write_text(PLAIN_GRAPH)
    (d / "specs").mkdir()
    options = "  note:\n    type: str\n    default: hi\n"
    prelude = '  const char *quoted_note(void) { return "note: ${note}"; }\n'
    (d / "specs" / "quoted.yaml").write_text(_spec("quoted", options, prelude))
