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
        assert {"title", "systems", "not_applicable", "skipped", "bytes_moved", "bound_s"} <= w.keys()
        assert "numpy eager" in w["systems"]
        for row in w["systems"].values():
            assert {"median_s", "speedup_vs_numpy", "x_bound", "group", "correct"} <= row.keys()
        # every backend found is either measured or says why it cannot express the workload
        measured = {row["backend"] for row in w["systems"].values() if row["backend"]}
        assert set(data["backends"]) <= measured | set(w["not_applicable"])
    for t in data["targets"]:
        assert {"target", "value", "met", "note"} <= t.keys()
