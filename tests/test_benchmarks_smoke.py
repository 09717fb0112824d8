"""The kernels benchmark suite runs end to end and writes its JSON.

A smoke test only: tiny arrays, two rounds, in a subprocess. Nothing about speed is
asserted (benchmarks measure; tests never time anything).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from libraries import missing_library

REPO = Path(__file__).resolve().parents[1]
WORKLOADS = {"subgraph_10", "subgraph_4096", "chain64", "bias_relu", "whole_graph"}


def test_kernels_suite_quick_tiny_writes_json(tmp_path):
    out = tmp_path / "kernels.json"
    env = {**os.environ, "BYOC_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "benchmarks", "kernels", "--quick", "--tiny", "--rounds", "2"]
    proc = subprocess.run(
        [*command, "--no-chart", "--json", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "| system | median |" in proc.stdout
    data = json.loads(out.read_text())
    assert {"suite", "mode", "machine", "peers", "backends", "workloads", "targets"} <= data.keys()
    assert data["suite"] == "kernels" and data["mode"] == {"quick": True, "tiny": True}
    assert set(data["workloads"]) == WORKLOADS
    for w in data["workloads"].values():
        assert {
            "title",
            "systems",
            "not_applicable",
            "skipped",
            "failed",
            "bytes_moved",
            "bound_s",
        } <= w.keys()
        assert w["failed"] == {}
        if w["bound_s"] is not None:  # the bound is the fastest of copy and triad on 1 and 2 threads
            probes = {(r["probe"], r["threads"]) for r in w["systems"].values() if r["group"] == "bound"}
            assert probes == {("copy", 1), ("copy", 2), ("triad", 1), ("triad", 2)}
            assert w["bound_s"] == min(r["median_s"] for r in w["systems"].values() if r["group"] == "bound")
            assert w["residency"] in ("L2", "L3", "DRAM", "unknown")
        assert "numpy eager" in w["systems"]
        for row in w["systems"].values():
            assert {"median_s", "speedup_vs_numpy", "x_bound", "group", "correct"} <= row.keys()
        # every backend found is either measured or says why it cannot express the workload
        measured = {row["backend"] for row in w["systems"].values() if row["backend"]}
        # (or, a library backend whose library is not installed, is skipped with the hint)
        missing = {b for b in data["backends"] if missing_library(b)}
        assert set(data["backends"]) - missing <= measured | set(w["not_applicable"])
        assert all(any(b in why and "pip install" in why for why in w["skipped"].values()) for b in missing)
    for t in data["targets"]:
        assert {"target", "value", "met", "note"} <= t.keys()
    assert data["failures"] == []


def _run_kernels_in_process(tmp_path, monkeypatch, capsys) -> tuple[int, str, dict]:
    """The kernels suite on subgraph_10 at tiny sizes, in this process (so that a test
    can break a backend with monkeypatch): (exit status, stdout, JSON)."""
    from benchmarks import kernels

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "kernels.json"
    argv = [
        "--quick",
        "--tiny",
        "--rounds",
        "1",
        "--workload",
        "subgraph_10",
        "--no-chart",
        "--json",
        str(out),
    ]
    status = kernels.main(argv)
    return status, capsys.readouterr().out, json.loads(out.read_text())


def _break_fused(monkeypatch, how: str) -> None:
    """Make every build of the fused backend fail (``build``) or compute garbage
    (``wrong``: its prepared call writes zeros after the kernel ran)."""
    import byoc.building as building
    from byoc.errors import BuildError

    real_build = building.build

    def broken_build(program, *args, **kwargs):
        regions = {n.callee.backend for f in program.functions for n in f.nodes if n.callee is not None}
        if "fused" not in regions:
            return real_build(program, *args, **kwargs)
        if how == "build":
            raise BuildError("injected: cc exited with status 1")
        model = real_build(program, *args, **kwargs)
        for module in model.modules:
            if hasattr(module, "prepare"):
                real_prepare = module.prepare

                def prepare(symbol, *arrays, _real=real_prepare):
                    run = _real(symbol, *arrays)

                    def garbage() -> None:
                        run()
                        arrays[-1].fill(0)

                    return garbage

                module.prepare = prepare
        return model

    monkeypatch.setattr(building, "build", broken_build)


@pytest.mark.parametrize(
    ("how", "system", "error"),
    [("build", "fused", "BuildError: injected"), ("wrong", "fused prepared", "wrong result")],
)
def test_a_broken_fused_backend_fails_the_suite(tmp_path, monkeypatch, capsys, how, system, error):
    _break_fused(monkeypatch, how)
    status, stdout, data = _run_kernels_in_process(tmp_path, monkeypatch, capsys)
    assert status == 1, stdout[-3000:]
    failure = next(f for f in data["failures"] if f["system"] == system)
    assert failure["workload"] == "subgraph_10" and error in failure["error"]
    assert f"| subgraph_10 | {system} | " in stdout  # the failures table names it
    # the other backends were still measured
    assert "ccompiler prepared" in data["workloads"]["subgraph_10"]["systems"]


def test_an_uninstalled_peer_is_skipped_not_failed(tmp_path, monkeypatch, capsys):
    from benchmarks import peers

    monkeypatch.setattr(peers, "ort_module", lambda: (None, "onnxruntime is not installed; pip ..."))
    status, stdout, data = _run_kernels_in_process(tmp_path, monkeypatch, capsys)
    assert status == 0, stdout[-3000:]
    w = data["workloads"]["subgraph_10"]
    assert "not installed" in w["skipped"]["ONNX Runtime"] and not data["failures"]


def test_compile_suite_measures_growth_and_counts_a_timeout_as_a_miss(tmp_path, monkeypatch):
    """The compile-time suite on two small regions of one backend: stage times parsed,
    one growth step with its limit; then a timeout is a recorded miss, not a crash."""
    from benchmarks import compile_time

    monkeypatch.chdir(REPO)
    results = compile_time.run((10, 20), 1, 300.0, ["fused"], log=lambda s: None)
    fused = results["backends"]["fused"]
    assert set(fused["sizes"]) == {"10", "20"}
    for row in fused["sizes"].values():
        assert row["errors"] == [] and row["median_s"] > 0
        assert {"parse", "generate", "compile", "run"} <= set(row["stages_median_s"])
    (step,) = fused["growth_steps"]
    assert step["from"] == 10 and step["to"] == 20 and step["growth"] > 0
    assert abs(step["limit"] - 12.0**0.30103) < 1e-3
    assert "| fused | 20 |" in compile_time.markdown(results)

    missed = compile_time.run((10, 20), 2, 0.01, ["fused"], log=lambda s: None)
    rows = missed["backends"]["fused"]["sizes"]
    assert rows["10"]["errors"] == ["timed out after 0 s"] and rows["10"]["median_s"] is None
    assert missed["targets"][0]["met"] is False


def test_toolchain_times_a_warm_run_without_bytecode(tmp_path, monkeypatch):
    from benchmarks import toolchain

    monkeypatch.chdir(REPO)
    result = toolchain.measure_command(
        ["run", "examples/guide_plain_graph.graph", "--backend", "json"], 1, no_bytecode=True
    )
    for mode in ("cold", "warm", toolchain.NO_BYTECODE):
        assert result[mode]["errors"] == [] and result[mode]["median_s"] > 0
    assert "parse" in result[toolchain.NO_BYTECODE]["stages_median_s"]


def test_model_builds_time_a_cold_and_a_warm_run_and_size_the_cache(tmp_path):
    """The toolchain suite's model builds, on the tiny CNN instead of ResNet-50: the
    warm run's build is cheaper than the cold one's, which compiled; the cache holds
    the library; the targets say what they measured."""
    from benchmarks import model_builds
    from benchmarks.network_workloads import TINY_NETWORK

    cache = tmp_path / "cache"
    cold = model_builds.run_once(TINY_NETWORK, cache)
    sizes = model_builds.cache_sizes(cache)
    warm = model_builds.run_once(TINY_NETWORK, cache)
    assert "error" not in cold and "error" not in warm
    assert cold["stages"]["compile"] > warm["stages"].get("compile", 0.0)
    assert 0 < warm["build_s"] < cold["build_s"]
    assert 0 < sizes["library_bytes"] <= sizes["build_bytes"]
    summary = {
        "cold": {"errors": [], "stages_median_s": {"compile": 11.0}},
        "warm": {"errors": [], "build_median_s": 0.5},
    }
    models = {"light_resnet50": {**summary, "cache": {"build_bytes": 130, "library_bytes": 100}}}
    found = model_builds.targets(models)
    assert [t["met"] for t in found] == [False, True, False]  # 11 s > 10 s; 0.5 s < 1 s; 1.3x > 1.2x
    assert found[2]["text"].startswith("1.30x")


def test_the_toolchain_suite_without_onnx_says_the_models_are_not_measured(monkeypatch):
    """onnx is an optional dependency: without it the model builds are reported as not
    measured, with why, and the suite runs on."""
    import importlib.util

    from benchmarks import model_builds, toolchain

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "onnx" else real(name, *a)
    )
    assert "onnx is not installed" in model_builds.missing()
    timed = {"median_s": 0.5, "p25_s": 0.4, "p75_s": 0.6, "stages_median_s": {}, "errors": []}

    def fake(args, repeats, no_bytecode=False):
        return {"command": "byoc " + " ".join(args), "repeats": repeats, "cold": timed, "warm": timed}

    monkeypatch.setattr(toolchain, "measure_command", fake)
    results = toolchain.run(quick=True, per_backend=False, log=lambda s: None)
    assert "models" not in results and [t["met"] for t in results["targets"]] == [True, False]
    assert "model builds not measured: onnx is not installed" in toolchain.markdown(results)


def test_toolchain_compares_only_backends_that_offload_part_of_the_plain_graph():
    """`byoc run examples/guide_plain_graph.graph --backend dnnl` offloads nothing (dnnl
    maps no elementwise op) and fails: the suite lists it as not compared, with why,
    instead of timing a failing command."""
    from benchmarks import toolchain

    left_out = toolchain._not_compared(["fused", "dnnl"])
    assert "fused" not in left_out and "dnnl" in left_out
    why = left_out["dnnl"]
    assert "add" in why
    results = {"commands": [], "not_compared": {"dnnl": why}}
    results["commands"].append({"command": "byoc run x", "repeats": 1})
    assert f"not compared: `--backend dnnl` ({why})" in toolchain.markdown(results)


def test_compile_suite_leaves_out_a_backend_without_the_regions_ops_with_the_reason():
    """A compiled backend that maps none of the regions' elementwise ops (a library
    backend) is not expressible, not a missed target; every backend that maps them runs."""
    import byoc.api as api
    from benchmarks import compile_time
    from benchmarks.workloads import REGION_OPS

    backends, not_expressible = compile_time.c_backends()
    compiled = [s for s in api.list_backends() if s.kind.name in compile_time.C_KINDS]
    for spec in compiled:
        if all(op in spec.ops for op in REGION_OPS):
            assert spec.name in backends and spec.name not in not_expressible
        else:
            assert spec.name not in backends and not_expressible[spec.name].startswith("no op ")
    assert "fused" in backends
    assert any(not all(op in s.ops for op in REGION_OPS) for s in compiled), "a backend without add exists"
    text = compile_time.markdown(
        {"backends": {}, "repeats": 1, "not_expressible": {"lib": "no op add, subtract"}}
    )
    assert "not expressible by lib (the regions are add, subtract, multiply): no op add, subtract" in text


def test_the_summary_of_a_full_run_reads_every_suites_targets(tmp_path, monkeypatch):
    """The summary after a full run lists the targets of the kernels, toolchain and
    compile suites from their JSON, each in its own words (it once evaluated the kernels'
    formatter on every suite's targets and crashed)."""
    import json

    import benchmarks.__main__ as entry

    monkeypatch.chdir(tmp_path)
    written = {
        "kernels": {
            "targets": [{"target": "k", "value": 1.8, "metric": "vs_numpy", "met": True, "note": ""}]
        },
        "toolchain": {"targets": [{"target": "t", "value": 0.358, "met": True}]},
        "compile": {"targets": [{"target": "c", "value": 6.4, "met": False}]},
    }
    for name, data in written.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        monkeypatch.setitem(entry.RESULTS, name, str(path))
    text = entry.summary(list(written), 1.0)
    assert "| kernels | k | 1.80x faster than numpy eager | met |" in text
    assert "| toolchain | t | 0.358 s | met |" in text
    assert "| compile | c | growth 6.4x per step | MISSED |" in text
    saved = json.loads((tmp_path / "benchmarks/results/summary.json").read_text())
    assert [t["suite"] for t in saved["targets"]] == ["kernels", "toolchain", "compile"]


def test_parse_suite_times_a_large_constant_both_ways(monkeypatch):
    """The parse suite's constant measurement, at a small size: a parse and a print time
    from a child process that checked the values read back."""
    from benchmarks import parse_speed

    parsed, printed = parse_speed.time_constant(2_000)
    assert parsed > 0 and printed > 0
    monkeypatch.setattr(parse_speed, "CONSTANT_ELEMENTS", 2_000)
    monkeypatch.setattr(
        parse_speed, "size_rounds", lambda f, sizes, repeats: {n: [0.5] * repeats for n in sizes}
    )
    results = parse_speed.run(sizes=(10, 100), repeats=1)
    assert results["constant"]["elements"] == 2_000 and results["constant"]["parse_elements_per_s"] > 0
    assert "A float32 constant of 2,000 literal values" in parse_speed.markdown(results)
