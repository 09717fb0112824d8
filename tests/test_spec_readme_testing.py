"""spec/README.md's "Testing your backend" example runs as written.

The example's repository (the mynpu spec of "Worked example: adding a backend", the
graph and the vendor's pytest file) is made from the README's blocks; its tests pass
under pytest and syrupy, and again from another checkout and another working
directory against the golden file written in the first; the README's sweep command
prints the README's table, and the README's failure when add subtracts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from test_spec_readme import MARKER, yaml_blocks

from byoc.spec import ENV_VAR, SHIPPED_BACKENDS
from byoc.testing import assert_matches_reference, generated_artifacts
from byoc.testing.golden import GRAPH_DIR

README = SHIPPED_BACKENDS.parent / "README.md"
TESTING_MARKER = "<!-- the blocks below are run by tests/test_spec_readme_testing.py -->"
ADD = 'add: {macros: {default: MYNPU_BINARY}, vars: {operator: "+"}}'


@pytest.fixture(autouse=True)
def _only_shipped_specs(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


def section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(TESTING_MARKER)
    return text[start : text.index("\n## ", start)]


def blocks(language: str) -> list[str]:
    """The section's fenced blocks of ``language`` ("" for plain ones), in order."""
    found: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    for line in section().splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current = []
                found.append((line[3:].strip(), current))
            else:
                current = None
        elif current is not None:
            current.append(line)
    return ["".join(lines) for lang, lines in found if lang == language]


def vendor_repository(root: Path, operator: str = "+") -> Path:
    """The README's layout under ``root``: my_specs/mynpu.yaml (add with ``operator``),
    tests/graphs/add_relu.graph and tests/test_mynpu.py."""
    text = README.read_text(encoding="utf-8")
    spec = yaml_blocks(text[text.index(MARKER) :])[0]
    assert ADD in spec
    (root / "my_specs").mkdir(parents=True)
    (root / "my_specs" / "mynpu.yaml").write_text(
        spec.replace(ADD, ADD.replace('"+"', f'"{operator}"')), encoding="utf-8"
    )
    (root / "tests" / "graphs").mkdir(parents=True)
    graph = next(b for b in blocks("") if b.startswith("graph "))
    (root / "tests" / "graphs" / "add_relu.graph").write_text(graph, encoding="utf-8")
    (root / "tests" / "test_mynpu.py").write_text(blocks("python")[0], encoding="utf-8")
    return root


def test_the_golden_text_is_the_same_from_any_folder(tmp_path, monkeypatch, capsys):
    first = vendor_repository(tmp_path / "first")
    here = generated_artifacts(first / "tests/graphs/add_relu.graph", "mynpu", spec_path=first / "my_specs")
    shutil.copytree(first, tmp_path / "elsewhere" / "second")
    monkeypatch.chdir(tmp_path / "elsewhere")
    there = generated_artifacts("second/tests/graphs/add_relu.graph", "mynpu", spec_path="second/my_specs")
    assert here == there
    assert set(here) == {"mynpu.c", "byoc_module.h", "byoc_entry.c", "byoc_workspace.c", "main.graph.json"}
    claimed = re.search(r"`(region @mynpu at <graphs>/add_relu\.graph:\d+:\d+)`", section()).group(1)
    assert claimed in here["mynpu.c"]
    assert "my_specs/mynpu.yaml (from --spec-path)" in here["mynpu.c"]
    assert f'"source": "{GRAPH_DIR}/add_relu.graph:2"' in here["main.graph.json"]
    assert not any(str(tmp_path) in text or "second/" in text for text in here.values())
    # what makes this needed: `byoc gen` names the graph as it was given
    status, out, _ = run_cli(
        capsys, "gen", "second/tests/graphs/add_relu.graph", "--spec-path", "second/my_specs"
    )
    assert status == 2  # nothing offloaded without --backend: the graph has no region
    status, out, _ = run_cli(
        capsys,
        "gen",
        "second/tests/graphs/add_relu.graph",
        "--spec-path",
        "second/my_specs",
        "--backend",
        "mynpu",
    )
    assert status == 0 and "at second/tests/graphs/add_relu.graph:2:" in out


