"""The exported entry of every compiled external function: TVM FFI's safe-call ABI.

    int __tvm_ffi_<sym>(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result)

Arguments are the function's inputs, then its outputs, each either a ``DLTensor*``
(``kTVMFFIDLTensorPtr``) or a tvm_ffi Tensor object (``kTVMFFITensor``). The entry
checks the count, the kind, dtype, rank, shape, contiguity and device of every
argument; a problem is raised with ``TVMFFIErrorSetRaisedFromCStr`` and the entry
returns -1, so a bad call from Python is a Python exception, never a crash.

The text is valid C99 and C++17 (for the engine codegen), warning-free under
``-Wall -Wextra -Werror``.
"""

from __future__ import annotations

from byoc.ir import Function

from .text import DLPACK_CODES, c_string, comment_text, function_origin, int64_array

SUPPORT_NAMES = ("byoc_tensor_of", "byoc_format_shape", "byoc_raise", "byoc_check_arg")
"""The static helpers :data:`SUPPORT` defines, which no generated name may take."""

SUPPORT = r"""/* ---- Argument checks shared by the exported entries (byoc generator/c/ffi_entry.py) ---- */

/* The DLTensor behind an argument, or NULL when it is not a tensor. */
static DLTensor* byoc_tensor_of(const TVMFFIAny* arg) {
  if (arg->type_index == kTVMFFIDLTensorPtr) {
    return (DLTensor*)arg->v_ptr;
  }
  if (arg->type_index == kTVMFFITensor) {
    return (DLTensor*)((char*)arg->v_obj + sizeof(TVMFFIObject));
  }
  return NULL;
}

static void byoc_format_shape(char* buf, size_t size, int32_t ndim, const int64_t* shape) {
  size_t used = 0;
  int32_t d;
  buf[0] = '\0';
  used += (size_t)snprintf(buf, size, "[");
  for (d = 0; d < ndim && used < size; ++d) {
    used += (size_t)snprintf(buf + used, size - used, d ? ", %lld" : "%lld", (long long)shape[d]);
  }
  if (used < size) {
    snprintf(buf + used, size - used, "]");
  }
}

static int byoc_raise(const char* kind, const char* message) {
  TVMFFIErrorSetRaisedFromCStr(kind, message);
  return -1;
}

/* Check argument `index` against the expected dtype, rank and shape; on success
   store its DLTensor in *out and return 0, else raise and return -1. */
static int byoc_check_arg(const char* fn, const TVMFFIAny* args, int32_t index, const char* role,
                          uint8_t code, uint8_t bits, const char* dtype, int32_t ndim,
                          const int64_t* shape, DLTensor** out) {
  char msg[768];
  char want[256];
  char got[256];
  DLTensor* t = byoc_tensor_of(&args[index]);
  int32_t d;
  int64_t expect;
  int64_t numel;
  if (t == NULL) {
    snprintf(msg, sizeof msg, "%s: argument %d (%s) must be a tensor, got FFI type index %d",
             fn, (int)index, role, (int)args[index].type_index);
    return byoc_raise("TypeError", msg);
  }
  if (t->device.device_type != kDLCPU) {
    snprintf(msg, sizeof msg, "%s: argument %d (%s) must be on the CPU, got device type %d",
             fn, (int)index, role, (int)t->device.device_type);
    return byoc_raise("ValueError", msg);
  }
  if (t->dtype.code != code || t->dtype.bits != bits || t->dtype.lanes != 1) {
    snprintf(msg, sizeof msg, "%s: argument %d (%s) must be %s, got DLPack type code %d, %d bits, %d lanes",
             fn, (int)index, role, dtype, (int)t->dtype.code, (int)t->dtype.bits, (int)t->dtype.lanes);
    return byoc_raise("TypeError", msg);
  }
  if (t->ndim != ndim) {
    byoc_format_shape(want, sizeof want, ndim, shape);
    snprintf(msg, sizeof msg, "%s: argument %d (%s) must have rank %d (shape %s), got rank %d",
             fn, (int)index, role, (int)ndim, want, (int)t->ndim);
    return byoc_raise("ValueError", msg);
  }
  for (d = 0; d < ndim; ++d) {
    if (t->shape[d] != shape[d]) {
      byoc_format_shape(want, sizeof want, ndim, shape);
      byoc_format_shape(got, sizeof got, t->ndim, t->shape);
      snprintf(msg, sizeof msg, "%s: argument %d (%s) must have shape %s, got %s",
               fn, (int)index, role, want, got);
      return byoc_raise("ValueError", msg);
    }
  }
  /* A tensor with no elements is contiguous whatever its strides, and may have no data. */
  numel = 1;
  for (d = 0; d < ndim; ++d) {
    numel *= shape[d];
  }
  if (t->strides != NULL && numel > 0) {
    expect = 1;
    for (d = ndim - 1; d >= 0; --d) {
      if (shape[d] != 1 && t->strides[d] != expect) {
        snprintf(msg, sizeof msg, "%s: argument %d (%s) must be contiguous (row-major)",
                 fn, (int)index, role);
        return byoc_raise("ValueError", msg);
      }
      expect *= shape[d];
    }
  }
  if (t->data == NULL && numel > 0) {
    snprintf(msg, sizeof msg, "%s: argument %d (%s) has no data", fn, (int)index, role);
    return byoc_raise("ValueError", msg);
  }
  *out = t;
  return 0;
}
"""


