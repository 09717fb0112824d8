"""Shared helpers of the JSON runtime module tests (test_runtime_json*.py)."""

from __future__ import annotations

from conftest import DATA

from byoc.api import load_backend, load_catalog, parse
from byoc.generator import generator_for
from byoc.generator.lowering import lower

GEN = DATA / "gen"


def json_module_text(program, backend: str = "json", spec_path=None):
    """The json codegen's module text for ``program``, and its external functions."""
    catalog = load_catalog()
    externals = lower(program, lambda name: load_backend(name, spec_path), catalog).externals
    spec = load_backend(backend, spec_path)
    (artifact,) = generator_for(spec.kind)(externals, spec, catalog, spec.option_values({}))
    return artifact.text, externals


def gen_program(name: str):
    text = (GEN / f"{name}.graph").read_text().replace("@BACKEND", "@json")
    return parse(text, "graph", file=f"{name}.graph")


CONCAT_GRAPH = """
graph main(a: float32[2, 3], b: float32[2, 3], i: int32[4], j: int32[4]) {
  c, d, e = @json {
    k = const float32[2, 1] [1.5, -2]
    return concatenate(relu(a), negative(b), axis=1), concatenate(a, k, b, axis=-1), relu(maximum(i, j))
  }
  return c, d, e
}
"""