def _pytest(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    # a vendor's own session: not this one's spec path, options, or xdist worker (whose
    # variables make syrupy leave its report to a controller that is not there)
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR and not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_vendor_test_file_passes_here_and_in_another_checkout(tmp_path):
    first = vendor_repository(tmp_path / "first")
    run = _pytest(["--snapshot-update", "tests"], first)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout and "1 snapshot generated" in run.stdout, run.stdout
    golden = (first / "tests" / "__snapshots__" / "test_mynpu.ambr").read_text(encoding="utf-8")
    assert f"{GRAPH_DIR}/add_relu.graph" in golden and str(tmp_path) not in golden

    second = tmp_path / "elsewhere" / "second"
    shutil.copytree(first, second)
    run = _pytest([str(second / "tests")], tmp_path)  # another directory, another working directory
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout and "1 snapshot passed" in run.stdout

    spec = second / "my_specs" / "mynpu.yaml"  # a changed spec fails the golden test, and the sweep
    spec.write_text(
        spec.read_text(encoding="utf-8").replace(ADD, ADD.replace('"+"', '"-"')), encoding="utf-8"
    )
    run = _pytest([str(second / "tests")], tmp_path)
    assert run.returncode == 1
    assert (
        "FAILED" in run.stdout
        and "test_generated_code" in run.stdout
        and "test_every_op_dtype_and_rank" in run.stdout
    )
    assert "add float32 rank" in run.stdout  # the sweep's table, as the assertion's message


def test_the_sweep_command_prints_the_readme_table(tmp_path, monkeypatch, capsys):
    repo = vendor_repository(tmp_path)
    monkeypatch.chdir(repo)
    command = next(b for b in blocks("sh") if "byoc sweep" in b).split()
    assert command[:2] == ["byoc", "sweep"]
    status, out, _ = run_cli(capsys, *command[1:])
    assert status == 0
    shown = next(b for b in blocks("") if b.startswith("byoc sweep"))
    *rows, result = shown.splitlines()
    assert out.splitlines()[:-1] == rows
    timing = re.compile(r"[0-9.]+ s:")
    assert timing.sub("", out.splitlines()[-1]) == timing.sub("", result)


def test_the_readme_failure_is_what_the_sweep_prints_when_add_subtracts(tmp_path, monkeypatch, capsys):
    repo = vendor_repository(tmp_path, operator="-")
    monkeypatch.chdir(repo)
    status, out, _ = run_cli(
        capsys, "sweep", "--backend", "mynpu", "--spec-path", "my_specs", "--op", "add", "--dtype", "float32"
    )
    assert status == 1
    shown = next(b for b in blocks("") if b.startswith("failures:"))
    assert shown in out


def test_assert_matches_reference_names_the_output_that_differs(tmp_path):
    good, bad = vendor_repository(tmp_path / "good"), vendor_repository(tmp_path / "bad", operator="-")
    graph = "tests/graphs/add_relu.graph"
    outputs = assert_matches_reference(good / graph, "mynpu", spec_path=good / "my_specs", seed=1)
    assert [o.shape for o in outputs["main"]] == [(2, 8)]
    with pytest.raises(AssertionError, match=r"on mynpu:\n  graph main, output 0 \(\S+\): max abs error"):
        assert_matches_reference(bad / graph, "mynpu", spec_path=bad / "my_specs", seed=1)
    x = np.ones((2, 8), np.float32)  # given inputs: add(1, 1) - a subtracting add gives relu(0) == 0
    with pytest.raises(AssertionError, match="16 of 16 elements differ"):
        assert_matches_reference(bad / graph, "mynpu", spec_path=bad / "my_specs", inputs={"x": x, "y": x})