def arguments(fn: Function) -> list[tuple[str, str, object]]:
    """(role, C name, type) of every argument: inputs, then outputs."""
    out = [(f"input {p.name}", f"arg{i}", p.type) for i, p in enumerate(fn.params)]
    out += [(f"output {k}", f"out{k}", t) for k, t in enumerate(fn.output_types)]
    return out


C_LINKAGE_GUARD = ("#ifdef __cplusplus", 'extern "C"', "#endif")
"""Before an exported definition of a C module: C linkage when it is compiled as C++
(TVM builds a C-source module with a C++ compiler), so that its name stays as is."""


def exported(definition: str, cplusplus: bool) -> list[str]:
    """The first line of an exported definition (``TVM_FFI_DLL_EXPORT int f(...) {``)
    with C linkage: ``extern "C"`` before it in a C++ module, :data:`C_LINKAGE_GUARD`
    in a C one."""
    return [f'extern "C" {definition}'] if cplusplus else [*C_LINKAGE_GUARD, definition]


def entry(fn: Function, wrapper: str, *, cplusplus: bool = False) -> str:
    """The exported ``__tvm_ffi_<sym>`` of ``fn``; it calls ``wrapper(DLTensor*...)``."""
    sym = fn.name
    assert sym is not None
    args = arguments(fn)
    n_in, n_out = len(fn.params), len(fn.outputs)
    lines = []
    signature = f"int __tvm_ffi_{sym}(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result)"
    where = comment_text(function_origin(fn))
    lines.append(f"/* {sym}: the exported TVM FFI function (safe-call ABI) of {where}.")
    lines.append(f"   Arguments: {n_in} input(s), then {n_out} output(s):")
    for k, (role, _, t) in enumerate(args):
        lines.append(comment_text(f"     {k}: {role}: {t}"))
    lines.append("*/")
    lines += exported(f"TVM_FFI_DLL_EXPORT {signature} {{", cplusplus)
    for k, (_, _, t) in enumerate(args):
        if t.rank:
            lines.append(f"  static const int64_t shape{k}[{t.rank}] = {int64_array(t.shape)};")
    lines.append(f"  DLTensor* t[{len(args)}];")
    lines.append("  char msg[256];")
    lines.append("  (void)self;")
    lines.append("  (void)result;")
    lines.append(f"  if (num_args != {len(args)}) {{")
    lines.append(
        f'    snprintf(msg, sizeof msg, "%s: expected {len(args)} arguments ({n_in} input(s), then {n_out} output(s)), got %d", {c_string(sym)}, (int)num_args);'
    )
    lines.append('    return byoc_raise("TypeError", msg);')
    lines.append("  }")
    for k, (role, _, t) in enumerate(args):
        code, bits = DLPACK_CODES[t.dtype]
        shape = f"shape{k}" if t.rank else "NULL"
        lines.append(
            f"  if (byoc_check_arg({c_string(sym)}, args, {k}, {c_string(role)}, {code}, {bits}, "
            f"{c_string(t.dtype)}, {t.rank}, {shape}, &t[{k}]) != 0) return -1;"
        )
    call_args = ", ".join(f"t[{k}]" for k in range(len(args)))
    lines.append(f"  return {wrapper}({call_args});")
    lines.append("}")
    return "\n".join(lines) + "\n"


def includes(*, cplusplus: bool = False) -> str:
    std = (
        ("<cstdint>", "<cstdio>", "<cstdlib>", "<cstring>")
        if cplusplus
        else ("<stdint.h>", "<stdio.h>", "<stdlib.h>", "<string.h>")
    )
    return (
        "".join(f"#include {h}\n" for h in std) + "#include <dlpack/dlpack.h>\n#include <tvm/ffi/c_api.h>\n"
    )
