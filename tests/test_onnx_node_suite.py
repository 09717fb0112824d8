"""ONNX's own operator suite (the node tests of ``onnx.backend.test``, BackendTest's
Node group) run through byoc, every applicable test in both configurations.

``onnx.backend.test.loader.load_model_tests(kind="node")`` builds each node test in
memory: a model of one node (or of the nodes its function expands to, the
``_expanded`` variants) and data sets of inputs with ONNX's expected outputs.
Collection reads their names and ops from tests/onnx_node_cases.py's index instead,
and the tests are built when the first one runs.

- Not applicable, and left out of the counts: the categories of
  ``tests/data/onnx_node_exclusions.yaml`` (training, random draws, sequences and
  optionals, strings, output shapes that depend on values), each with its reason.
- Every other node test runs on ``json`` (every op on the json backend, no host
  fallback) and on ``fused,ccompiler`` (what neither takes runs on the host): each
  output is compared with the expected one at the case's own tolerances, integers
  and bools exactly, in the dtype the model declares.
- Those that do not pass are recorded, per configuration, with why (the first line
  of byoc's refusal or of the mismatch) in ``tests/data/onnx_node_outcomes.json``,
  which ``.venv/bin/python tests/onnx_node_cases.py --outcomes`` rewrites and whose
  report gives the counts. They run as strict expected failures, so that a test that
  starts passing fails the run until the record is rewritten: the record is always
  the truth, and its diff in a pull request shows what a change gained or lost.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.onnx_suite
onnx = pytest.importorskip("onnx")
from onnx_node_cases import (  # noqa: E402
    CONFIGURATIONS,
    OUTCOMES,
    RECORD,
    applicable,
    computed_index,
    excluded_by,
    exclusions,
    index,
    recorded,
    recorded_outcomes,
    run_case,
)


def _params():
    failures = recorded_outcomes()
    out = []
    for config in CONFIGURATIONS:
        for name in applicable():
            why = failures.get(config, {}).get(name)
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            out.append(pytest.param(config, name, marks=marks, id=f"{config}-{name}"))
    return out


@pytest.mark.parametrize(("config", "name"), _params())
def test_node_case(config, name):
    run_case(config, name)


def test_the_recorded_index_is_the_installed_onnxs():
    version, record = recorded()
    if version != onnx.__version__:
        pytest.skip(f"{RECORD.name} is for onnx {version}; collection built the index of {onnx.__version__}")
    assert record == computed_index(), "rewrite it: .venv/bin/python tests/onnx_node_cases.py"


def test_every_exclusion_rule_is_used():
    """Each op and name prefix of the exclusions selects a node test (a rule no test
    matches is stale, or misspelt), and each category leaves out at least one."""
    cases = index().values()
    for e in exclusions():
        for op in e.ops:
            assert any(op in info.ops for info in cases), (e.category, op)
        for prefix in e.names:
            assert any(info.name.startswith(prefix) for info in cases), (e.category, prefix)
        assert any(excluded_by(info) is e for info in cases), e.category


def test_the_outcomes_name_applicable_tests_of_each_configuration():
    """The record of failures covers both configurations and lists only applicable
    node tests of the installed onnx, each with a reason of a known kind."""
    failures = recorded_outcomes()
    assert set(failures) == set(CONFIGURATIONS), OUTCOMES
    kept = set(applicable())
    for config, rows in failures.items():
        assert set(rows) <= kept, (config, sorted(set(rows) - kept)[:10])
        for name, why in rows.items():
            assert why.split(":", 1)[0] in ("refused", "wrong", "error"), (config, name, why)


def test_refusals_name_the_node():
    """A node test byoc refuses is refused with a located message, not a crash: the
    record's reasons of kind ``error`` are Python exceptions other than byoc's own."""
    errors = {
        (config, name): why
        for config, rows in recorded_outcomes().items()
        for name, why in rows.items()
        if why.startswith("error:")
    }
    assert not errors, errors
