"""Shared helpers and fixtures of the partitioning tests (test_partition*.py,
test_build_options.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
from conftest import EXAMPLES
from ruamel.yaml import YAML

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build
from byoc.generator.lowering import lower
from byoc.generator.partition import partition
from byoc.ir import ANON_PREFIX, Function, Program, is_integer
from byoc.validate import validate_program

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_SPECS = ROOT / "spec" / "backends"
PLAIN_GRAPH = EXAMPLES / "guide_plain_graph.graph"
WEIGHTS = tuple(f"w{k}" for k in range(8))
BACKENDS = ("ccompiler", "json", "examplejson", "engine")


def make_addsub_dir(tmp_path_factory) -> Path:
    """A spec directory with backend ``addsub``: ccompiler with only add and subtract."""
    out = tmp_path_factory.mktemp("addsub-specs")
    yaml = YAML()
    doc = yaml.load(SHIPPED_SPECS / "ccompiler.yaml")
    doc["name"] = "addsub"
    doc["symbol_prefix"] = "addsub"
    for op in [op for op in doc["ops"] if op not in ("add", "subtract")]:
        del doc["ops"][op]
    with open(out / "addsub.yaml", "w") as f:
        yaml.dump(doc, f)
    assert sorted(load_backend("addsub", spec_path=[out]).ops) == ["add", "subtract"]
    return out


# ------------------------------------------------------------------ graphs shared by several test modules

CYCLE = """\
graph main(x: float32[4, 3], y: float32[4, 3]) {
  a = add(x, y)
  b = abs(a)
  c = add(a, b)
  return c
}
"""


BIG_CYCLE = """\
graph main(x: float32[3, 2], y: float32[3, 2], z: float32[3, 2]) {
  a = add(x, y)
  b = subtract(a, z)
  h1 = abs(b)
  c = multiply(a, y)
  h2 = negative(c)
  d = add(h1, h2)
  e = subtract(d, b)
  f = multiply(e, c)
  g = add(f, a)
  h3 = maximum(g, z)
  k = add(h3, f)
  return k, g
}
"""


CONSTANTS = """\
graph main(x: float32[4]) {
  k = const float32[4] [1, 2, 3, 4]
  j = const float32[4] [5, 6, 7, 8]
  a = add(x, k)
  b = multiply(a, j)
  c = abs(j)
  return b, c
}
"""


EXPLICIT = """\
graph main(x: float32[4], y: float32[4]) {
  a = @json { return add(x, y) }
  b = add(a, y)
  c = abs(b)
  d = @json as mine { return subtract(c, x) }
  e = multiply(d, a)
  return e
}
"""


BROADCAST = """\
graph main(x: float32[4, 10], bias: float32[10]) {
  y = add(x, bias)
  z = multiply(y, x)
  return z
}
"""


# ------------------------------------------------------------------ helpers


def specs(*names: str, spec_path=None):
    return [load_backend(name, spec_path=spec_path) for name in names]


def part(source: str | Path | Program, *backends: str, spec_path=None) -> Program:
    program = source if isinstance(source, Program) else graph(source)
    return partition(program, specs(*backends, spec_path=spec_path))


def graph(source: str | Path) -> Program:
    if isinstance(source, Path):
        return parse(source.read_text(), "graph", file=str(source))
    return parse(textwrap.dedent(source), "graph")


def region_calls(fn: Function) -> list:
    return [n for n in fn.nodes if n.callee is not None]


def summary(fn: Function) -> list[tuple[str | None, tuple[str, ...], tuple[str, ...], tuple[str, ...]]]:
    """Each unit of ``fn`` in order: (backend or None for the host, its ops, its
    inputs, its outputs); a region lists the ops of its callee."""
    out = []
    for node in fn.nodes:
        if node.callee is not None:
            ops = tuple(n.op for n in node.callee.nodes)
            out.append((node.callee.backend, ops, node.inputs, node.outputs))
        else:
            out.append((None, (node.op,), node.inputs, node.outputs))
    return out


def host_ops(fn: Function) -> list[str]:
    return [n.op for n in fn.nodes if n.callee is None]


def symbols(program: Program, spec_path=None) -> list[str]:
    lowered = lower(program, lambda name: load_backend(name, spec_path=spec_path), load_catalog())
    return [f.name for f in lowered.externals]


def random_inputs(fn: Function, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for p in fn.params:
        if is_integer(p.type.dtype):
            out[p.name] = rng.integers(-9, 10, size=p.type.shape).astype(p.type.dtype)
        else:
            out[p.name] = rng.uniform(-3, 3, size=p.type.shape).astype(p.type.dtype)
    return out


def assert_same(got, want, err_msg: str = "") -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, err_msg
        if g.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w, err_msg=err_msg)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=err_msg)


def assert_equivalent(original: Program, partitioned: Program, seed: int = 0) -> None:
    """Valid IR, regions each backend can run, and the same values as the original."""
    catalog = load_catalog()
    validate_program(partitioned, catalog)
    for fn, pfn in zip(original.functions, partitioned.functions):
        inputs = random_inputs(fn, seed)
        want = evaluate(fn, inputs, catalog)
        for g, w in zip(evaluate(pfn, inputs, catalog), want):
            np.testing.assert_array_equal(g, w)


def run_built(source, backends, inputs, **kwargs) -> tuple[np.ndarray, ...]:
    model = build(source, backends=backends, **kwargs)
    return model(**inputs)


def guide_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-3, 3, size=(10, 10)).astype(np.float32) for name in ("x", *WEIGHTS)}


def guide_expected(i: dict[str, np.ndarray]) -> np.ndarray:
    x = i["x"]
    return np.concatenate(
        (((x + i["w0"]) - i["w1"]) * i["w2"], ((x + i["w3"]) - i["w4"]) * i["w5"], (x + i["w6"]) - i["w7"]),
        axis=0,
    )


def assert_guide_runs(backends, **kwargs) -> None:
    inputs = guide_inputs()
    (out,) = run_built(PLAIN_GRAPH, backends, inputs, **kwargs)
    assert out.shape == (30, 10) and out.dtype == np.float32
    np.testing.assert_allclose(out, guide_expected(inputs), rtol=1e-6, atol=1e-6)


def placement(program: Program) -> dict[str, str]:
    """Each named value of the first graph -> the backend computing it, as ``npu`` or,
    for a composite's, ``npu.conv_relu``; ``host`` for a node no backend took.
    Anonymous values (inside a region) are left out."""
    out = {}
    for node in program.functions[0].nodes:
        if node.callee is None:
            out.update((name, "host") for name in node.outputs)
            continue
        for inner in node.callee.nodes:
            composite = inner.callee.composite if inner.callee is not None else None
            label = node.callee.backend + (f".{composite}" if composite else "")
            out.update((name, label) for name in inner.outputs)
    return {name: b for name, b in out.items() if not name.startswith(ANON_PREFIX)}
