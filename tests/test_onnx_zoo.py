"""The zoo of today's architectures (examples/zoo: BERT in two exporter styles, GPT-2,
Llama with decomposed and with opset-23 ops, ViT, MobileNetV3, a U-Net, an LSTM and a
GRU) runs through ``byoc run MODEL.onnx --inputs DIR`` on ``json``, ``fused,ccompiler``
and ``dnnl,fused``, and every output matches what ONNX Runtime computed when the
script wrote the model (``test_data_set_0/output_*.pb``).

Tolerances: ONNX's (rtol 1e-3) with an absolute floor of 1e-5. A logit is a sum of 64
products of magnitude up to 20, so float32 rounding in any order of summation leaves
about 1e-6 in it; where such a sum cancels to 1e-4 (GPT-2's tied head has one),
ONNX's own floor of 1e-7 would judge that rounding, not the model.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_cli
from libraries import missing_library

pytestmark = pytest.mark.network
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

ZOO = EXAMPLES / "zoo"
MODELS = sorted(p.name for p in ZOO.iterdir() if (p / "model.onnx").exists())
CONFIGURATIONS = {
    "json": ["--backend", "json"],
    "fused,ccompiler": ["--backend", "fused", "--backend", "ccompiler"],
    "dnnl,fused": ["--backend", "dnnl", "--backend", "fused"],
}
TOLERANCES = ["--rtol", "1e-3", "--atol", "1e-5"]


def make_zoo():
    spec = importlib.util.spec_from_file_location("make_zoo", ZOO / "make_zoo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_zoo"] = module
    spec.loader.exec_module(module)
    return module


def test_the_zoo_holds_every_model_of_the_script():
    assert MODELS == sorted(make_zoo().MODELS)


@pytest.mark.parametrize("config", list(CONFIGURATIONS))
@pytest.mark.parametrize("name", MODELS)
def test_zoo_model_matches_onnxruntime(capsys, name, config):
    if config.startswith("dnnl") and missing_library("dnnl"):
        pytest.skip(missing_library("dnnl"))
    model = ZOO / name / "model.onnx"
    data = ZOO / name / "test_data_set_0"
    rc, out, err = run_cli(capsys, "run", model, *CONFIGURATIONS[config], "--inputs", data, *TOLERANCES)
    assert rc == 0, out + err
    assert out.splitlines()[-1] == (
        f"result: every output matches the numpy reference and {data}/output_*.pb"
    ), out


def test_the_script_writes_the_same_models_and_inputs(tmp_path):
    """The zoo is reproducible: the script writes the committed models and inputs
    byte for byte (its weights come from numpy's RandomState, a stream numpy keeps
    stable); the outputs are ONNX Runtime's on the machine that runs it, so they are
    compared with the committed ones at the zoo's tolerances."""
    import numpy as np
    from onnx import numpy_helper

    module = make_zoo()
    for name in MODELS:
        module.write(tmp_path, name)
        assert (tmp_path / name / "model.onnx").read_bytes() == (ZOO / name / "model.onnx").read_bytes(), name
        for new in sorted((tmp_path / name / "test_data_set_0").iterdir()):
            old = ZOO / name / "test_data_set_0" / new.name
            if new.name.startswith("input"):
                assert new.read_bytes() == old.read_bytes(), (name, new.name)
            else:
                a, b = (numpy_helper.to_array(onnx.load_tensor(str(p))) for p in (new, old))
                np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5, err_msg=f"{name} {new.name}")


def test_the_zoo_is_small():
    """Small enough to keep in the repository and run in seconds."""
    total = sum(p.stat().st_size for p in Path(ZOO).rglob("*") if p.is_file())
    assert total < 4_000_000, total
