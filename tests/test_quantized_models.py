"""The quantised example models (examples/quantized, written by its make_models.py with
ONNX Runtime's ``quantize_static``): a ResNet-style CNN in QDQ format per tensor and
per channel and in QOperator format (QLinearConv, QLinearMatMul), and a two-layer MLP
in QDQ format per tensor and per channel. Each runs through byoc on ``json``,
``fused,ccompiler``, ``ccompiler`` and ``dnnl,fused`` and computes, bit for bit, what
ONNX Runtime computes with its graph optimisations off (the QDQ nodes run as written,
not fused into ORT's integer kernels), and for the QOperator model what ONNX's
reference evaluator computes, which ONNX Runtime matches on a CPU with VNNI (its
QLinearConv saturates on x86 without it: make_models.reference); the README's ``byoc
run`` commands pass; the script writes the committed files again.

Why exact and not within a tolerance: the outputs are dequantised (the MLP's and the
QDQ CNN's) or a float bias added to a dequantised value (the QOperator CNN's), so they
take one of 256 values per scale. The float sums before each QuantizeLinear (Conv,
MatMul, GlobalAveragePool) are in an order ONNX leaves to the implementation: byoc's
and ORT's differ in the last bits for about three in four of the conv outputs, by at
most 1e-4 of a quantum, so a value's code differs only when it lies that close to a
rounding tie: about one conv output in 50,000 (measured), and the average pool and
the requantisations after it absorb a one-code change of one of its 256 inputs.
QLinearConv's and QLinearMatMul's integer sums are exact on both sides (on ORT's side,
with VNNI); their requantisation (sum times ``x_scale * w_scale / y_scale``) is rounded to float32 by
ORT and kept in float64 by byoc (byoc/onnx/qlinear.py), which differ only where the
product lies within half a float32 ulp of a half-integer. Every model matched ORT bit
for bit on 200 seeded inputs on each of the four configurations when this test was
written; the test checks the committed input and three seeded ones.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
from conftest import EXAMPLES, run_cli
from libraries import missing_library

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime.quantization")

from onnx import numpy_helper  # noqa: E402

from byoc.onnx.backend import backend_for  # noqa: E402

FOLDER = EXAMPLES / "quantized"
CONFIGS = ["json", "fused,ccompiler", "ccompiler", "dnnl,fused"]
MODELS = ["cnn_qdq", "cnn_qdq_per_channel", "cnn_qoperator", "mlp_qdq", "mlp_qdq_per_channel"]


def make_models():
    """examples/quantized/make_models.py as a module."""
    spec = importlib.util.spec_from_file_location("quantized_make_models", FOLDER / "make_models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["quantized_make_models"] = module
    spec.loader.exec_module(module)
    return module


def tensor(path) -> np.ndarray:
    return numpy_helper.to_array(onnx.load_tensor(str(path)))


def test_the_folder_holds_every_model_of_the_script():
    assert sorted(make_models().QUANTISED) == sorted(MODELS)
    assert sorted(p.stem for p in FOLDER.glob("*.onnx")) == sorted(MODELS)


@pytest.mark.parametrize("name", MODELS)
def test_a_model_is_what_its_name_says(name):
    """Quantised by quantize_static as its name says; ONNX's own domain only; small."""
    m = onnx.load(FOLDER / f"{name}.onnx")
    ops = {n.op_type for n in m.graph.node}
    assert {n.domain for n in m.graph.node} <= {"", "ai.onnx"}
    assert (FOLDER / f"{name}.onnx").stat().st_size < 100_000
    if name == "cnn_qoperator":
        assert {"QLinearConv", "QLinearMatMul", "QuantizeLinear", "DequantizeLinear"} <= ops
        assert "Conv" not in ops and "MatMul" not in ops
        return
    assert {"QuantizeLinear", "DequantizeLinear", "Conv" if name.startswith("cnn") else "MatMul"} <= ops
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    weight_scales = [
        inits[n.input[1]]
        for n in m.graph.node
        if n.op_type == "DequantizeLinear" and n.input[0].endswith(".w_quantized")
    ]
    assert weight_scales
    # per channel: a vector of weight scales (one per output channel), else one scale
    assert all((s.size > 1) == name.endswith("per_channel") for s in weight_scales)


def inputs(name: str) -> list[np.ndarray]:
    """The committed input and three seeded ones (the last two larger than the
    calibration data: some activations saturate)."""
    x = tensor(FOLDER / name / "test_data_set_0" / "input_0.pb")
    rng = np.random.default_rng(5)
    return [x] + [(rng.standard_normal(x.shape) * scale).astype(np.float32) for scale in (1, 2, 4)]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("name", MODELS)
def test_quantized_model_matches_onnx_exactly(name, config):
    if config.startswith("dnnl") and missing_library("dnnl"):
        pytest.skip(missing_library("dnnl"))
    m = onnx.load(FOLDER / f"{name}.onnx")
    rep = backend_for(config).prepare(m)
    reference = make_models().reference
    for k, x in enumerate(inputs(name)):
        want = reference(m, x)
        (got,) = rep.run([x])
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(got, want, err_msg=f"{name} on {config}, input {k}")


def test_onnxruntime_computes_the_qoperator_reference_where_its_integer_kernels_are_exact():
    """The QOperator model's reference is ONNX's evaluator (make_models.reference);
    ONNX Runtime gives the same bits where its uint8-by-int8 kernels do not saturate:
    on a CPU with VNNI (or not x86)."""
    from benchmarks.peers import int8_saturation_caveat

    caveat = int8_saturation_caveat("ONNX Runtime")
    if caveat:
        pytest.skip(caveat)
    module = make_models()
    m = onnx.load(FOLDER / "cnn_qoperator.onnx")
    for k, x in enumerate(inputs("cnn_qoperator")):
        np.testing.assert_array_equal(
            module.onnxruntime_result(m, x), module.reference(m, x), err_msg=f"input {k}"
        )


@pytest.mark.parametrize("name", MODELS)
def test_the_readme_command_runs(capsys, name):
    """``byoc run NAME.onnx --backend fused,ccompiler --inputs NAME/test_data_set_0``:
    byoc's output matches the numpy reference and ORT's output_0.pb."""
    data = FOLDER / name / "test_data_set_0"
    rc, out, err = run_cli(
        capsys, "run", FOLDER / f"{name}.onnx", "--backend", "fused,ccompiler", "--inputs", data
    )
    assert rc == 0, out + err
    assert (
        out.splitlines()[-1] == f"result: every output matches the numpy reference and {data}/output_*.pb"
    ), out


def test_the_script_writes_the_same_models_and_data(tmp_path):
    """make_models.py is deterministic: it writes the committed models and inputs byte
    for byte (seeded weights and calibration data; quantize_static is deterministic
    for a given onnxruntime), and ORT's outputs for them bit for bit (dequantised
    values: see the module doc)."""
    assert make_models().main([str(tmp_path)]) == 0
    for name in MODELS:
        assert (tmp_path / f"{name}.onnx").read_bytes() == (FOLDER / f"{name}.onnx").read_bytes(), name
        new, old = tmp_path / name / "test_data_set_0", FOLDER / name / "test_data_set_0"
        assert (
            sorted(p.name for p in new.iterdir())
            == sorted(p.name for p in old.iterdir())
            == [
                "input_0.pb",
                "output_0.pb",
            ]
        )
        assert (new / "input_0.pb").read_bytes() == (old / "input_0.pb").read_bytes(), name
        np.testing.assert_array_equal(tensor(new / "output_0.pb"), tensor(old / "output_0.pb"), err_msg=name)
