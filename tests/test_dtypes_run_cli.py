"""The dtypes of issue 29 at run time: bfloat16 arrays passed to compiled functions
as DLPack ``(kDLBfloat, 16)`` tensors without a copy, bool and float16 arrays
passed as they are; ``byoc run``'s random inputs, ``--inputs`` and
``--save-outputs`` for every dtype, its per-dtype default tolerances, bundles and
ONNX test data of the new dtypes."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import tvm_ffi
from compile_util import compile_library
from conftest import run_cli

from byoc.cli.compare import DEFAULT_TOLERANCES, compare
from byoc.cli.run_inputs import random_array
from byoc.errors import RuntimeFailure
from byoc.ir import DTYPES, TensorType, is_integer
from byoc.npz_files import BFLOAT16_MARKER, npz_bytes, read_npz
from byoc.runtime.module import LibraryModule, bfloat16_tensor

BF16 = np.dtype(ml_dtypes.bfloat16)
needs_cc = pytest.mark.skipif(
    shutil.which("gcc") is None and shutil.which("cc") is None, reason="needs a C compiler"
)

# ------------------------------------------------------------------ DLPack


def test_bfloat16_tensor_is_the_array_memory_typed_bfloat16():
    array = np.arange(12, dtype=np.float32).reshape(3, 4).astype(BF16)
    tensor = bfloat16_tensor(array)
    assert str(tensor.dtype) == "bfloat16"
    assert tuple(tensor.shape) == (3, 4) and tuple(tensor.strides) == (4, 1)
    assert tensor.data_ptr() == array.ctypes.data  # zero-copy


def test_bfloat16_tensor_of_a_read_only_array_and_a_view():
    array = np.ones((2, 6), BF16)
    array.flags.writeable = False
    tensor = bfloat16_tensor(array)
    assert str(tensor.dtype) == "bfloat16" and tensor.data_ptr() == array.ctypes.data
    view = np.ones((4, 6), BF16)[:, ::2]
    tensor = bfloat16_tensor(view)
    assert tuple(tensor.strides) == (6, 2)  # passed as it is: the entry refuses it, not this


def test_numpy_refuses_bfloat16_dlpack_itself():
    """Why bfloat16_tensor exists: if numpy learns bfloat16, this fails and it can go."""
    with pytest.raises(BufferError):
        np.ones(2, BF16).__dlpack__()


@pytest.mark.parametrize("dtype", ["bool", "float16", "int16", "uint16", "uint32", "uint64"])
def test_the_other_new_dtypes_pass_through_dlpack_as_they_are(dtype):
    array = np.zeros(3, dtype)
    assert str(tvm_ffi.from_dlpack(array).dtype) == dtype


HALVES_C = r"""
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>

static DLTensor* tensor_of(const TVMFFIAny* arg) {
  if (arg->type_index == kTVMFFIDLTensorPtr) return (DLTensor*)arg->v_ptr;
  if (arg->type_index == kTVMFFITensor) return (DLTensor*)((char*)arg->v_obj + sizeof(TVMFFIObject));
  return NULL;
}

/* Both arguments tensors of the DLPack type (code, bits, 1): their length, else raise. */
static int64_t checked(const TVMFFIAny* args, int32_t num_args, uint8_t code, uint8_t bits, DLTensor** t) {
  int k;
  if (num_args != 2) { TVMFFIErrorSetRaisedFromCStr("TypeError", "expected 2 arguments"); return -1; }
  for (k = 0; k < 2; ++k) {
    t[k] = tensor_of(&args[k]);
    if (t[k] == NULL || t[k]->dtype.code != code || t[k]->dtype.bits != bits || t[k]->dtype.lanes != 1) {
      TVMFFIErrorSetRaisedFromCStr("TypeError", "wrong DLPack dtype");
      return -1;
    }
  }
  return t[0]->shape[0];
}

