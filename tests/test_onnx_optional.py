"""onnx is an optional dependency: without it, ``byoc import`` is a clean usage error
naming the extra to install, and nothing else of byoc imports onnx."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

BLOCK_ONNX = "import sys; sys.modules['onnx'] = None; "  # `import onnx` now raises ImportError


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_ONNX + code], capture_output=True, text=True)


def test_import_without_onnx_names_the_extra(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07")
    out = run(f"from byoc.cli import main; sys.exit(main(['import', {str(model)!r}]))")
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("usage error: importing ONNX models needs the onnx package")
    assert "pip install 'byoc-codegen[onnx]'" in out.stderr


def test_the_rest_of_byoc_works_without_onnx():
    code = (
        "import byoc, numpy as np; "
        "p = byoc.parse('graph main(x: float32[2]) { return relu(x) }'); "
        "print(byoc.evaluate(p.functions[0], {'x': np.array([-1, 2], np.float32)})[0].tolist())"
    )
    out = run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(np.maximum(np.array([-1, 2], np.float32), 0).tolist())


def test_onnx_models_used_directly_without_onnx_name_the_extra(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07")
    for argv in (["run", str(model), "--backend", "json"], ["partition", str(model), "--backend", "json"]):
        out = run(f"from byoc.cli import main; sys.exit(main({argv!r}))")
        assert out.returncode == 2, out.stderr
        assert "Traceback" not in out.stderr
        assert out.stderr.startswith("usage error: importing ONNX models needs the onnx package")
    code = (
        "import byoc\nfrom byoc.errors import UsageError\n"
        f"try:\n    byoc.build({str(model)!r}, backends=['json'])\n"
        "except UsageError as exc:\n    print(exc.render())\n"
    )
    out = run(code)
    assert out.returncode == 0, out.stderr
    assert "pip install 'byoc-codegen[onnx]'" in out.stdout


def test_onnx_test_data_without_onnx_names_the_extra(tmp_path):
    graph = tmp_path / "g.graph"
    graph.write_text("graph main(x: float32[2]) {\n  y = @json { return relu(x) }\n  return y\n}\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "input_0.pb").write_bytes(b"\x08\x01")
    argv = ["run", str(graph), "--inputs", str(tmp_path / "data")]
    out = run(f"from byoc.cli import main; sys.exit(main({argv!r}))")
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("usage error: reading ONNX test data needs the onnx package")
    assert "pip install 'byoc-codegen[onnx]'" in out.stderr
