"""The shipped examples on every backend via the Python API, ``byoc run`` and ``byoc build`` bundles."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, run_cli
from e2e_support import (
    BACKENDS,
    WEIGHTS,
    assert_guide_output,
    assert_run_ok,
    ejson_expected,
    guide_inputs,
    make_guide_files,
    record_calls,
    table_rows,
)

import byoc
import byoc.runtime
from byoc import cli
from byoc.building import build

EXAMPLEJSON_FILES = ("guide_subgraph.examplejson", "tvm_external_runtime.examplejson")


@pytest.fixture(scope="module")
def guide_files(tmp_path_factory) -> dict[str, Path]:
    """The guide's whole graph, offloaded to each backend."""
    return make_guide_files(tmp_path_factory)


@pytest.fixture(scope="module")
def bundles(guide_files, tmp_path_factory) -> dict[str, Path]:
    """One bundle per backend, written by ``byoc build``."""
    out = tmp_path_factory.mktemp("bundles")
    paths = {}
    for backend, source in guide_files.items():
        path = out / f"guide_{backend}.byoc"
        assert cli.main(["build", str(source), "-o", str(path)]) == 0
        paths[backend] = path
    return paths


@pytest.fixture
def calls(monkeypatch) -> list[tuple[dict[str, np.ndarray], tuple[np.ndarray, ...]]]:
    """Every (inputs, outputs) a GraphExecutor call sees, e.g. inside ``byoc run``."""
    return record_calls(monkeypatch)


# ------------------------------------------------------------------ the guide's whole graph


@pytest.mark.parametrize("backend", BACKENDS)
def test_guide_whole_graph_api(backend, guide_files):
    model = build(guide_files[backend])
    assert model.graph_names == ("main",)
    assert [m.backend for m in model.manifest.modules] == [backend]
    for seed in (0, 1):
        inputs = guide_inputs(seed)
        assert_guide_output(model(**inputs), inputs)
        assert_guide_output(model.run("main", **inputs), inputs)
    # the executor API gives the same
    inputs = guide_inputs(2)
    ex = model.executor("main")
    for name, value in inputs.items():
        ex.set_input(name, value)
    ex.run()
    assert_guide_output((ex.get_output(0),), inputs)
    # an explicit --backend that agrees with the regions is fine
    assert_guide_output(build(guide_files[backend], backends=[backend])(**inputs), inputs)


def test_build_from_a_parsed_program(guide_files):
    program = byoc.parse_file(str(guide_files["json"]))
    inputs = guide_inputs(3)
    assert_guide_output(byoc.build(program)(**inputs), inputs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_guide_whole_graph_cli(backend, guide_files, capsys, calls):
    rc, out, err = run_cli(capsys, "run", guide_files[backend])
    assert_run_ok(rc, out, err)
    assert f"(backends: {backend})" in out
    assert "graph main: 9 input(s), 1 output(s)" in out
    (row,) = table_rows(out)
    assert row[:3] == ["0", "[30, 10]", "float32"] and row[4] == "ok"
    assert float(row[3]) <= 1e-5
    # the outputs the CLI computed are numpy's, from the inputs it drew
    ((inputs, outputs),) = calls
    assert sorted(inputs) == sorted(["x", *WEIGHTS])
    assert_guide_output(outputs, inputs)


def test_guide_whole_graph_subprocess(guide_files):
    proc = subprocess.run(
        [sys.executable, "-m", "byoc", "run", str(guide_files["ccompiler"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_run_ok(proc.returncode, proc.stdout, proc.stderr)


# ------------------------------------------------------------------ bundles


@pytest.mark.parametrize("backend", BACKENDS)
def test_guide_whole_graph_from_a_bundle(backend, bundles, capsys, calls):
    path = bundles[backend]
    assert path.stat().st_size > 0
    rc, out, err = run_cli(capsys, "run", path)
    assert_run_ok(rc, out, err)
    ((inputs, outputs),) = calls
    assert_guide_output(outputs, inputs)
    model = byoc.runtime.load(path)
    assert model.graph_names == ("main",)
    inputs = guide_inputs(4)
    assert_guide_output(model(**inputs), inputs)
    assert_guide_output(byoc.runtime.load(str(path)).run("main", **inputs), inputs)


def test_build_prints_a_summary(guide_files, tmp_path, capsys):
    path = tmp_path / "model.byoc"
    rc, out, err = run_cli(capsys, "build", guide_files["ccompiler"], "-o", path)
    assert rc == 0 and err == ""
    assert f"wrote {path}" in out and "graphs: main" in out and "ccompiler (library)" in out


def test_bundle_rejects_backend_and_options(bundles, capsys):
    rc, out, err = run_cli(capsys, "run", bundles["json"], "--backend", "json")
    assert rc == 2 and "do not apply to a built bundle" in err and "Traceback" not in err


LOAD_WITHOUT_GENERATOR = """
import json, sys
import numpy as np
import byoc.runtime

results = {}
for path in sys.argv[1:]:
    model = byoc.runtime.load(path)
    rng = np.random.default_rng(5)
    inputs = {n: rng.uniform(-3, 3, size=(10, 10)).astype(np.float32)
              for n in ["x"] + ["w%d" % k for k in range(8)]}
    (out,) = model(**inputs)
    x = inputs["x"]
    w = [inputs["w%d" % k] for k in range(8)]
    want = np.concatenate((((x + w[0]) - w[1]) * w[2], ((x + w[3]) - w[4]) * w[5], (x + w[6]) - w[7]), axis=0)
    results[path] = bool(out.shape == want.shape and np.allclose(out, want, rtol=1e-6, atol=1e-6))
generator = sorted(m for m in sys.modules if m == "byoc.generator" or m.startswith("byoc.generator."))
print(json.dumps({"results": results, "generator": generator}))
"""


def test_load_does_not_import_the_generator(bundles):
    paths = [str(bundles[b]) for b in BACKENDS]
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_WITHOUT_GENERATOR, *paths], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["generator"] == []
    assert report["results"] == dict.fromkeys(paths, True)


# ------------------------------------------------------------------ ExampleJSON texts


@pytest.mark.parametrize("backend", [None, "ccompiler", "json", "engine"])
@pytest.mark.parametrize("name", EXAMPLEJSON_FILES)
def test_examplejson_texts_run(name, backend, capsys, calls):
    argv = ["run", EXAMPLES / name] + (["--backend", backend] if backend else [])
    rc, out, err = run_cli(capsys, *argv)
    graphs = ["subgraph_0"] if name.startswith("guide") else ["json_rt_0", "json_rt_1"]
    assert_run_ok(rc, out, err, n_rows=len(graphs))
    assert f"(backends: {backend or 'examplejson'})" in out
    for graph in graphs:
        assert f"graph {graph}: 4 input(s), 1 output(s)" in out
    assert len(calls) == len(graphs)
    for inputs, (got,) in calls:
        assert got.shape == (10, 10) and got.dtype == np.float32
        np.testing.assert_allclose(got, ejson_expected(inputs), rtol=1e-6, atol=1e-6)


def test_examplejson_api_runs_every_subgraph():
    model = build(EXAMPLES / "tvm_external_runtime.examplejson", backends=["json"])
    assert model.graph_names == ("json_rt_0", "json_rt_1")
    rng = np.random.default_rng(1)
    inputs = {f"v{k}": rng.uniform(-3, 3, (10, 10)).astype(np.float32) for k in range(4)}
    for graph in model.graph_names:
        (got,) = model.run(graph, **inputs)
        np.testing.assert_allclose(got, ejson_expected(inputs), rtol=1e-6)
