"""Shared helpers and fixtures of the end-to-end tests (test_e2e_*.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from conftest import GUIDE_WHOLE_GRAPH

from byoc.runtime.executor import GraphExecutor

BACKENDS = ("ccompiler", "engine", "examplejson", "json")
WEIGHTS = tuple(f"w{k}" for k in range(8))
TABLE_HEADER = ("output", "shape", "dtype", "max abs error", "status")


def make_guide_files(tmp_path_factory) -> dict[str, Path]:
    """The guide's whole graph, offloaded to each backend."""
    out = tmp_path_factory.mktemp("guide")
    text = GUIDE_WHOLE_GRAPH.read_text()
    assert text.count("@ccompiler") == 2
    files = {"ccompiler": GUIDE_WHOLE_GRAPH}
    for backend in BACKENDS[1:]:
        path = out / f"guide_{backend}.graph"
        path.write_text(text.replace("@ccompiler", f"@{backend}"))
        files[backend] = path
    return files


def guide_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-3, 3, size=(10, 10)).astype(np.float32) for name in ("x", *WEIGHTS)}


def guide_expected(inputs: dict[str, np.ndarray]) -> np.ndarray:
    x = inputs["x"]
    w0, w1, w2, w3, w4, w5, w6, w7 = (inputs[w] for w in WEIGHTS)
    return np.concatenate((((x + w0) - w1) * w2, ((x + w3) - w4) * w5, (x + w6) - w7), axis=0)


def assert_guide_output(outputs, inputs) -> None:
    assert isinstance(outputs, tuple) and len(outputs) == 1
    (out,) = outputs
    assert out.shape == (30, 10) and out.dtype == np.float32
    np.testing.assert_allclose(out, guide_expected(inputs), rtol=1e-6, atol=1e-6)


def ejson_expected(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """What the ExampleJSON examples' subgraphs compute."""
    return ((inputs["v0"] + inputs["v1"]) - inputs["v2"]) * inputs["v3"]


def record_calls(monkeypatch) -> list[tuple[dict[str, np.ndarray], tuple[np.ndarray, ...]]]:
    """Every (inputs, outputs) a GraphExecutor call sees, e.g. inside ``byoc run``."""
    seen = []
    original = GraphExecutor.__call__

    def recording(self, **inputs):
        outputs = original(self, **inputs)
        seen.append(({k: np.array(v) for k, v in inputs.items()}, outputs))
        return outputs

    monkeypatch.setattr(GraphExecutor, "__call__", recording)
    return seen


def table_rows(stdout: str) -> list[list[str]]:
    """The rows of every result table in ``byoc run`` output (header excluded)."""
    rows = []
    lines = stdout.splitlines()
    for k, line in enumerate(lines):
        if line.split() == ["output", "shape", "dtype", "max", "abs", "error", "status"]:
            for row in lines[k + 1 :]:
                if not row.startswith("  "):
                    break
                rows.append(re.split(r"\s{2,}", row.strip()))
    return rows


def assert_run_ok(rc: int, out: str, err: str, n_rows: int = 1) -> None:
    assert rc == 0, out + err
    assert "Traceback" not in err and err == ""
    assert all(word in out for word in TABLE_HEADER)
    rows = table_rows(out)
    assert len(rows) == n_rows
    for row in rows:
        assert row[-1] == "ok", row
    stages = next(line for line in out.splitlines() if line.startswith("stages: "))
    assert " run " in stages and " reference " in stages
    assert "result: every output matches the numpy reference" in out
