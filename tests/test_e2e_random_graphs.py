"""Random graphs and edge cases (unused values, empty tensors, mixed backends) checked against numpy."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from e2e_support import BACKENDS, assert_run_ok
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import byoc.runtime
from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build
from byoc.ir import DTYPES, UNSIGNED_DTYPES, is_integer

# ------------------------------------------------------------------ random graphs


CATALOG = load_catalog()


class Caps:
    """What one backend runs: dtypes, ranks and ops, whether its regions may hold
    constants, how many results a region may return, and its opt_level for tests."""

    def __init__(self, dtypes, ranks, ops, *, constants=True, outputs=3, opt=None, spec=None):
        self.dtypes, self.ranks, self.ops = dtypes, ranks, ops
        self.constants, self.outputs, self.opt = constants, outputs, opt
        self.spec = spec

    def ops_at(self, dtype: str) -> tuple[str, ...]:
        """The ops it runs at ``dtype``: the catalog's op takes it, and so do the spec's
        macros (ccompiler's arithmetic takes no bool or half type)."""
        return tuple(o for o in self.ops if dtype in CATALOG[o].dtypes and self.spec.supports(o, dtype))


ALL_DTYPES = DTYPES
"""Every dtype; a graph takes the ops the catalog gives its dtype (bool: copy)."""
BOUNDED = ("add", "subtract", "multiply", "maximum", "minimum", "negative", "relu", "copy")
"""The ops these graphs are drawn from, deliberately: binary_op below works out each
one's bound on |value| (a sum, a product), so integer results never overflow and
compare bit for bit. Which of them a backend gets is what its spec maps."""
UNARY = tuple(op for op in BOUNDED if CATALOG[op].max_inputs == 1)


def caps_of(name: str, opt: str | None = None) -> Caps:
    """A backend's Caps from its spec: its dtypes, ranks 1-4, the BOUNDED ops it maps,
    and what its kind allows (constants in a region, results per region)."""
    spec = load_backend(name)
    return Caps(
        tuple(spec.dtypes),
        tuple(r for r in (1, 2, 3, 4) if r in spec.ranks),
        tuple(op for op in BOUNDED if op in spec.ops),
        constants=spec.kind.constants,
        outputs=spec.kind.max_outputs or 3,
        opt=opt,
        spec=spec,
    )


CAPS = {
    "ccompiler": caps_of("ccompiler"),
    "json": caps_of("json"),
    "examplejson": caps_of("examplejson"),
    "engine": caps_of("engine", opt="0"),  # -O0: a C++ compile per example
}
# How many random graphs each test runs (one C or C++ compile per new graph).
RANDOM_EXAMPLES = {"ccompiler": 60, "json": 80, "examplejson": 40, "engine": 8, "ccompiler+json": 25}
LIMIT = 2**20  # bound on every value's magnitude, so that integers never overflow
HOST_OPS = ("add", "subtract", "maximum", "negative")
"""Host ops between regions; deliberately these, whose bound is the sum of their inputs'."""


@st.composite
def random_graphs(draw, backends: tuple[str, ...]):
    """(DSL text, inputs) of a random graph with one to three regions, each on one of
    ``backends``: one dtype and shape throughout (the C macros do not broadcast),
    DAGs inside the regions, optional constants and host ops between and after them,
    several region results where the backend allows them."""
    dtype = draw(
        st.sampled_from(
            [d for d in ALL_DTYPES if all(d in CAPS[b].dtypes and CAPS[b].ops_at(d) for b in backends)]
        )
    )
    rank = draw(st.sampled_from([r for r in range(1, 5) if all(r in CAPS[b].ranks for b in backends)]))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
    type_text = f"{dtype}[{', '.join(map(str, shape))}]"
    size = int(np.prod(shape))
    params = [f"p{k}" for k in range(draw(st.integers(1, 3)))]
    outer = {p: 9 for p in params}  # name -> bound on |value|
    regions: list[str] = []
    counter = iter(range(1000))
    lines = []

    def binary_op(ops, a_bound, b_bound):
        op = draw(st.sampled_from([o for o in ops if o not in UNARY and dtype in CATALOG[o].dtypes]))
        if op == "multiply" and a_bound * b_bound > LIMIT:
            op = "subtract"
        return op, (a_bound * b_bound if op == "multiply" else a_bound + b_bound)

    for _ in range(draw(st.integers(1, 3))):
        backend = draw(st.sampled_from(backends))
        caps = CAPS[backend]
        scope = dict(outer)
        body = []
        if caps.constants and draw(st.booleans()):
            name = f"k{next(counter)}"
            values = draw(
                st.lists(st.integers(0 if dtype in UNSIGNED_DTYPES else -6, 6), min_size=size, max_size=size)
            )
            texts = [f"{v / 2}" for v in values] if not is_integer(dtype) else map(str, values)
            if dtype == "bool":
                texts = ["true" if v % 2 else "false" for v in values]
            body.append(f"{name} = const {type_text} [{', '.join(texts)}]")
            scope[name] = 6
        defined = []
        unary = [o for o in caps.ops_at(dtype) if o in UNARY]
        binary = [o for o in caps.ops_at(dtype) if o not in UNARY]
        for _ in range(draw(st.integers(1, 5))):
            names = sorted(scope)
            a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
            name = f"t{next(counter)}"
            if unary and (not binary or draw(st.integers(0, 3)) == 0):
                body.append(f"{name} = {draw(st.sampled_from(unary))}({a})")
                scope[name] = scope[a]
            else:
                op, scope[name] = binary_op(binary, scope[a], scope[b])
                body.append(f"{name} = {op}({a}, {b})")
            defined.append(name)
        # results: the last value, then (where allowed) any values of the region
        results = [defined[-1]]
        if caps.outputs > 1:
            candidates = defined + [n for n in scope if n.startswith("k")]
            results += draw(st.lists(st.sampled_from(candidates), max_size=caps.outputs - 1))
        targets = [f"r{next(counter)}" for _ in results]
        regions += targets
        lines.append(f"  {', '.join(targets)} = @{backend} {{")
        lines += [f"    {line}" for line in body]
        lines.append(f"    return {', '.join(results)}")
        lines.append("  }")
        for target, result in zip(targets, results):
            outer[target] = scope[result]
        host = [o for o in HOST_OPS if dtype in CATALOG[o].dtypes]
        if host and draw(st.booleans()):  # a host op between or after regions
            a, b = draw(st.sampled_from(sorted(outer))), draw(st.sampled_from(sorted(outer)))
            op = draw(st.sampled_from(host))
            name = f"h{next(counter)}"
            if op == "negative":
                lines.append(f"  {name} = negative({a})")
                outer[name] = outer[a]
            else:
                lines.append(f"  {name} = {op}({a}, {b})")
                outer[name] = outer[a] + outer[b]
    returned = draw(st.lists(st.sampled_from(sorted(outer)), min_size=1, max_size=3))
    if not set(returned) & set(regions):
        returned.insert(0, regions[-1])
    head = ", ".join(f"{p}: {type_text}" for p in params)
    text = f"graph main({head}) {{\n" + "\n".join(lines) + f"\n  return {', '.join(returned)}\n}}\n"

    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype == "bool":
        inputs = {p: rng.integers(0, 2, size=shape).astype(bool) for p in params}
    elif is_integer(dtype):
        inputs = {p: rng.integers(-9, 10, size=shape).astype(dtype) for p in params}
    else:
        inputs = {p: rng.uniform(-9, 9, size=shape).astype(dtype) for p in params}
    return text, inputs


def _check_random_graph(text: str, inputs: dict[str, np.ndarray], bundle_dir: Path) -> None:
    program = parse(text, "graph")
    options = {"engine.opt_level": CAPS["engine"].opt} if "@engine" in text else None
    model = build(program, options=options)
    want = evaluate(program.functions[0], inputs)
    got = model(**inputs)
    bundle = bundle_dir / "random.byoc"
    model.save(bundle)
    again = byoc.runtime.load(bundle)(**inputs)
    assert len(got) == len(want) == len(again)
    for g, w, a in zip(got, want, again):
        assert g.dtype == w.dtype and g.shape == w.shape, text
        np.testing.assert_array_equal(g, a)
        if g.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=text)
        else:  # float16 and bfloat16 too: these ops are rounded once from float32, exactly
            rtol = 1e-6 if g.dtype == np.float32 else 1e-14
            g, w = g.astype(np.float64), w.astype(np.float64)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6, err_msg=text)


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("random-bundles")


