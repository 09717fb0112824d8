/* byoc_entry.c: the argument checks of the exported entries of byoc's generated modules
   (shipped with byoc, generator/c/support/; declared in byoc_module.h).

   A module's exported __tvm_ffi_<name> checks the count of its arguments, then each one
   with byoc_check_arg: a bad call from Python raises TypeError or ValueError naming the
   function, the argument and what was expected, and never reaches a kernel. */
#include <stdio.h>

#include "byoc_module.h"

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

BYOC_WEAK int byoc_raise(const char* kind, const char* message) {
  TVMFFIErrorSetRaisedFromCStr(kind, message);
  return -1;
}

BYOC_WEAK int byoc_check_arg(const char* fn, const TVMFFIAny* args, int32_t index, const char* role,
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

/* The fused bodies read and write through restrict pointers, so their wrappers check. */
BYOC_WEAK int byoc_outputs_overlap(const void* const* data, const size_t* bytes, int first, int n) {
  int i;
  int j;
  for (i = first; i < n; ++i) {
    for (j = 0; j < i; ++j) {
      const uintptr_t a = (uintptr_t)data[i];
      const uintptr_t b = (uintptr_t)data[j];
      if (bytes[i] != 0 && bytes[j] != 0 && a < b + bytes[j] && b < a + bytes[i]) {
        return 1;
      }
    }
  }
  return 0;
}
