"""The dtypes of issue 29 in ``byoc run``: random inputs, ``--inputs`` and
``--save-outputs`` for every dtype, its per-dtype default tolerances, bundles and ONNX
test data of the new dtypes."""

from __future__ import annotations

import io
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import run_cli

from byoc.cli.compare import DEFAULT_TOLERANCES, compare
from byoc.cli.run_inputs import random_array
from byoc.errors import RuntimeFailure
from byoc.ir import DTYPES, TensorType, is_integer
from byoc.npz_files import BFLOAT16_MARKER, npz_bytes, read_npz

BF16 = np.dtype(ml_dtypes.bfloat16)

# ------------------------------------------------------------------ byoc run

NEW_GRAPH = """\
graph main(h: float16[2, 3], b: bfloat16[2, 3], m: bool[2, 3], u: uint16[2, 3], w: uint64[4], s: int16[3]) {
  r = @json {
    t = negative(h)
    k = const float16[3] [0.1, -2.5, 65504]
    return add(t, k)
  }
  q = @json { return multiply(b, b) }
  return r, q, m, u, w, s
}
"""


@pytest.fixture
def new_graph(tmp_path: Path) -> Path:
    path = tmp_path / "g.graph"
    path.write_text(NEW_GRAPH)
    return path


def test_byoc_run_draws_inputs_of_every_new_dtype_and_matches(capsys, new_graph, tmp_path):
    out_file = tmp_path / "out.npz"
    rc, out, err = run_cli(capsys, "run", new_graph, "--save-outputs", out_file)
    assert rc == 0, out + err
    for dtype in ("float16", "bfloat16", "bool", "uint16", "uint64", "int16"):
        assert f" {dtype} " in out
    saved = read_npz(str(out_file), "out", RuntimeFailure)
    assert saved["output_1"].dtype == BF16  # bfloat16 outputs saved in byoc's npz form
    raw = np.load(out_file, allow_pickle=False)
    assert "output_1" in list(raw[BFLOAT16_MARKER])


def test_byoc_run_takes_npz_inputs_of_the_new_dtypes(capsys, new_graph, tmp_path):
    rng = np.random.default_rng(5)
    arrays = {
        "h": rng.uniform(-4, 4, (2, 3)).astype(np.float16),
        "b": rng.uniform(-4, 4, (2, 3)).astype(BF16),
        "m": rng.integers(0, 2, (2, 3)).astype(bool),
        "u": rng.integers(0, 60000, (2, 3)).astype(np.uint16),
        "w": np.array([0, 1, 2**63, 2**64 - 1], np.uint64),
        "s": np.array([-32768, 0, 32767], np.int16),
    }
    (tmp_path / "in.npz").write_bytes(npz_bytes(arrays))
    out_file = tmp_path / "out.npz"
    rc, out, err = run_cli(
        capsys, "run", new_graph, "--inputs", tmp_path / "in.npz", "--save-outputs", out_file
    )
    assert rc == 0, out + err
    saved = read_npz(str(out_file), "out", RuntimeFailure)
    for k, name in enumerate("muws", start=2):  # returned as they are
        assert saved[f"output_{k}"].dtype == arrays[name].dtype
        assert saved[f"output_{k}"].tobytes() == arrays[name].tobytes()
    square = (arrays["b"].astype(np.float64) ** 2).astype(BF16)
    assert saved["output_1"].tobytes() == square.tobytes()


def test_byoc_run_refuses_a_float32_array_for_a_float16_input(capsys, new_graph, tmp_path):
    rng = np.random.default_rng(5)
    arrays = {"h": rng.uniform(-4, 4, (2, 3)).astype(np.float32)}
    (tmp_path / "in.npz").write_bytes(npz_bytes(arrays))
    rc, out, err = run_cli(capsys, "run", new_graph, "--inputs", tmp_path / "in.npz")
    assert rc == 2
    assert "--inputs array 'h' is float32[2, 3], but main takes float16[2, 3]" in err


def test_a_bundle_of_the_new_dtypes_runs(capsys, new_graph, tmp_path):
    bundle = tmp_path / "m.byoc"
    rc, out, err = run_cli(capsys, "build", new_graph, "-o", bundle)
    assert rc == 0, out + err
    from byoc.runtime import load

    model = load(bundle)
    executor = model.executor("main")
    assert [executor.input_type(n).dtype for n in executor.input_names] == [
        "float16",
        "bfloat16",
        "bool",
        "uint16",
        "uint64",
        "int16",
    ]
    rc, out, err = run_cli(capsys, "run", bundle)
    assert rc == 0, out + err
    with pytest.raises(RuntimeFailure, match="input 'h' must be float16"):
        executor.set_input("h", np.zeros((2, 3), np.float32))


