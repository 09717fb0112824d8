"""Without the optional library extras (byoc-codegen[dnnl], byoc-codegen[blas]) the suite still passes.

Every test module that names a library backend, or that goes over every shipped
backend spec, runs again in a subprocess in which oneDNN's wheels and OpenBLAS's
module are hidden: the library backends' tests must skip with the install hint, and
everything else must pass. An item parametrised by backends none of which needs a
library (``[fused]``, ``[llama-fused,ccompiler]``, the ONNX suite's
``TestFusedCcompilerReal``) is left out of that run (:func:`needed_without_libraries`):
it builds and runs what it would with the libraries present, which the main run checks;
running it again took most of the nested run's time (20 of its 21 minutes on an AMD
EPYC with AVX2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
NESTED = "BYOC_TEST_WITHOUT_LIBRARIES"

HIDE = """\
import importlib.metadata as metadata
import sys

sys.modules["scipy_openblas32"] = None  # the cblas backend's library
_found = metadata.distribution


def _distribution(name):  # the dnnl backend's wheels
    if name.startswith("onednn"):
        raise metadata.PackageNotFoundError(name)
    return _found(name)


metadata.distribution = _distribution
"""

TOUCHES_LIBRARIES = re.compile(
    r"dnnl|cblas|missing_library|backends\" ?/|SPECS\.glob|backend_files|list_backends"
)


def backends() -> tuple[frozenset[str], frozenset[str]]:
    """The shipped backends that need a library (``requires:``), and the others."""
    import byoc

    specs = byoc.list_backends()
    return (
        frozenset(s.name for s in specs if s.requires),
        frozenset(s.name for s in specs if not s.requires),
    )


def named_backends(nodeid: str, names: frozenset[str]) -> set[str]:
    """The backends of ``names`` that a test item's id names: a word of its parameters
    (``[mlp-fused,ccompiler]``) or of its class's CamelCase name
    (``TestFusedCcompilerReal``); not its module or function name."""
    words: set[str] = set()
    for part in nodeid.split("::")[1:]:
        params = re.search(r"\[(.*)\]$", part)
        if params:
            words |= set(re.split(r"[-,_\s/]+", params.group(1).lower()))
            part = part[: params.start()]
        if part.startswith("Test"):
            words |= {w.lower() for w in re.findall(r"[A-Z][a-z0-9]*", part)}
    return words & names


def needed_without_libraries(nodeid: str, library: frozenset[str], other: frozenset[str]) -> bool:
    """Whether the nested run runs the item: unless it names backends (named_backends)
    and none of them needs a library."""
    named = named_backends(nodeid, library | other)
    return not named or bool(named & library)


def modules() -> list[str]:
    here = Path(__file__).name
    return sorted(
        p.name for p in TESTS.glob("test_*.py") if p.name != here and TOUCHES_LIBRARIES.search(p.read_text())
    )


def test_the_suite_passes_with_the_libraries_hidden(tmp_path):
    if os.environ.get(NESTED):  # the nested run does not run itself again
        return
    (tmp_path / "sitecustomize.py").write_text(HIDE)
    names = modules()
    assert {"test_gen_dnnl.py", "test_gen_cblas.py", "test_fuzz.py", "test_requirements.py"} <= set(names)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), NESTED: "1"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rfs",  # failures and skips in the summary: the report names what failed
            *(f"tests/{n}" for n in names),
        ],
        cwd=TESTS.parent,
        env=env,
        capture_output=True,
        text=True,
    )
    failed = [line for line in out.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    report = "\n".join(failed) + "\n" + out.stdout[-2500:]
    assert out.returncode == 0, report
    assert re.search(r"\d+ passed", report), report
    # the skip reasons, searched in the whole output: the report shows only its tail
    assert "needs onednn" in out.stdout and "pip install 'byoc-codegen[dnnl]'" in out.stdout, report
    assert "needs openblas" in out.stdout and "pip install 'byoc-codegen[blas]'" in out.stdout, report


@pytest.mark.parametrize(
    "nodeid, needed",
    [
        ("tests/test_sweep.py::test_every_shipped_backend_passes_the_sweep[fused]", False),
        ("tests/test_onnx_zoo.py::test_zoo_model_matches_onnxruntime[llama-fused,ccompiler]", False),
        ("tests/test_onnx_zoo.py::test_zoo_model_matches_onnxruntime[llama-dnnl,fused]", True),
        ("tests/test_onnx_backend_suite.py::TestFusedCcompilerReal::test_resnet50_cpu", False),
        ("tests/test_onnx_backend_suite.py::TestDnnlFusedNode::test_abs_cpu", True),
        ("tests/test_onnx_backend_suite.py::TestCblasFusedNode::test_abs_cpu", True),
        ("tests/test_fuzz.py::test_fuzz_spec_loader", True),  # names no backend: it may go over all
        ("tests/test_fused_options.py::test_fused_threads", True),  # a function's name is not a parameter
        ("tests/test_gen_dnnl.py::test_golden[net_mlp]", True),
    ],
)
def test_the_nested_run_leaves_out_only_items_of_backends_without_libraries(nodeid, needed):
    library, other = backends()
    assert library == {"dnnl", "cblas"} and {"fused", "json", "ccompiler"} <= other
    assert needed_without_libraries(nodeid, library, other) is needed
