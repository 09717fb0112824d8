"""The kernel benchmark's workloads and the systems that run them (data only)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .timing import Bench
from .workloads import (
    CHAIN_OPS,
    bias_relu_text,
    chain_expression,
    chain_text,
    guide_subgraph_text,
    whole_graph_text,
)

FUSED = "fused"
"""The backend the kernel speed targets are about (it may not exist yet)."""
DEFAULT_JSON = "benchmarks/results/kernels.json"
TARGETS = (  # the kernel targets, on FUSED's prepared call: (workload, metric, op, limit, text)
    ("subgraph_4096", "x_bound", "<=", 1.10, "fused on 4096x4096: at most 1.10x the memory bound"),
    ("subgraph_4096", "vs_numpy", ">=", 1.4, "fused on 4096x4096: at least 1.4x faster than numpy eager"),
    ("subgraph_4096", "vs_numexpr", ">", 1.0, "fused on 4096x4096: faster than numexpr"),
    ("chain64", "vs_numpy", ">=", 5.0, "fused on the 64-op chain: at least 5x faster than numpy eager"),
    ("subgraph_10", "vs_numpy", ">", 1.0, "prepared fused call at 10x10: faster than numpy eager"),
)


@dataclass
class Workload:
    key: str
    title: str
    shape: str
    text: Callable[[str], str]  # backend -> DSL text with one explicit region
    inputs: dict[str, np.ndarray]
    numpy_eager: str  # the plain numpy expression over the inputs
    numpy_out: str | None  # the same with out= into the preallocated output `o`
    numexpr: str | None
    bandwidth: bool  # whether the memory bound applies (large, memory-bound)
    whole_graph: bool = False
    skip_numexpr: str = ""
    expected_nbytes: int = 0

    def expected(self) -> np.ndarray:
        return np.asarray(eval(self.numpy_eager, {"np": np}, dict(self.inputs)))

    @property
    def bytes_moved(self) -> int:
        """Bytes a single fused pass reads (every input once) and writes (the output)."""
        return sum(a.nbytes for a in self.inputs.values()) + self.expected_nbytes


@dataclass
class System:
    name: str
    group: str  # byoc | ffi | peer | bound
    bench: Bench
    output: Callable[[], np.ndarray] | None = None  # one run, returning the result
    backend: str | None = None
    path: str = ""
    info: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------ workloads


def make_workloads(tiny: bool, chain_shape: tuple[int, int] | None = None) -> list[Workload]:
    rng = np.random.default_rng(0)

    def arrays(shape: tuple[int, ...], names: str) -> dict[str, np.ndarray]:
        return {n: rng.uniform(-1, 1, shape).astype(np.float32) for n in names.split()}

    big = (64, 64) if tiny else (4096, 4096)
    chain = chain_shape or ((32, 32) if tiny else (1024, 1024))
    rows, cols = (64, 32) if tiny else (4096, 1024)
    subgraph = "(((x + w0) - w1) * w2)"
    subgraph_out = "np.add(x, w0, out=o); np.subtract(o, w1, out=o); np.multiply(o, w2, out=o)"

    def shape_str(shape: tuple[int, ...]) -> str:
        return "float32[" + ", ".join(map(str, shape)) + "]"

    chain_inputs = arrays(chain, "x a b")
    chain_inputs["c"] = rng.uniform(0.5, 0.99, chain).astype(np.float32)
    ops = {"add": "np.add", "multiply": "np.multiply", "subtract": "np.subtract"}
    chain_out = []
    for i in range(64):
        op, operand = CHAIN_OPS[i % len(CHAIN_OPS)]
        chain_out.append(f"{ops[op]}({'x' if i == 0 else 'o'}, {operand}, out=o)")
    whole = "np.concatenate(((((x + w0) - w1) * w2), (((x + w3) - w4) * w5), ((x + w6) - w7)), axis=0)"
    whole_out = (
        "np.add(x, w0, out=o0); np.subtract(o0, w1, out=o0); np.multiply(o0, w2, out=o0); "
        "np.add(x, w3, out=o1); np.subtract(o1, w4, out=o1); np.multiply(o1, w5, out=o1); "
        "np.add(x, w6, out=o2); np.subtract(o2, w7, out=o2)"
    )
    result = [
        Workload(
            "subgraph_10",
            "guide subgraph ((x+w0)-w1)*w2: call overhead",
            shape_str((10, 10)),
            lambda b: guide_subgraph_text(b, (10, 10)),
            arrays((10, 10), "x w0 w1 w2"),
            subgraph,
            subgraph_out,
            subgraph,
            bandwidth=False,
        ),
        Workload(
            "subgraph_4096",
            f"guide subgraph ((x+w0)-w1)*w2 at {big[0]}x{big[1]}: bandwidth",
            shape_str(big),
            lambda b: guide_subgraph_text(b, big),
            arrays(big, "x w0 w1 w2"),
            subgraph,
            subgraph_out,
            subgraph,
            bandwidth=True,
        ),
        Workload(
            "chain64",
            f"64-op elementwise chain over {chain[0] * chain[1]:,} elements",
            shape_str(chain),
            lambda b: chain_text(b, chain, 64),
            chain_inputs,
            chain_expression(64),
            "; ".join(chain_out),
            chain_expression(64),
            bandwidth=True,
        ),
        Workload(
            "bias_relu",
            f"broadcasting bias-add-relu: relu(x[{rows}, {cols}] + bias[{cols}])",
            f"float32[{rows}, {cols}] + float32[{cols}]",
            lambda b: bias_relu_text(b, rows, cols),
            {**arrays((rows, cols), "x"), **arrays((cols,), "bias")},
            "np.maximum(x + bias, 0)",
            "np.add(x, bias, out=o); np.maximum(o, 0, out=o)",
            # numexpr's fastest form: its maximum(x + bias, 0) computes in float64 (it
            # returns float64 for float32 inputs) and measured 1.35x slower than this.
            "where(x + bias > 0, x + bias, 0)",
            bandwidth=True,
        ),
        Workload(
            "whole_graph",
            "guide whole graph (2 regions + host ops + concatenate)",
            shape_str((10, 10)) + " x9 -> [30, 10]",
            whole_graph_text,
            arrays((10, 10), "x w0 w1 w2 w3 w4 w5 w6 w7"),
            whole,
            whole_out,
            None,
            bandwidth=False,
            whole_graph=True,
            skip_numexpr="numexpr has no concatenate",
        ),
    ]
    for w in result:
        w.expected_nbytes = w.expected().nbytes
    return result


def megabytes(n: int) -> str:
    """A byte count for a table: ``336 MB``, ``0.8 kB``."""
    return f"{n / 1e6:.0f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its class name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def describe_error(exc: BaseException) -> str:
    """``ValueError: the first line``: why a system or a backend is left out."""
    return f"{type(exc).__name__}: {first_line(exc)}"


def split_choice(choice: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, str], str]:
    """A --backend choice of the networks suite as (backend names, build options, label):
    an entry ``BACKEND.KEY=VALUE`` is a build option, the rest are backends, and the
    label names the options' keys, with the value of one that is not ``true``
    (``fused[float32_dots=false]``)."""
    names = tuple(c for c in choice if "=" not in c)
    options = dict(c.split("=", 1) for c in choice if "=" in c)
    keys = ",".join(k.rsplit(".", 1)[-1] + ("" if v == "true" else f"={v}") for k, v in options.items())
    return names, options, ",".join(names) + (f"[{keys}]" if keys else "")


def missing_library(backends: tuple[str, ...] | list[str]) -> str | None:
    """Why one of ``backends`` cannot build here (a library its spec ``requires:`` is
    not installed, with the install hint), or None. Such a backend is reported as not
    installed, like a missing peer, not as a failure."""
    import byoc.api as api

    return next(filter(None, (api.load_backend(name).missing_library() for name in backends)), None)


def machine_lacks(backend: str, program: Any) -> str | None:
    """Why ``backend`` alone cannot run ``program`` on this machine: its spec probes a
    dtype of the program's parameters (``probe:``) that this machine does not compute
    (dnnl's int8 without VNNI), or None. Such a system is reported as skipped, with
    the probe's reason, like a missing library."""
    import byoc.api as api
    from byoc.runtime.probe import lacking

    spec = api.load_backend(backend)
    if spec.probe is None or spec.missing_library():
        return None
    dtypes = sorted(lacking(spec, {p.type.dtype for fn in program.functions for p in fn.params}))
    return (
        f"{backend} does not compute {', '.join(dtypes)} on this machine ({spec.probe.doc})"
        if dtypes
        else None
    )
