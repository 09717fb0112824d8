"""The README's examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

from byoc.cli import main

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_python_api_example_runs(tmp_path, monkeypatch):
    block = re.search(r"## Python API\n\n```python\n(.*?)```", README, re.S)
    assert block, "README lost its Python API example"
    (tmp_path / "examples").symlink_to(REPO / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    exec(compile(block.group(1), "README.md", "exec"), {})
    assert (tmp_path / "guide.byoc").is_file()


def test_quick_start_has_exactly_two_commands():
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.search(r"```sh\n(.*?)```", section, re.S).group(1).strip().splitlines()
    assert len(commands) == 2
    assert "byoc run examples/guide_whole_graph.graph" in commands[0]
    assert commands[1] == "bash .ci/run"
    assert "-m pytest -q" in (REPO / ".ci" / "run").read_text()


def test_main_job_of_the_quick_start(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["run", str(REPO / "examples" / "guide_whole_graph.graph")]) == 0
    assert "every output matches the numpy reference" in capsys.readouterr().out