static float bf16_load(uint16_t b) { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t bf16_store(float f) {  /* round to nearest even (finite values) */
  uint32_t u; memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

TVM_FFI_DLL_EXPORT int __tvm_ffi_bf16_triple(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  DLTensor* t[2]; int64_t n = checked(args, num_args, kDLBfloat, 16, t), i;
  (void)self; (void)result;
  if (n < 0) return -1;
  for (i = 0; i < n; ++i)
    ((uint16_t*)t[1]->data)[i] = bf16_store(bf16_load(((const uint16_t*)t[0]->data)[i]) * 3.0f);
  return 0;
}

TVM_FFI_DLL_EXPORT int __tvm_ffi_bool_not(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  DLTensor* t[2]; int64_t n = checked(args, num_args, kDLBool, 8, t), i;
  (void)self; (void)result;
  if (n < 0) return -1;
  for (i = 0; i < n; ++i) ((bool*)t[1]->data)[i] = !((const bool*)t[0]->data)[i];
  return 0;
}

TVM_FFI_DLL_EXPORT int __tvm_ffi_f16_negate(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  DLTensor* t[2]; int64_t n = checked(args, num_args, kDLFloat, 16, t), i;
  (void)self; (void)result;
  if (n < 0) return -1;
  for (i = 0; i < n; ++i) ((uint16_t*)t[1]->data)[i] = ((const uint16_t*)t[0]->data)[i] ^ 0x8000u;
  return 0;
}
"""
N = 64


@pytest.fixture(scope="module")
def halves(tmp_path_factory) -> LibraryModule:
    """A hand-written library of three functions on bfloat16, bool and float16 arrays,
    each checking the DLPack type code of its arguments in C."""
    path = compile_library({"halves.c": HALVES_C}, "halves.c", tmp_path_factory.mktemp("halves"))

    def sig(dtype: str):
        return (TensorType((N,), dtype),), (TensorType((N,), dtype),)

    return LibraryModule(
        path, {"bf16_triple": sig("bfloat16"), "bool_not": sig("bool"), "f16_negate": sig("float16")}
    )


def _bf16_inputs() -> np.ndarray:
    return np.random.default_rng(3).uniform(-100, 100, N).astype(np.float32).astype(BF16)


@needs_cc
def test_a_compiled_function_reads_and_writes_bfloat16_arrays(halves):
    x = _bf16_inputs()
    out = np.zeros(N, BF16)
    halves.get_function("bf16_triple")(x, out)
    want = (x.astype(np.float32) * np.float32(3)).astype(BF16)
    assert out.tobytes() == want.tobytes()  # written in place: the output was not copied


@needs_cc
def test_prepare_binds_bfloat16_arrays_once(halves):
    x, out = _bf16_inputs(), np.zeros(N, BF16)
    run = halves.prepare("bf16_triple", x, out)
    run()
    first = out.copy()
    np.copyto(x, (x.astype(np.float32) + 1).astype(BF16))
    run()
    assert out.tobytes() == (x.astype(np.float32) * np.float32(3)).astype(BF16).tobytes()
    assert out.tobytes() != first.tobytes()


@needs_cc
def test_a_read_only_bfloat16_input_works_and_a_read_only_output_is_refused(halves):
    x = _bf16_inputs()
    x.flags.writeable = False
    out = np.zeros(N, BF16)
    halves.get_function("bf16_triple")(x, out)
    assert out.tobytes() == (x.astype(np.float32) * np.float32(3)).astype(BF16).tobytes()
    out.flags.writeable = False
    with pytest.raises(RuntimeFailure, match="read-only"):
        halves.get_function("bf16_triple")(x, out)
    with pytest.raises(RuntimeFailure, match="read-only"):
        halves.prepare("bf16_triple", x, out)


@needs_cc
def test_bool_and_float16_arrays_through_compiled_functions(halves):
    b = np.random.default_rng(1).integers(0, 2, N).astype(bool)
    out = np.zeros(N, bool)
    halves.get_function("bool_not")(b, out)
    assert np.array_equal(out, ~b)
    h = np.random.default_rng(2).uniform(-9, 9, N).astype(np.float16)
    neg = np.zeros(N, np.float16)
    halves.get_function("f16_negate")(h, neg)
    assert neg.tobytes() == (-h).tobytes()


@needs_cc
@pytest.mark.parametrize("dtype", ["float16", "uint16", "float32"])
def test_a_wrong_dtype_for_a_bfloat16_argument_is_a_runtime_failure(halves, dtype):
    wrong = np.zeros(N, dtype)
    with pytest.raises(RuntimeFailure, match="wrong DLPack dtype"):
        halves.get_function("bf16_triple")(wrong, np.zeros(N, BF16))
    with pytest.raises(RuntimeFailure, match=f"must be bfloat16, got {dtype}"):
        halves.prepare("bf16_triple", wrong, np.zeros(N, BF16))


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


# ------------------------------------------------------------------ JSON modules' constants

JSON_CONSTS = """\
graph main(h: float16[3], b: bfloat16[3], m: bool[3]) {
  r, q, n = @json {
    kh = const float16[3] [0.1, -65504, 2.5]
    kb = const bfloat16[3] [0.1, -3.3895e38, 2.5]
    km = const bool[3] [true, false, true]
    return add(h, kh), multiply(b, kb), concatenate(m, km, axis=0)
  }
  return r, q, n
}
"""


def _json_doc():
    import json

    from runtime_json_support import json_module_text

    from byoc.api import parse

    text, _ = json_module_text(parse(JSON_CONSTS, "graph"))
    return json.loads(text)


def _json_module(doc):
    import json

    from byoc.runtime.json_module import JsonRuntimeModule

    return JsonRuntimeModule.from_text(json.dumps(doc))


def test_a_json_module_binds_float16_bfloat16_and_bool_constants():
    doc = _json_doc()
    module = _json_module(doc)
    (symbol,) = doc["functions"]
    rng = np.random.default_rng(9)
    h = rng.uniform(-2, 2, 3).astype(np.float16)
    b = rng.uniform(-2, 2, 3).astype(BF16)
    m = np.array([True, True, False])
    outs = (np.empty(3, np.float16), np.empty(3, BF16), np.empty(6, bool))
    module.get_function(symbol)(h, b, m, *outs)
    kh = np.array([0.1, -65504, 2.5], np.float16)
    kb = np.array([0.1, -3.3895e38, 2.5]).astype(BF16)
    assert outs[0].tobytes() == (h.astype(np.float64) + kh.astype(np.float64)).astype(np.float16).tobytes()
    assert outs[1].tobytes() == (b.astype(np.float64) * kb.astype(np.float64)).astype(BF16).tobytes()
    assert outs[2].tolist() == [True, True, False, True, False, True]


@pytest.mark.parametrize(
    "index, value, dtype",
    [
        (0, 65520.0, "float16"),
        (1, 1e39, "bfloat16"),
        (2, 1, "bool"),
        (2, "true", "bool"),
        (0, True, "float16"),
    ],
)
def test_a_json_constant_that_its_dtype_cannot_hold_is_refused(index, value, dtype):
    doc = _json_doc()
    names = [n for n, v in doc["const_values"].items() if v["dtype"] == dtype]
    doc["const_values"][names[0]]["data"][index] = value
    kind = "bool value" if dtype == "bool" else f"{dtype} number"
    with pytest.raises(RuntimeFailure, match=f"not a {kind}"):
        _json_module(doc)


def test_a_large_bfloat16_constant_of_a_json_module_lives_in_its_npz(capsys, tmp_path):
    """Over LARGE_CONSTANT_ELEMENTS, a JSON module's constant is an entry of its .npz,
    written by npz_bytes and read back by read_npz, bfloat16 bits and all."""
    from byoc.generator.artifacts import LARGE_CONSTANT_ELEMENTS
    from byoc.npz_files import sha256_hex

    n = LARGE_CONSTANT_ELEMENTS + 4
    k = np.random.default_rng(6).uniform(-8, 8, n).astype(BF16)
    data = npz_bytes({"k": k})
    (tmp_path / "w.npz").write_bytes(data)
    graph = tmp_path / "g.graph"
    graph.write_text(
        f'weights "w.npz" sha256 "{sha256_hex(data)}"\n'
        f"graph main(x: bfloat16[{n}]) {{\n"
        f'  s = @json {{\n    k = const bfloat16[{n}] weights["k"]\n    return add(x, k)\n  }}\n'
        "  return s\n}\n"
    )
    x = np.random.default_rng(7).uniform(-8, 8, n).astype(BF16)
    (tmp_path / "in.npz").write_bytes(npz_bytes({"x": x}))
    out_file = tmp_path / "out.npz"
    rc, out, err = run_cli(capsys, "run", graph, "--inputs", tmp_path / "in.npz", "--save-outputs", out_file)
    assert rc == 0, out + err
    got = read_npz(str(out_file), "out", RuntimeFailure)["output_0"]
    assert got.tobytes() == (x.astype(np.float64) + k.astype(np.float64)).astype(BF16).tobytes()


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


FUSED_GRAPH = """\
graph main(x: bfloat16[8, 16], y: bfloat16[8, 16], b: bool[5], h: float16[7]) {
  s = @fused { return add(multiply(x, y), x) }
  t = @fused { return concatenate(b, b) }
  u = @fused { return multiply(h, h) }
  return s, t, u
}
"""


@needs_cc
def test_byoc_pipeline_runs_bfloat16_bool_and_float16_on_a_compiled_backend(capsys, tmp_path):
    """Generated C (the fused backend) called through tvm_ffi: the bfloat16 arguments go
    through bfloat16_tensor, inputs and outputs, and match the numpy reference."""
    import byoc
    from byoc.api import evaluate, parse

    path = tmp_path / "f.graph"
    path.write_text(FUSED_GRAPH)
    rc, out, err = run_cli(capsys, "run", path, "--seed", "3")
    assert rc == 0, out + err
    model = byoc.build(path)
    (library,) = [m for m in model.modules if m.kind == "library"]
    rng = np.random.default_rng(11)
    x = rng.uniform(-4, 4, (8, 16)).astype(BF16)
    y = rng.uniform(-4, 4, (8, 16)).astype(BF16)
    symbol = next(s for s in library.symbols() if library.signature(s).inputs[0].dtype == "bfloat16")
    result = np.zeros((8, 16), BF16)
    library.get_function(symbol)(x, y, result)
    fn = parse(FUSED_GRAPH, "graph").functions[0]
    inputs = {"x": x, "y": y, "b": np.array([True, False, True, True, False]), "h": np.ones(7, np.float16)}
    want = evaluate(fn, inputs)[0]
    assert result.dtype == BF16
    status, error = compare(result, want, None, None)
    assert status == "ok", error
    outputs = model(**inputs)
    assert outputs[1].tolist() == [True, False, True, True, False] * 2


def test_bfloat16_array_reads_a_dlpack_bfloat16_tensor_in_place():
    from byoc.runtime.dlpack import bfloat16_array

    array = np.arange(6, dtype=np.float32).reshape(2, 3).astype(BF16)
    back = bfloat16_array(bfloat16_tensor(array))
    assert back.dtype == BF16 and back.shape == (2, 3) and back.flags.writeable
    assert back.ctypes.data == array.ctypes.data
    assert bfloat16_array(tvm_ffi.from_dlpack(np.zeros(3, np.uint16))) is None  # numpy reads those


def test_an_interpreted_module_takes_dlpack_bfloat16_tensors():
    """The JSON runtime reads its arguments through np.from_dlpack, which refuses
    bfloat16; a tvm_ffi bfloat16 tensor still works, the output written in place."""
    doc = _json_doc()
    module = _json_module(doc)
    (symbol,) = doc["functions"]
    rng = np.random.default_rng(12)
    h = rng.uniform(-2, 2, 3).astype(np.float16)
    b = rng.uniform(-2, 2, 3).astype(BF16)
    m = np.array([True, False, True])
    q = np.zeros(3, BF16)
    outs = [np.empty(3, np.float16), bfloat16_tensor(q), np.empty(6, bool)]
    module.get_function(symbol)(h, bfloat16_tensor(b), m, *outs)
    kb = np.array([0.1, -3.3895e38, 2.5]).astype(BF16)
    assert q.tobytes() == (b.astype(np.float64) * kb.astype(np.float64)).astype(BF16).tobytes()
