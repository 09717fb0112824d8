"""Shared fuzzing settings and strategies (tests/test_fuzz.py, tests/sanitize_driver.py).

**Budgets.** Every fuzz target has a CI budget of examples (``CI_EXAMPLES``), kept so
that the whole fuzz run takes well under a minute. ``BYOC_FUZZ_EXAMPLES=N`` is the
long mode: each cheap target (parsers, spec loader, bundle loader) runs ``N``
examples and each target that compiles C (differential) runs ``N // 20`` (never fewer
than its CI budget), for example::

    BYOC_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest -q tests/test_fuzz.py tests/test_roundtrip_hypothesis.py

tests/RELIABILITY.md reports the CI budgets; tests/test_reliability_doc.py keeps it true.
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import byoc
from byoc.ir import UNSIGNED_DTYPES, is_integer
from byoc.runtime.probe import for_machine

FUZZ_ENV = "BYOC_FUZZ_EXAMPLES"
COMPILED_DIVISOR = 20

CI_EXAMPLES: dict[str, int] = {
    # tests/test_roundtrip_hypothesis.py (the parsers, from text)
    "dsl-random-text": 300,
    "examplejson-random-text": 300,
    "random-bytes": 300,
    "dsl-mutations": 300,
    "examplejson-mutations": 300,
    # tests/test_fuzz.py
    "dsl-corpus-mutations": 500,
    "examplejson-corpus-mutations": 500,
    "spec-mutations": 400,
    "catalog-mutations": 150,
    "bundle-bytes": 400,
    "bundle-manifests": 400,
    # tests/test_fuzz_onnx.py (the ONNX importer, then json generation and runs)
    "onnx-bytes": 150,
    "onnx-structure": 150,
}
"""CI examples per fuzz target (per run of the suite)."""

DIFFERENTIAL_EXAMPLES: dict[str, int] = {
    "ccompiler": 30,
    "engine": 6,
    "examplejson": 40,
    "json": 60,
    "fused": 40,
    "cblas": 20,
    "dnnl": 12,
}
"""CI examples of the differential fuzz per backend (each compiled backend pays a
compile per example); a backend without a spec (fused, before it exists) is skipped."""


def long_mode() -> int:
    """The per-target example count of the long mode, or 0 in CI mode."""
    try:
        return max(0, int(os.environ.get(FUZZ_ENV, "0")))
    except ValueError:
        return 0


def examples(ci: int, *, compiled: bool = False) -> int:
    n = long_mode()
    if not n:
        return ci
    return max(ci, n // COMPILED_DIVISOR) if compiled else max(ci, n)


def fuzz_settings(ci: int, *, compiled: bool = False) -> settings:
    """Hypothesis settings of a fuzz target with a CI budget of ``ci`` examples."""
    return settings(
        max_examples=examples(ci, compiled=compiled),
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture,
        ],
    )


# ----------------------------------------------------------- random region graphs

ELEMENTWISE = ("add", "subtract", "multiply", "maximum", "minimum", "negative", "relu", "copy")
"""The ops the differential fuzz draws from, deliberately a fixed list: region_graphs
works out each one's bound on |value|, so integer results never overflow and compare
bit for bit (divide is left out: a random divisor near zero makes float comparisons
meaningless; concatenate is covered by the partitioning and e2e tests). Caps keeps
those the backend's spec maps; tests/test_e2e_random_catalog.py draws from the whole
catalog instead."""
UNARY = ("negative", "relu", "copy")
LIMIT = 2**20
"""A bound on every value's magnitude, so int32 and int64 results never overflow. int8
and uint8 results do wrap around, in the reference as in C (each value is stored in
its own type), so they still compare bit for bit."""


CATALOG = byoc.load_catalog()


class Caps:
    """What a backend spec lets a random region hold."""

    def __init__(self, name: str) -> None:
        spec = byoc.load_backend(name)
        kind = spec.kind
        self.name = name
        self.ranks = tuple(r for r in spec.ranks if 1 <= r <= 4) or tuple(spec.ranks)
        self.ops = tuple(o for o in ELEMENTWISE if o in spec.ops)
        self.broadcast = bool(spec.broadcast)
        self.constants = bool(kind.constants)
        self.max_outputs = kind.max_outputs or 3
        self.spec = spec

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The spec's dtypes that this machine computes (dnnl's 16-bit floats only where
        oneDNN does: its probe, asked when a graph is first drawn, not at collection)."""
        return for_machine(self.spec, self.spec.dtypes).dtypes

    def supports(self, op: str, dtype: str, rank: int) -> bool:
        """Whether the spec maps ``op`` at ``dtype`` and ``rank`` and the catalog's op takes
        ``dtype`` (relu takes no uint8, whichever backend maps it)."""
        return self.spec.supports(op, dtype, rank) and dtype in CATALOG[op].dtypes


