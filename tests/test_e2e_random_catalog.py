"""Random graphs of the whole op catalog, through every shipped backend.

Hypothesis builds small, well-typed float graphs op by op: the op is drawn from the
catalog (spec/ops.yaml through ``byoc.load_catalog``), mostly from the ops the backend
under test maps (its spec says which), and its inputs and attributes by the strategy
of the op's *shape rule* in ``byoc.testing.draft`` (convolutions with random strides,
pads, dilations and groups; pools; reductions; reshapes; split; gather ...), which
``byoc sweep`` draws from too, here through hypothesis' choices. Every proposal is
checked by the catalog's own inference (``infer_types``); one it rejects is dropped and
another op is tried, so the strategies need not know each op's every constraint.

Each graph is printed as DSL, parsed, built with ``--backend X`` (automatic
partitioning, host fallback for what X lacks) and run; every output must match the
reference evaluator within a tolerance for its dtype. A backend that gains ops (C
macros for conv, dense, pools ...) is exercised on them without editing this file.
One build (one compile) per example; few examples per backend.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from libraries import missing_library

import byoc
from byoc.api import parse
from byoc.building import build
from byoc.generator.partition import partition
from byoc.runtime.probe import for_machine
from byoc.testing import check_close
from byoc.testing.draft import RULES, Draft
from byoc.testing.random_values import random_inputs

CATALOG = byoc.load_catalog()
SPECS = {spec.name: spec for spec in byoc.list_backends()}
FLOATS = ("float32", "float64", "float16", "bfloat16")
"""The dtypes a graph is drawn at (its values of other dtypes come from comparisons and
casts), where the backend declares them."""
EXAMPLES = {"engine": 8}
"""Examples per backend; the default is DEFAULT_EXAMPLES (engine pays a C++ compile each)."""
DEFAULT_EXAMPLES = 20
DERANDOMIZE = True


class HypothesisChoices:
    """byoc.testing.draft's random choices drawn by hypothesis (which shrinks a failing graph)."""

    def __init__(self, draw) -> None:
        self.draw = draw

    def integers(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def choice(self, items):
        return self.draw(st.sampled_from(items))

    def permutation(self, items):
        return list(self.draw(st.permutations(items)))

    def subset(self, items, min_size: int, max_size: int | None = None):
        return self.draw(st.lists(st.sampled_from(items), min_size=min_size, max_size=max_size, unique=True))


def test_every_shape_rule_has_a_strategy():
    assert set(RULES) == {op.rule.name for op in CATALOG.values()}


@dataclass(frozen=True)
class RandomGraph:
    text: str
    inputs: dict[str, np.ndarray]
    ops: tuple[str, ...]


@st.composite
def catalog_graphs(draw, backend: str) -> RandomGraph:
    """A random float graph of catalog ops, most of them ops ``backend`` maps."""
    spec = machine_spec(backend)
    dtype = draw(st.sampled_from([t for t in FLOATS if t in spec.dtypes] or list(FLOATS)))
    usable = [name for name, op in CATALOG.items() if dtype in op.dtypes]
    mapped = [name for name in usable if name in spec.ops]
    d = Draft(HypothesisChoices(draw), dtype)
    # Ops are chosen by a seeded Random: hypothesis would favour the first op of a list.
    chooser = draw(st.randoms(use_true_random=False))
    ops: list[str] = []
    for _ in range(draw(st.integers(3, 7))):
        for _attempt in range(6):
            name = chooser.choice(mapped if mapped and chooser.random() < 0.7 else usable)
            if d.add(CATALOG[name]) is not None:
                ops.append(name)
                break
    if not ops:  # every proposal was rejected: an op that always fits
        simple = [n for n in usable if CATALOG[n].rule.elementwise and CATALOG[n].max_inputs == 1]
        assert d.add(CATALOG[draw(st.sampled_from(simple))]) is not None
    defined = [v for s in d.statements for v in s.outputs]
    results = [defined[-1], *draw(st.lists(st.sampled_from(defined), max_size=2))]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return RandomGraph(d.graph_text(results), random_inputs(d.params, rng), tuple(ops))


def machine_spec(backend: str):
    """The backend's spec as partitioning sees it on this machine: without the probed
    dtypes (dnnl's 16-bit floats) this CPU does not compute."""
    return for_machine(SPECS[backend], FLOATS)


def _offloaded(program, backend: str) -> int:
    """How many nodes automatic partitioning gives ``backend``."""
    fn = partition(program, [machine_spec(backend)]).functions[0]
    return sum(len(n.callee.nodes) for n in fn.nodes if n.callee is not None)


@pytest.mark.parametrize("backend", sorted(SPECS))
def test_random_catalog_graphs_match_the_reference(backend):
    if missing_library(backend):
        pytest.skip(missing_library(backend))
    offloaded = []

    @settings(
        max_examples=EXAMPLES.get(backend, DEFAULT_EXAMPLES),
        deadline=None,
        derandomize=DERANDOMIZE,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(catalog_graphs(backend))
    def run(graph: RandomGraph) -> None:
        program = parse(graph.text, "graph", file="random.graph")
        assume(_offloaded(program, backend) > 0)  # else there is nothing to build for the backend
        offloaded.append(graph.ops)
        with np.errstate(all="ignore"):  # domain errors give NaN, as in C
            want = byoc.evaluate(program.functions[0], graph.inputs)
            got = build(program, backends=(backend,))(**graph.inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            check_close(g, w, graph.text)

    run()
    assert offloaded, f"{backend} was given no node of any random graph"