def test_run_help_shows_the_default_tolerances(capsys):
    with pytest.raises(SystemExit):
        run_cli(capsys, "run", "--help")
    text = " ".join(capsys.readouterr().out.split())
    rtol_help, atol_help = text.split("--atol")[1], text.split("--atol")[2]
    for dtype, (rtol, atol) in DEFAULT_TOLERANCES.items():
        assert f"{_short(rtol)} {dtype}" in rtol_help
        assert f"{_short(atol)} {dtype}" in atol_help


def _short(x: float) -> str:
    """``5e-3``, as the help writes a tolerance."""
    mantissa, exponent = f"{x:e}".split("e")
    return f"{float(mantissa):g}e-{int(exponent[1:])}"


# ------------------------------------------------------------------ comparison


def _ulps(want: np.ndarray, k: int) -> np.ndarray:
    """``want`` moved ``k`` units in the last place of its dtype, away from zero."""
    bits = want.view(np.uint16).astype(np.int32) + k
    return bits.astype(np.uint16).view(want.dtype)


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=["float16", "bfloat16"])
def test_half_outputs_a_few_ulps_off_match_by_default(dtype):
    want = np.random.default_rng(4).uniform(0.5, 4, 50).astype(dtype)
    for k in (1, 2, 3):
        status, _ = compare(_ulps(want, k), want, None, None)
        assert status == "ok", k
    far = (want.astype(np.float64) * 1.1).astype(dtype)  # 10 %: beyond any tolerance
    assert compare(far, want, None, None)[0] == "MISMATCH"
    assert compare(_ulps(want, 1), want, 0.0, 0.0)[0] == "MISMATCH"  # overridable


def test_half_tolerances_are_looser_than_float32_and_ordered_by_precision():
    f32, f16, bf16 = (DEFAULT_TOLERANCES[d] for d in ("float32", "float16", "bfloat16"))
    for k in range(2):
        assert f32[k] < f16[k] < bf16[k]
    # rtol covers a few units in the last place at 1.0: float16's is 2**-10, bfloat16's 2**-7
    assert 2 * 2**-10 <= f16[0] <= 10 * 2**-10
    assert 2 * 2**-7 <= bf16[0] <= 10 * 2**-7


def test_bfloat16_comparison_reports_the_error_in_doubles():
    want = np.array([1.0, 2.0, 300.0], np.float32).astype(BF16)
    got = np.array([1.0, 2.0, 302.0], np.float32).astype(BF16)
    status, error = compare(got, want, None, None)
    assert float(error) == float(got.astype(np.float64)[2] - want.astype(np.float64)[2])
    assert status == "ok"  # 2/300 = 0.7 %, one bfloat16 ulp at 300


def test_integer_and_bool_outputs_must_be_equal():
    big = np.array([2**64 - 1, 5], np.uint64)
    status, error = compare(big - np.array([1, 0], np.uint64), big, 1.0, 1.0)
    assert (status, error) == ("MISMATCH", "1")  # no wrap-around: the difference is 1
    assert compare(big, big.copy(), None, None) == ("ok", "0")
    flags = np.array([True, False, True])
    assert compare(~flags, flags, 1.0, 1.0)[0] == "MISMATCH"
    assert compare(flags, flags.copy(), None, None) == ("ok", "0")
    small = np.array([-32768, 32767], np.int16)
    assert compare(small[::-1].copy(), small, None, None) == ("MISMATCH", "65535")


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_inputs_fit_their_dtype(dtype):
    array = random_array(np.random.default_rng(0), TensorType((400,), dtype))
    assert array.dtype == np.dtype(dtype) and array.shape == (400,)
    if dtype == "bool":
        assert 100 < int(array.sum()) < 300  # both values, about evenly
    elif is_integer(dtype):
        low = 0 if dtype.startswith("u") else -100
        assert low <= int(array.min()) and int(array.max()) <= 100
        assert len(np.unique(array)) > 20
    else:
        values = array.astype(np.float64)
        assert np.isfinite(values).all() and (np.abs(values) <= 2).all()
        assert len(np.unique(values)) > 20


