"""The shipped engine backend at ranks other than 2, end to end through ``byoc run``.

ExampleJSON files of rank 1 and 3 run with ``--backend engine``; DSL graphs of rank 0,
1, 3 and 5 are partitioned onto the engine automatically (``byoc partition`` shows
that every op is offloaded) and run. Every output is compared by ``byoc run`` with
the numpy reference, and here once more with numpy written out by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from e2e_support import assert_run_ok, ejson_expected, record_calls

from byoc.api import parse
from byoc.ir import CALL_OP

OPTIONS = ("--option", "engine.opt_level=0")
"""-O0: a C++ compile per test otherwise dominates."""


@pytest.fixture
def calls(monkeypatch) -> list[tuple[dict[str, np.ndarray], tuple[np.ndarray, ...]]]:
    return record_calls(monkeypatch)


def examplejson_text(shape: tuple[int, ...]) -> str:
    """The guide's subgraph (((v0 + v1) - v2) * v3) at ``shape``."""
    dims = " ".join(map(str, shape))
    lines = ["subgraph_0", *(f"  input {k} {dims}" for k in range(4))]
    lines += [
        f"  add 4 inputs: 0 1 shape: {dims}",
        f"  sub 5 inputs: 4 2 shape: {dims}",
        f"  mul 6 inputs: 5 3 shape: {dims}",
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("shape", [(7,), (2, 3, 4)], ids=["rank1", "rank3"])
def test_examplejson_runs_on_engine(shape, tmp_path, capsys, calls):
    path = tmp_path / f"rank{len(shape)}.examplejson"
    path.write_text(examplejson_text(shape))
    rc, out, err = run_cli(capsys, "run", path, "--backend", "engine", *OPTIONS)
    assert_run_ok(rc, out, err)
    assert "(backends: engine)" in out
    assert len(calls) == 1
    inputs, (got,) = calls[0]
    assert got.shape == shape and got.dtype == np.float32
    np.testing.assert_allclose(got, ejson_expected(inputs), rtol=1e-6, atol=1e-6)


Expected = Callable[[np.ndarray, np.ndarray], np.ndarray]

GRAPHS: dict[int, tuple[tuple[int, ...], str, Expected]] = {
    0: ((), "divide(add(x, y), minimum(y, copy(x)))", lambda x, y: (x + y) / np.minimum(y, x)),
    1: ((9,), "multiply(subtract(x, y), negative(y))", lambda x, y: (x - y) * -y),
    3: (
        (2, 3, 4),
        "relu(subtract(maximum(x, y), multiply(x, y)))",
        lambda x, y: np.maximum(np.maximum(x, y) - x * y, 0),
    ),
    5: (
        (2, 1, 3, 2, 2),
        "add(multiply(add(x, y), y), minimum(x, y))",
        lambda x, y: (x + y) * y + np.minimum(x, y),
    ),
}


def graph_file(tmp_path: Path, rank: int) -> Path:
    shape, expression, _ = GRAPHS[rank]
    t = f"float32[{', '.join(map(str, shape))}]"
    path = tmp_path / f"rank{rank}.graph"
    path.write_text(f"graph main(x: {t}, y: {t}) {{\n  return {expression}\n}}\n")
    return path


@pytest.mark.parametrize("rank", GRAPHS)
def test_graph_offloads_to_engine(rank, tmp_path, capsys, calls):
    path = graph_file(tmp_path, rank)
    rc, out, err = run_cli(capsys, "partition", path, "--backend", "engine")
    assert rc == 0, err
    (main,) = parse(out, "graph").functions
    assert [(n.op, n.callee.backend if n.callee else None) for n in main.nodes] == [(CALL_OP, "engine")]

    rc, out, err = run_cli(capsys, "run", path, "--backend", "engine", *OPTIONS)
    assert_run_ok(rc, out, err)
    assert len(calls) == 1
    inputs, (got,) = calls[0]
    shape, _, expected = GRAPHS[rank]
    assert got.shape == shape and got.dtype == np.float32
    np.testing.assert_allclose(got, expected(inputs["x"], inputs["y"]), rtol=1e-6, atol=1e-6)