@st.composite
def region_graphs(draw, caps: Caps):
    """(DSL text, inputs) of a random graph with one or two regions on ``caps``'s backend
    and host ops around them. On a backend whose spec says ``broadcast: true`` the
    inputs of an op may have different, broadcast-compatible shapes (numpy's rule);
    otherwise one shape is used throughout."""
    usable = [d for d in caps.dtypes if any(caps.supports(o, d, r) for o in caps.ops for r in caps.ranks)]
    dtype = draw(st.sampled_from(usable))  # a dtype some mapped op takes (ccompiler: no bool add)
    rank = draw(st.sampled_from(caps.ranks))
    full = tuple(draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))

    def variant() -> tuple[int, ...]:
        if not caps.broadcast or draw(st.booleans()):
            return full
        keep = draw(st.integers(0, rank))  # numpy aligns shapes from the right
        shape = list(full[rank - keep :])
        for i in range(len(shape)):
            if draw(st.integers(0, 2)) == 0:
                shape[i] = 1
        if len(shape) not in caps.ranks:
            return full
        return tuple(shape)

    def text(shape):
        return f"{dtype}[{', '.join(map(str, shape))}]"

    params = {f"p{k}": variant() for k in range(draw(st.integers(1, 3)))}
    outer: dict[str, tuple[tuple[int, ...], int]] = {n: (s, 9) for n, s in params.items()}
    lines: list[str] = []
    counter = iter(range(10_000))
    results_all: list[str] = []
    for _ in range(draw(st.integers(1, 2))):
        scope = dict(outer)
        body: list[str] = []
        if caps.constants and draw(st.booleans()):
            shape = variant()
            size = int(np.prod(shape))
            values = draw(
                st.lists(st.integers(0 if dtype in UNSIGNED_DTYPES else -6, 6), min_size=size, max_size=size)
            )
            items = [f"{v / 2}" for v in values] if not is_integer(dtype) else [str(v) for v in values]
            if dtype == "bool":
                items = ["true" if v % 2 else "false" for v in values]
            name = f"k{next(counter)}"
            body.append(f"{name} = const {text(shape)} [{', '.join(items)}]")
            scope[name] = (shape, 6)
        defined: list[str] = []
        for _ in range(draw(st.integers(1, 5))):
            names = sorted(scope)
            a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
            (sa, ba), (sb, bb) = scope[a], scope[b]
            try:
                out = tuple(np.broadcast_shapes(sa, sb))
            except ValueError:
                out = None
            unary = [o for o in caps.ops if o in UNARY and caps.supports(o, dtype, len(sa))]
            binary = [
                o
                for o in caps.ops
                if o not in UNARY
                and out is not None
                and caps.supports(o, dtype, len(out))
                and (caps.broadcast or sa == sb)
            ]
            name = f"t{next(counter)}"
            if binary and (not unary or draw(st.integers(0, 3)) > 0):
                op = draw(st.sampled_from(binary))
                if op == "multiply" and ba * bb > LIMIT:
                    op = "subtract" if "subtract" in binary else binary[0]
                bound = (
                    ba * bb if op == "multiply" else max(ba, bb) if op in ("maximum", "minimum") else ba + bb
                )
                if bound > LIMIT:
                    continue
                body.append(f"{name} = {op}({a}, {b})")
                scope[name] = (out, bound)
            elif unary:
                body.append(f"{name} = {draw(st.sampled_from(unary))}({a})")
                scope[name] = (sa, ba)
            else:
                continue
            defined.append(name)
        if not defined:
            continue
        results = [defined[-1]]
        if caps.max_outputs > 1:
            results += draw(st.lists(st.sampled_from(defined), max_size=caps.max_outputs - 1, unique=True))
            results = list(dict.fromkeys(results))
        targets = [f"r{next(counter)}" for _ in results]
        lines.append(f"  {', '.join(targets)} = @{caps.name} {{")
        lines += [f"    {line}" for line in body]
        lines.append(f"    return {', '.join(results)}")
        lines.append("  }")
        for target, result in zip(targets, results):
            outer[target] = scope[result]
        results_all += targets
        if dtype in CATALOG["add"].dtypes and draw(
            st.booleans()
        ):  # a host op on region results and parameters
            a, b = draw(st.sampled_from(sorted(outer))), draw(st.sampled_from(sorted(outer)))
            (sa, ba), (sb, bb) = outer[a], outer[b]
            name = f"h{next(counter)}"
            try:
                out = tuple(np.broadcast_shapes(sa, sb))
                lines.append(f"  {name} = add({a}, {b})")
                outer[name] = (out, ba + bb)
            except ValueError:
                lines.append(f"  {name} = negative({a})")
                outer[name] = (sa, ba)
    if not results_all:  # every op was skipped: one plain region
        rank0 = len(outer["p0"][0])
        first = next((o for o in caps.ops if caps.supports(o, dtype, rank0)), caps.ops[0])
        lines = [f"  r = @{caps.name} {{ return {first}(p0{', p0' if first not in UNARY else ''}) }}"]
        results_all = ["r"]
        outer["r"] = outer["p0"]
    returned = list(
        dict.fromkeys([results_all[-1], *draw(st.lists(st.sampled_from(sorted(outer)), max_size=2))])
    )
    head = ", ".join(f"{n}: {text(s)}" for n, s in params.items())
    graph = f"graph main({head}) {{\n" + "\n".join(lines) + f"\n  return {', '.join(returned)}\n}}\n"
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype == "bool":
        inputs = {n: rng.integers(0, 2, size=s).astype(bool) for n, s in params.items()}
    elif is_integer(dtype):
        inputs = {n: rng.integers(-9, 10, size=s).astype(dtype) for n, s in params.items()}
    else:
        inputs = {n: rng.uniform(-9, 9, size=s).astype(dtype) for n, s in params.items()}
    return graph, inputs


APPROXIMATING_BACKENDS = ("dnnl",)
"""Backends whose library computes tanh and sigmoid by its own approximations (oneDNN:
within a few float32 ulps), so that a 16-bit result may round to the neighbouring
value: their half-precision results are held to one ulp of the dtype."""


def assert_matches_reference(graph: str, inputs, model) -> None:
    """The model's outputs equal the numpy reference's (bit for bit for integers)."""
    program = byoc.parse(graph)
    want = byoc.evaluate(program.functions[0], inputs)
    got = model(**inputs)
    approximating = any(m.backend in APPROXIMATING_BACKENDS for m in model.manifest.modules)
    assert len(got) == len(want), graph
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, graph
        if g.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=graph)
        else:  # float16 and bfloat16 too: byoc's C rounds these ops once from float32, exactly
            if g.dtype == np.float32:
                rtol = 1e-6
            else:
                rtol = float(ml_dtypes.finfo(g.dtype).eps) if approximating else 1e-14
            g, w = g.astype(np.float64), w.astype(np.float64)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6, err_msg=graph)


def build_options(backend: str) -> dict[str, str] | None:
    """-O0 for the engine backend: a C++ compile per example otherwise dominates."""
    return {"engine.opt_level": "0"} if backend == "engine" else None
