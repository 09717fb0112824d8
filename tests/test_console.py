"""The ``byoc`` program's entry (byoc/console.py): the command runs with the collector
on, the imports' objects and, at the end, everything left are frozen, and the exit
status is the command's."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

import byoc.cli
from byoc import console


@pytest.fixture
def collector_restored():
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize("status", [0, 2])
def test_the_command_runs_with_the_collector_on_and_its_status_is_returned(
    monkeypatch, collector_restored, status
):
    seen = {}

    def command():
        seen["enabled"] = gc.isenabled()
        seen["frozen"] = gc.get_freeze_count()
        seen["made"] = [[] for _ in range(1000)]  # objects the command makes, not frozen yet
        return status

    monkeypatch.setattr(byoc.cli, "main", command)
    gc.unfreeze()
    assert console.run() == status
    assert seen["enabled"], "the command ran with the collector off"
    assert seen["frozen"] > 0, "nothing was frozen after the imports"
    assert gc.get_freeze_count() >= seen["frozen"] + 1000, "what the command left was not frozen at the end"
    assert gc.isenabled()


def test_an_exception_leaves_the_collector_on(monkeypatch, collector_restored):
    def command():
        raise SystemExit(3)

    monkeypatch.setattr(byoc.cli, "main", command)
    with pytest.raises(SystemExit):
        console.run()
    assert gc.isenabled()


def test_python_dash_m_byoc_runs_the_program(tmp_path):
    graph = tmp_path / "g.graph"
    graph.write_text("graph main(x: float32[2]) {\n  return add(x, x)\n}\n")
    out = subprocess.run(
        [sys.executable, "-m", "byoc", "parse", str(graph)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "add(x, x)" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "byoc", "parse", str(tmp_path / "missing.graph")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2
    assert "missing.graph" in bad.stderr
