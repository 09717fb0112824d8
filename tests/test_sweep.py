"""``byoc sweep`` and ``byoc.testing.sweep``: the conformance run of a backend.

A deliberately broken macro is reported with its op, dtype and shapes; a build that
fails is split until the failing cases are found; a ``when:`` refusal is "not
applicable", not a failure; bad arguments are located usage errors; the same seed
draws the same cases however the sweep is narrowed; and every shipped backend passes.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import run_cli
from libraries import missing_library

import byoc
from byoc import cli
from byoc.errors import UsageError
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS
from byoc.testing import sweep
from byoc.testing.sweep_report import FAILED, NOT_APPLICABLE, PASSED

SHIPPED = sorted(path.stem for path in SHIPPED_BACKENDS.glob("*.yaml"))

ADD_MAPPING = 'vars: {operator: "+"}'
"""How ccompiler.yaml maps add: the subtract and multiply macros, with this operator."""


@pytest.fixture(autouse=True)
def _only_shipped_specs(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


def broken_ccompiler(tmp_path, operator: str):
    """A copy of the shipped ccompiler.yaml, whose add uses ``operator`` (on the spec
    path, it stands for the shipped one)."""
    text = (SHIPPED_BACKENDS / "ccompiler.yaml").read_text(encoding="utf-8")
    start = text.index("\n  add:\n")
    mapping = text.index(ADD_MAPPING, start)
    assert mapping - start < 200, "add's mapping moved: update ADD_MAPPING"
    broken = text[:mapping] + f'vars: {{operator: "{operator}"}}' + text[mapping + len(ADD_MAPPING) :]
    (tmp_path / "ccompiler.yaml").write_text(broken, encoding="utf-8")
    return tmp_path


def test_an_add_macro_that_subtracts_is_reported_with_op_dtype_and_shapes(tmp_path, capsys):
    specs = broken_ccompiler(tmp_path, "-")
    report = sweep("ccompiler", spec_path=specs, ops=["add", "subtract"], dtypes=["float32"], cases=1)
    assert not report.ok
    assert {(o.op, o.dtype) for o in report.failures} == {("add", "float32")}
    ran_add = [o for o in report.outcomes if o.op == "add" and o.status != NOT_APPLICABLE]
    assert ran_add and all(o.status == FAILED for o in ran_add)  # random floats: a - b is never a + b
    assert all(o.status in (PASSED, NOT_APPLICABLE) for o in report.outcomes if o.op == "subtract")
    for o in report.failures:
        assert re.fullmatch(r"add\(float32\[[0-9, ]*\], float32\[[0-9, ]*\]\) -> float32\[[0-9, ]*\]", o.call)
        assert "max abs error" in o.detail

    status, out, err = run_cli(
        capsys, "sweep", "--backend", "ccompiler", "--spec-path", specs, "--op", "add", "--dtype", "float32"
    )
    assert status == 1, err
    failures = out[out.index("failures:") :]
    assert re.search(r"^  add float32 rank \d: add\(float32\[", failures, flags=re.M)
    assert "max abs error" in failures
    assert "some cases FAILED" in out.splitlines()[-1]


def test_a_build_error_is_split_down_to_the_cases_that_cause_it(tmp_path):
    specs = broken_ccompiler(tmp_path, "+ no_such_name +")
    report = sweep("ccompiler", spec_path=specs, ops=["add", "subtract"], dtypes=["float32"], cases=1)
    assert {o.op for o in report.failures} == {"add"}
    assert all("no_such_name" in o.detail for o in report.failures)
    subtracted = [o for o in report.outcomes if o.op == "subtract"]
    assert subtracted and all(o.status != FAILED for o in subtracted)
    assert any(o.status == PASSED for o in subtracted)
    assert report.builds > 2  # the whole, then add and subtract apart, then add's ranks


def test_a_when_refusal_is_not_applicable_and_not_a_failure(tmp_path, capsys):
    text = (SHIPPED_BACKENDS / "json.yaml").read_text(encoding="utf-8")
    assert "\n  relu: {kernel: nn.relu}\n" in text
    refusing = text.replace(
        "\n  relu: {kernel: nn.relu}\n", '\n  relu: {kernel: nn.relu, when: ["in0.shape[0] == 99"]}\n'
    )
    (tmp_path / "json.yaml").write_text(refusing, encoding="utf-8")
    report = sweep("json", spec_path=tmp_path, ops=["relu", "negative"], dtypes=["float32"], cases=1)
    assert report.ok
    relu = [o for o in report.outcomes if o.op == "relu"]
    assert relu and all(o.status == NOT_APPLICABLE for o in relu)
    assert all("when: in0.shape[0] == 99 is false" in o.detail for o in relu)
    assert all(o.status == PASSED for o in report.outcomes if o.op == "negative")

    report_file = tmp_path / "report.json"
    status, out, _ = run_cli(
        capsys, "sweep", "--backend", "json", "--spec-path", tmp_path, "--op", "relu", "-o", report_file
    )
    assert status == 0
    assert "not applicable (the spec refuses the node)" in out
    saved = json.loads(report_file.read_text(encoding="utf-8"))
    assert saved["failed"] == 0 and saved["passed"] == 0 and saved["not_applicable"] > 0
    assert {o["status"] for o in saved["outcomes"]} == {NOT_APPLICABLE}


def test_the_same_seed_draws_the_same_cases_however_the_sweep_is_narrowed():
    def calls(report, op):
        return [(o.rank, o.call) for o in report.outcomes if o.op == op and o.dtype == "float32"]

    narrow = sweep("json", ops=["concatenate"], dtypes=["float32"])
    wide = sweep("json", ops=["concatenate", "add"], dtypes=["float32", "int8"])
    other_seed = sweep("json", ops=["concatenate"], dtypes=["float32"], seed=1)
    assert calls(narrow, "concatenate") == calls(wide, "concatenate")
    assert calls(narrow, "concatenate") != calls(other_seed, "concatenate")
    assert {o.dtype for o in wide.outcomes if o.op == "add"} == {"float32", "int8"}


def test_the_table_has_a_row_per_op_and_dtype_or_per_rank(capsys):
    status, out, _ = run_cli(capsys, "sweep", "--backend", "json", "--op", "softmax", "--dtype", "float64")
    assert status == 0
    header, row = out.splitlines()[1:3]
    assert header.split() == ["op", "dtype", "rank", "cases", "passed", "failed", "not", "applicable"]
    assert row.split()[:3] == ["softmax", "float64", "1-8"]  # a softmax has an axis: rank 0 is never drawn
    assert out.splitlines()[-3:-1] == [
        "no case drawn (the catalog refused every proposal of these ranks):",
        "  softmax: rank 0",
    ]
    status, out, _ = run_cli(
        capsys,
        "sweep",
        "--backend",
        "json",
        "--op",
        "softmax",
        "--dtype",
        "float64",
        "--by-rank",
        "--cases",
        "3",
    )
    rows = [line.split() for line in out.splitlines()[2:] if line.startswith("  softmax  ")]
    assert [r[2] for r in rows] == [str(rank) for rank in range(1, 9)]
    assert all(r[3] == "3" for r in rows)


@pytest.mark.parametrize(
    ("argv", "message", "hint"),
    [
        (["--backend", "nope"], "unknown backend 'nope'", "known backends"),
        (
            ["--backend", "ccompiler", "--op", "ad"],
            "--op ad: no such op in the catalog",
            "did you mean 'add'?",
        ),
        (["--backend", "engine", "--op", "where"], "backend engine does not map where", "it maps add"),
        (["--backend", "engine", "--dtype", "float64"], "backend engine does not take float64", "float32"),
        (
            ["--backend", "json", "--dtype", "flot32"],
            "--dtype flot32: no such dtype",
            "did you mean 'float32'?",
        ),
        (["--backend", "json", "--option", "nonsense"], "is not KEY=VALUE", "opt_level"),
        (
            ["--backend", "ccompiler", "--op", "add", "--dtype", "bool"],
            "maps none of add at bool",
            "backends",
        ),
    ],
)
def test_bad_input_is_a_usage_error_with_a_hint(capsys, argv, message, hint):
    status, out, err = run_cli(capsys, "sweep", *argv)
    assert status == 2
    assert out == ""
    assert err.startswith("usage error:") and message in err
    assert "hint:" in err and hint in err
    assert "Traceback" not in err


def test_bad_input_in_python_raises_before_anything_is_built():
    with pytest.raises(UsageError, match="at least one case"):
        sweep("json", cases=0)
    with pytest.raises(UsageError, match="does not map"):
        sweep("examplejson", ops=["conv"])


def test_help_teaches_with_examples(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["sweep", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "byoc sweep --backend acme --spec-path acme_specs" in out
    assert "not applicable" in out and "exit status" in out


@pytest.mark.parametrize("backend", SHIPPED)
def test_every_shipped_backend_passes_the_sweep(backend):
    if missing_library(backend):
        pytest.skip(missing_library(backend))
    report = sweep(backend, cases=1)
    assert report.ok, report.table()
    assert report.count(PASSED) > 0
    swept = {o.op for o in report.outcomes} | {op for op, _, _ in report.undrawn}
    assert swept == set(byoc.load_backend(backend).ops)  # every op it maps, at every dtype it takes


def test_the_cli_default_of_cases_is_the_sweeps_and_start_up_skips_the_testing_kit():
    """`byoc sweep --cases` defaults to byoc.testing.sweep's own default, and loading the
    CLI (every command's start) imports no module of the testing kit."""
    import importlib
    import subprocess
    import sys

    from byoc.cli import sweep as cli_sweep

    assert cli_sweep.DEFAULT_CASES == importlib.import_module("byoc.testing.sweep").DEFAULT_CASES
    code = "import sys, byoc.cli; print(sorted(m for m in sys.modules if m.startswith('byoc.testing')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
