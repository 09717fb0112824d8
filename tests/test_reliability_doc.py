"""tests/RELIABILITY.md states what the suite tries, as figures; recompute each one."""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections import Counter
from pathlib import Path

import faults_support
import pytest
import sanitize_driver
import test_bad_inputs
import test_faults_disk
import test_faults_kills
import test_faults_threads
import test_fuzz
import test_roundtrip_hypothesis
from fuzz_strategies import CI_EXAMPLES, DIFFERENTIAL_EXAMPLES, examples

import byoc
import byoc.spec
from byoc.errors import GraphError
from byoc.generator.lowering import offload_whole
from byoc.generator.pipeline import generate

DOC = Path(__file__).parent / "RELIABILITY.md"
_ROW = re.compile(r"^\| `([^`]+)` \| (\d+) \|", re.M)


def figures(section: str) -> dict[str, int]:
    """The `key` -> figure rows of one ``## section`` of the document."""
    text = DOC.read_text(encoding="utf-8")
    m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"no section {section!r} in {DOC.name}"
    rows = _ROW.findall(m.group(1))
    assert len({k for k, _ in rows}) == len(rows), f"a key repeats in {section}"
    return {key: int(value) for key, value in rows}


def test_bad_input_counts():
    counts = Counter(c.surface for c in test_bad_inputs.cases())
    expected = {surface: counts[surface] for surface in test_bad_inputs.SURFACES}
    expected["total"] = len(test_bad_inputs.cases())
    assert figures("Bad inputs") == expected


FUZZ_TESTS = {
    "dsl-random-text": test_roundtrip_hypothesis.test_fuzz_dsl_random_text,
    "examplejson-random-text": test_roundtrip_hypothesis.test_fuzz_examplejson_random_text,
    "random-bytes": test_roundtrip_hypothesis.test_fuzz_random_bytes,
    "dsl-mutations": test_roundtrip_hypothesis.test_fuzz_dsl_mutations,
    "examplejson-mutations": test_roundtrip_hypothesis.test_fuzz_examplejson_mutations,
    "dsl-corpus-mutations": test_fuzz.test_fuzz_dsl_parser_and_generators,
    "examplejson-corpus-mutations": test_fuzz.test_fuzz_examplejson_parser_and_generators,
    "spec-mutations": test_fuzz.test_fuzz_spec_loader,
    "catalog-mutations": test_fuzz.test_fuzz_op_catalog_loader,
    "bundle-bytes": test_fuzz.test_fuzz_bundle_bytes,
    "bundle-manifests": test_fuzz.test_fuzz_bundle_structure,
}
ONNX_FUZZ_TESTS = {"onnx-bytes": "test_fuzz_onnx_bytes", "onnx-structure": "test_fuzz_onnx_structure"}
"""tests/test_fuzz_onnx.py's targets, by name: that module needs onnx, this one does not."""


def _max_examples(test) -> int:
    return test._hypothesis_internal_use_settings.max_examples


def test_fuzz_examples():
    expected = dict(CI_EXAMPLES)
    expected.update({f"differential-{b}": n for b, n in DIFFERENTIAL_EXAMPLES.items()})
    expected["total"] = sum(CI_EXAMPLES.values()) + sum(DIFFERENTIAL_EXAMPLES.values())
    assert figures("Fuzzing") == expected
    assert set(FUZZ_TESTS) | set(ONNX_FUZZ_TESTS) == set(CI_EXAMPLES)
    tests = dict(FUZZ_TESTS)
    if importlib.util.find_spec("onnx") is not None:
        test_fuzz_onnx = importlib.import_module("test_fuzz_onnx")
        tests.update({key: getattr(test_fuzz_onnx, name) for key, name in ONNX_FUZZ_TESTS.items()})
    # ... and the tests really run that many (in CI; the long mode runs more)
    for key, test in tests.items():
        assert _max_examples(test) == examples(CI_EXAMPLES[key]), key
    for backend, n in DIFFERENTIAL_EXAMPLES.items():
        test = getattr(test_fuzz, f"test_differential_{backend}")
        if backend in test_fuzz.BACKENDS:
            assert _max_examples(test) == examples(n, compiled=True), backend


def test_sanitizer_runs():
    catalog = byoc.spec.load_catalog()
    golden = 0
    backends = sanitize_driver.compiled_backends()
    for backend in backends:
        for _, language, text in sanitize_driver.golden_cases():
            if language == "graph":
                program = byoc.parse(text.replace("@BACKEND", f"@{backend}"))
            else:
                program = offload_whole(byoc.parse(text, "examplejson"), backend)
            try:
                generate(program, catalog, byoc.load_backend)
            except GraphError:  # the backend's spec does not take it: the driver skips it
                continue
            golden += 1
    expected = {
        "golden": golden,
        "random": sum(sanitize_driver.RANDOM_PER_BACKEND[b] for b in backends),
        "canaries": len(sanitize_driver.CANARY),
    }
    assert figures("Sanitizers") == expected
    text = DOC.read_text(encoding="utf-8")
    assert f"the {len(sanitize_driver.golden_cases())} golden graphs" in text


@pytest.fixture(scope="module")
def kill_points(tmp_path_factory) -> dict[str, int]:
    """The file-system steps of each killed write, counted as tests/test_faults_kills.py does."""
    d = tmp_path_factory.mktemp("steps")
    (d / "old.graph").write_text(faults_support.GRAPH_OLD)
    (d / "new.graph").write_text(faults_support.GRAPH_NEW)
    assert faults_support.run(faults_support.byoc_cmd("gen", "old.graph", "-o", "ref"), d).returncode == 0
    assert (
        faults_support.run(faults_support.byoc_cmd("build", "old.graph", "-o", "ref.byoc"), d).returncode == 0
    )
    old = faults_support.snapshot(d / "ref")

    def replacing(name: str, **kw) -> int:
        test_faults_kills._fresh_gen_target(d, old, name)
        return test_faults_kills.steps_of(d, "gen", "new.graph", "-o", name, **kw)

    return {
        "gen-kill-replacing": replacing("a"),
        "gen-kill-new-directory": test_faults_kills.steps_of(d, "gen", "new.graph", "-o", "b"),
        "gen-kill-fallback": replacing("c", env={**__import__("os").environ, "BYOC_TEST_NO_EXCHANGE": "1"}),
        "build-kill": test_faults_kills.steps_of(d, "build", "new.graph", "-o", "ref.byoc"),
    }


def test_fault_scenarios(kill_points):
    full_disk_tests = [n for n in dir(test_faults_disk) if n.startswith("test_full_disk_")]
    assert len(full_disk_tests) == len(test_faults_disk.FULL_DISK_WRITERS)
    expected = {
        **kill_points,
        "timed-kills": 2 * len(test_faults_kills.TIMED_KILL_DELAYS),
        "cache-corruptions": len(test_faults_disk.CACHE_CORRUPTIONS),
        "bundle-cache-corruptions": len(test_faults_disk.BUNDLE_CORRUPTIONS),
        "full-disk": len(test_faults_disk.FULL_DISK_WRITERS),
        "unwritable-outputs": len(test_faults_disk.READ_ONLY_COMMANDS)
        + len(test_faults_disk.UNWRITABLE_OUTPUTS),
        "threads": len(test_faults_threads.THREAD_BACKENDS) + 1,
    }
    assert figures("Faults") == expected
    text = DOC.read_text(encoding="utf-8")
    assert f"{test_faults_threads.THREADS} threads x {test_faults_threads.CALLS} calls" in text
