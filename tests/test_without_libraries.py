"""Without the optional library extras (byoc-codegen[dnnl], byoc-codegen[blas]) the suite still passes.

Every test module that names a library backend, or that goes over every shipped
backend spec, runs again in a subprocess in which oneDNN's wheels and OpenBLAS's
module are hidden: the library backends' tests must skip with the install hint, and
everything else must pass."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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
