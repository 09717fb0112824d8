"""The dtypes of issue 29 through DLPack: bfloat16 arrays passed to compiled functions as
``(kDLBfloat, 16)`` tensors without a copy, bool and float16 arrays as they are, in a
hand-written library and in the fused backend's generated C."""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest
import tvm_ffi
from compile_util import compile_library
from conftest import run_cli

from byoc.cli.compare import compare
from byoc.errors import RuntimeFailure
from byoc.ir import TensorType
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
