"""byoc without a library backend's packages (OpenBLAS, oneDNN hidden in a subprocess):
``byoc backends`` marks them missing with the install hint, and a build or a bundle's
load is a clean error."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import EXAMPLES

import byoc

pytest.importorskip("scipy_openblas32", reason="these tests use byoc-codegen[blas]")

MLP = EXAMPLES / "mlp.graph"


# ------------------------------------------------------------ without the libraries

HIDE = "import sys; sys.modules['scipy_openblas32'] = None; "


def run_hidden(*args: str) -> subprocess.CompletedProcess:
    code = HIDE + f"from byoc.cli import main; sys.exit(main({list(args)!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_byoc_backends_marks_cblas_missing_with_the_install_hint():
    out = run_hidden("backends")
    assert out.returncode == 0, out.stderr
    (line,) = [line for line in out.stdout.splitlines() if line.strip().startswith("cblas:")]
    assert "openblas: missing" in line and "pip install 'byoc-codegen[blas]'" in line
    found = subprocess.run(
        [sys.executable, "-c", "from byoc.cli import main; main(['backends'])"],
        capture_output=True,
        text=True,
    )
    (line,) = [line for line in found.stdout.splitlines() if line.strip().startswith("cblas:")]
    assert "openblas: found" in line and "libscipy_openblas" in line


def test_building_on_cblas_without_openblas_is_a_clean_error():
    out = run_hidden("run", str(MLP), "--backend", "cblas")
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("usage error: backend cblas needs openblas, which is not installed")
    assert "spec/backends/cblas.yaml:" in out.stderr
    assert "hint: pip install 'byoc-codegen[blas]'" in out.stderr


def test_loading_a_bundle_without_openblas_is_a_clean_error(tmp_path):
    path = tmp_path / "mlp.byoc"
    byoc.build(MLP, backends=["cblas"]).save(path)
    code = HIDE + (
        "from byoc.runtime import load\n"
        "from byoc.errors import RuntimeFailure\n"
        f"try:\n    load({str(path)!r})\n"
        "except RuntimeFailure as exc:\n    print(exc.render())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "backend cblas needs openblas, which is not installed here" in out.stdout
    assert "pip install 'byoc-codegen[blas]'" in out.stdout


HIDE_ONEDNN = (
    "import sys, importlib.metadata as metadata\n"
    "found = metadata.distribution\n"
    "def distribution(name):\n"
    "    if name.startswith('onednn'):\n"
    "        raise metadata.PackageNotFoundError(name)\n"
    "    return found(name)\n"
    "metadata.distribution = distribution\n"
)


def test_building_on_dnnl_without_onednn_is_a_clean_error():
    """The dnnl spec finds oneDNN in the files of its wheels; without them, `byoc
    backends` says so with the install hint, and a build is a located usage error."""
    listing = HIDE_ONEDNN + "from byoc.cli import main\nsys.exit(main(['backends']))\n"
    out = subprocess.run([sys.executable, "-c", listing], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    (line,) = [line for line in out.stdout.splitlines() if line.strip().startswith("dnnl:")]
    assert "onednn: missing" in line and "pip install 'byoc-codegen[dnnl]'" in line
    run = (
        HIDE_ONEDNN
        + f"from byoc.cli import main\nsys.exit(main(['run', {str(MLP)!r}, '--backend', 'dnnl']))\n"
    )
    out = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("usage error: backend dnnl needs onednn, which is not installed")
    assert "spec/backends/dnnl/dnnl.yaml:" in out.stderr
    assert "hint: pip install 'byoc-codegen[dnnl]'" in out.stderr
