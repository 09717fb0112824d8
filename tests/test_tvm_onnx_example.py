"""examples/relax/run_onnx.py: an ONNX model through TVM's relax importer, offloaded to
byoc backends (a shipped spec, and the out-of-tree tinynpu spec beside the script),
run in the relax VM, exported and run again in a process that cannot import byoc,
against ONNX Runtime."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from libraries import missing_library

if importlib.util.find_spec("tvm") is None:  # the example imports it (not collection: seconds)
    pytest.skip("could not import 'tvm': pip install apache-tvm", allow_module_level=True)
pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "relax" / "run_onnx.py"
LIGHT_RESNET50 = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"


def run_example(*args: str, cwd: Path) -> str:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def regions(stdout: str) -> int:
    line = next(ln for ln in stdout.splitlines() if "byoc regions" in ln)
    return int(line.split(": ")[1].split()[0])


def checked(stdout: str) -> list[str]:
    """The comparison lines; every one must say 'matches'."""
    lines = [ln for ln in stdout.splitlines() if ", output " in ln]
    assert lines and all(": matches (" in ln for ln in lines), stdout
    assert any("exported, fresh process vs ONNX Runtime" in ln for ln in lines), stdout
    assert "result: every output matches" in stdout
    return lines


@pytest.mark.parametrize("backend", ["fused", "dnnl,fused", "ccompiler"])
def test_the_tiny_cnn_through_relax_matches_onnxruntime(backend, tmp_path):
    reason = missing_library("dnnl") if "dnnl" in backend else None
    if reason:
        pytest.skip(reason)
    out = run_example("--backend", backend, "-o", str(tmp_path / "cnn.so"), "--repeat", "2", cwd=tmp_path)
    checked(out)
    assert regions(out) >= 1
    assert (tmp_path / "cnn.so").is_file()


def test_an_out_of_tree_spec_takes_what_it_maps_and_tvm_the_rest(tmp_path):
    out = run_example(
        "--backend", "tinynpu", "--spec-path", str(SCRIPT.parent), "--repeat", "2", cwd=tmp_path
    )
    checked(out)
    assert regions(out) >= 1
    left = next(ln for ln in out.splitlines() if "left in TVM:" in ln)
    assert "nn.conv2d" in left  # tinynpu maps relu and add only
    assert "nn.relu" not in left


def test_without_onnxruntime_the_reference_is_tvm_alone(tmp_path):
    """The script's fallback when onnxruntime is absent: TVM's own build."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class NoOrt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'onnxruntime' or name.startswith('onnxruntime.'):\n"
        "            raise ImportError('hidden')\n"
        "sys.meta_path.insert(0, NoOrt())\n",
        encoding="utf-8",
    )
    import os

    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--repeat", "1"], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TVM alone: build" in proc.stdout
    assert "vs TVM alone, output 0: matches" in proc.stdout


@pytest.mark.parametrize("backend", ["dnnl,fused", "fused"])
def test_the_light_resnet50_through_relax_matches_onnxruntime(backend, tmp_path):
    """ONNX's light ResNet-50, its constant weights made random (and its logits an
    output), with byoc's backends as relax codegens."""
    reason = missing_library("dnnl") if "dnnl" in backend else None
    if reason:
        pytest.skip(reason)
    out = run_example(
        str(LIGHT_RESNET50), "--backend", backend, "--random-weights", "1", "--repeat", "3", cwd=tmp_path
    )
    lines = checked(out)
    assert any(", output 1:" in ln for ln in lines)  # the logits
    assert regions(out) >= 10
    left = next(ln for ln in out.splitlines() if "left in TVM:" in ln)
    assert "nn.conv2d" not in left and "matmul" not in left