def _random_graph_test(key: str):
    @settings(
        max_examples=RANDOM_EXAMPLES[key],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(case=random_graphs(tuple(key.split("+"))))
    def test(case, bundle_dir):
        text, inputs = case
        _check_random_graph(text, inputs, bundle_dir)

    test.__name__ = test.__qualname__ = f"test_random_graphs_{key.replace('+', '_')}"
    return test


test_random_graphs_ccompiler = _random_graph_test("ccompiler")
test_random_graphs_json = _random_graph_test("json")
test_random_graphs_examplejson = _random_graph_test("examplejson")
test_random_graphs_engine = _random_graph_test("engine")
test_random_graphs_ccompiler_json = _random_graph_test("ccompiler+json")


def test_random_graph_examples_total():
    assert sum(RANDOM_EXAMPLES.values()) >= 100


@pytest.mark.parametrize("backend", ["ccompiler", "engine", "json"])
def test_unused_values_in_a_region(backend, tmp_path):
    """A constant and a node that nothing uses (found by the random graphs: an
    unused constant was an unused static C array, which -Werror refused)."""
    graph = tmp_path / "unused.graph"
    graph.write_text(
        f"graph main(x: float32[2, 2]) {{\n  s = @{backend} {{\n"
        "    k = const float32[2, 2] [1, 2, 3, 4]\n    t = multiply(x, x)\n    return add(x, x)\n  }\n"
        "  return s\n}\n"
    )
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    (s,) = build(graph, options={"engine.opt_level": "0"} if backend == "engine" else None)(x=x)
    np.testing.assert_array_equal(s, x + x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_tensors(backend, tmp_path):
    graph = tmp_path / "empty.graph"
    graph.write_text(
        f"graph main(x: float32[0, 3], y: float32[0, 3]) {{\n"
        f"  s = @{backend} {{ return multiply(add(x, y), y) }}\n  return s, concatenate(s, x, axis=1)\n}}\n"
    )
    x = y = np.empty((0, 3), np.float32)
    s, c = build(graph, options={"engine.opt_level": "0"} if backend == "engine" else None)(x=x, y=y)
    assert s.shape == (0, 3) and c.shape == (0, 6) and s.dtype == c.dtype == np.float32


def test_mixed_backends_in_one_graph(capsys, tmp_path):
    graph = tmp_path / "mixed.graph"
    graph.write_text(
        textwrap.dedent(
            """\
            graph main(x: float32[4, 3], y: float32[4, 3]) {
              a = @ccompiler { return add(x, y) }
              b = @json { return relu(subtract(a, y)) }
              c = @engine { return multiply(a, b) }
              d = @examplejson { return subtract(c, x) }
              return concatenate(a, b, c, d, axis=1)
            }
            """
        )
    )
    rc, out, err = run_cli(capsys, "run", graph)
    assert_run_ok(rc, out, err)
    model = build(graph)
    assert sorted(m.backend for m in model.manifest.modules) == sorted(BACKENDS)
    rng = np.random.default_rng(0)
    x, y = (rng.uniform(-2, 2, (4, 3)).astype(np.float32) for _ in range(2))
    a = x + y
    b = np.maximum(a - y, 0)
    c = a * b
    (got,) = model(x=x, y=y)
    np.testing.assert_allclose(got, np.concatenate((a, b, c, c - x), axis=1), rtol=1e-6)