# ------------------------------------------------------------------ ONNX test data


def _tensor_file(path: Path, tensor) -> Path:
    path.write_bytes(tensor.SerializeToString())
    return path


def test_onnx_test_data_of_the_new_dtypes(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from byoc.onnx.test_data import read_tensor

    values = [1.5, -2.0, 3.25, 0.1]
    want = np.array(values, np.float32).astype(BF16)
    raw = numpy_helper.from_array(want)
    assert raw.HasField("raw_data")
    as_ints = helper.make_tensor("x", TensorProto.BFLOAT16, [4], values)
    assert not as_ints.HasField("raw_data") and len(as_ints.int32_data) == 4
    for name, tensor in (("raw", raw), ("ints", as_ints)):
        got = read_tensor(_tensor_file(tmp_path / f"{name}.pb", tensor))
        assert got.dtype == BF16 and got.tobytes() == want.tobytes(), name
    half = np.array(values, np.float16)
    for tensor in (numpy_helper.from_array(half), helper.make_tensor("x", TensorProto.FLOAT16, [4], values)):
        got = read_tensor(_tensor_file(tmp_path / "h.pb", tensor))
        assert got.dtype == np.float16 and got.tobytes() == half.tobytes()
    flags = np.array([True, False, False, True])
    for tensor in (
        numpy_helper.from_array(flags),
        helper.make_tensor("x", TensorProto.BOOL, [4], flags.tolist()),
    ):
        got = read_tensor(_tensor_file(tmp_path / "b.pb", tensor))
        assert got.dtype == np.bool_ and np.array_equal(got, flags)
    big = np.array([2**64 - 1, 0], np.uint64)
    got = read_tensor(_tensor_file(tmp_path / "u.pb", numpy_helper.from_array(big)))
    assert got.dtype == np.uint64 and np.array_equal(got, big)
    assert onnx is not None


def test_npz_reads_of_supplied_inputs_keep_bfloat16_bits():
    h = np.array([np.nan, -0.0, 1e38], np.float32).astype(BF16)
    back = read_npz(io.BytesIO(npz_bytes({"h": h})), "x", RuntimeFailure)["h"]
    assert back.dtype == BF16 and back.tobytes() == h.tobytes()


def test_against_stored_outputs_half_outputs_keep_their_own_tolerances(capsys):
    """ONNX's test tolerance (rtol 1e-3) is finer than a bfloat16's last place: a half
    output is held to its dtype's defaults, float32 to ONNX's."""
    from byoc.cli.compare import report

    want16 = np.random.default_rng(8).uniform(0.5, 4, 20).astype(BF16)
    assert report([_ulps(want16, 2)], [want16], None, None, stored=True) == 0
    want32 = want16.astype(np.float32)
    off32 = want32 * np.float32(1.01)
    assert report([off32], [want32], None, None, stored=True) == 1
    assert report([_ulps(want16, 2)], [want16], 1e-4, 0.0, stored=True) == 1  # given: taken as is
    capsys.readouterr()


def test_byoc_run_on_onnx_test_data_of_bfloat16(capsys, tmp_path):
    """An imported bfloat16 model (its initializer in the weights file, as bits listed
    as bfloat16) run on input_0.pb and compared with output_0.pb."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = np.linspace(-3, 3, 16).astype(BF16)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [16])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [16])],
        [numpy_helper.from_array(w, "w")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "m.onnx")
    x = np.random.default_rng(10).uniform(-4, 4, 16).astype(BF16)
    y = (x.astype(np.float64) + w.astype(np.float64)).astype(BF16)
    data = tmp_path / "data"
    data.mkdir()
    _tensor_file(data / "input_0.pb", numpy_helper.from_array(x))
    _tensor_file(data / "output_0.pb", numpy_helper.from_array(y))
    rc, out, err = run_cli(capsys, "run", tmp_path / "m.onnx", "--backend", "json", "--inputs", data)
    assert rc == 0, out + err
    assert "output_*.pb" in out and "bfloat16" in out
    wrong = y.astype(np.float32) + 1  # a whole unit off: beyond any tolerance
    _tensor_file(data / "output_0.pb", numpy_helper.from_array(wrong.astype(BF16)))
    rc, out, err = run_cli(capsys, "run", tmp_path / "m.onnx", "--backend", "json", "--inputs", data)
    assert rc == 1 and "differ from" in out
