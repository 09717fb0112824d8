"""Shared helpers of the composite pattern tests (test_composites*.py): constants of
random values, partitioning a graph, and the composites it holds."""

from __future__ import annotations

import numpy as np
from partition_support import graph

from byoc.api import load_backend, load_catalog
from byoc.generator.partition import partition


def random_constant(rng: np.random.Generator, shape: tuple[int, ...], low: float = -1.0) -> str:
    values = ", ".join(f"{v:.3f}" for v in rng.uniform(low, 1.0, size=int(np.prod(shape))))
    return f"const float32[{', '.join(map(str, shape))}] [{values}]"


def composites(program) -> list[tuple[str, tuple[str, ...]]]:
    """(pattern, its ops) of every composite, in order."""
    return [
        (inner.callee.composite, tuple(n.op for n in inner.callee.nodes))
        for fn in program.functions
        for node in fn.nodes
        if node.callee is not None
        for inner in node.callee.nodes
        if inner.callee is not None
    ]


def partitioned(text: str, *backends: str, spec_path=None):
    return partition(graph(text), [load_backend(b, spec_path=spec_path) for b in backends], load_catalog())
