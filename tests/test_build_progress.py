"""byoc.build compiles the backends' modules in parallel and reports a long compilation:
which modules, and when each ends; nothing for a quick one (a cache hit), and nothing
from the command line when standard error is not a terminal or -q is given."""

from __future__ import annotations

import os
import threading
import time

import pytest
from conftest import run_cli

import byoc
import byoc.building
import byoc.runtime.build

# two compiled modules, fused and ccompiler
TWO_MODULES = """\
graph main(x: float32[4, 8], y: float32[4, 8]) {
  a = @fused { return add(x, y) }
  b = @ccompiler { return multiply(a, y) }
  return b
}
"""


@pytest.fixture
def graph(tmp_path):
    path = tmp_path / "two.graph"
    path.write_text(TWO_MODULES)
    return path


def slow_builds(monkeypatch, seconds: float) -> list[tuple[str, float, float]]:
    """Make every module's compilation take ``seconds`` longer; the (module, start, end)
    of each, as they happen."""
    real = byoc.runtime.build.build_spec_module
    spans: list[tuple[str, float, float]] = []
    lock = threading.Lock()

    def slow(spec, *args, **kwargs):
        start = time.perf_counter()
        time.sleep(seconds)
        library = real(spec, *args, **kwargs)
        with lock:
            spans.append((spec.name, start, time.perf_counter()))
        return library

    monkeypatch.setattr(byoc.runtime.build, "build_spec_module", slow)
    return spans


def test_a_long_compilation_reports_each_module(monkeypatch, graph):
    spans = slow_builds(monkeypatch, byoc.building.QUIET_SECONDS + 0.3)
    lines: list[str] = []
    byoc.build(graph, progress=lines.append)
    assert sorted(name for name, _, _ in spans) == ["ccompiler", "fused"]
    assert lines[0].startswith("compiling ") and "(2 of 2 modules)" in lines[0]
    ends = sorted(line.split()[0] for line in lines[1:])
    assert ends == ["ccompiler", "fused"] and all(" compiled after " in line for line in lines[1:])
    assert lines[-1].endswith("; 0 left")


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the modules compile one after the other")
def test_modules_compile_at_the_same_time(monkeypatch, graph):
    spans = slow_builds(monkeypatch, 0.5)
    byoc.build(graph)
    (a, a_start, a_end), (b, b_start, b_end) = sorted(spans)
    assert a_start < b_end and b_start < a_end, spans  # the two spans overlap


def test_a_quick_compilation_reports_nothing(graph):
    byoc.build(graph)  # cached from now on
    lines: list[str] = []
    byoc.build(graph, progress=lines.append)
    assert lines == []


def test_the_command_line_is_quiet_off_a_terminal(monkeypatch, capsys, graph):
    slow_builds(monkeypatch, byoc.building.QUIET_SECONDS + 0.3)
    rc, out, err = run_cli(capsys, "run", graph)
    assert rc == 0 and "every output matches" in out and "compil" not in err  # not a terminal
    with pytest.raises(SystemExit):
        run_cli(capsys, "run", "--help")
    assert "-q, --quiet" in capsys.readouterr().out
