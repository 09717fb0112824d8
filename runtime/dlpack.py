"""bfloat16 arrays through DLPack, both ways, without a copy.

numpy has no DLPack type code for ml_dtypes' bfloat16: it refuses to export a
bfloat16 array ("DLPack only supports signed/unsigned integers, float and complex
dtypes") and to import a ``(kDLBfloat, 16)`` tensor. Both are the same 16-bit words as
``uint16``, so each direction exports the memory as one type and changes the one byte
of the DLPack capsule that names the type code, before anyone consumed the capsule:
:func:`bfloat16_tensor` (numpy to tvm_ffi, for compiled functions' arguments) and
:func:`bfloat16_array` (any DLPack producer to numpy, for interpreted modules).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import tvm_ffi

from byoc.ir import numpy_dtype

KDL_UINT, KDL_BFLOAT = 1, 4
"""DLPack's type codes (``DLDataTypeCode``) of unsigned integers and of bfloat16."""
BFLOAT16 = numpy_dtype("bfloat16")  # registered with numpy by ml_dtypes, which byoc.ir imports

_DTYPE_OFFSET = {b"dltensor": 20, b"dltensor_versioned": 32 + 20}
"""Where a capsule's ``DLTensor.dtype`` is: ``DLTensor`` is ``void *data; DLDevice
device`` (16 bytes) then ``int32_t ndim`` (4), then ``DLDataType dtype``, whose bytes
are its code, bits and lanes (uint16); a ``DLManagedTensor`` starts with its
``DLTensor``, a ``DLManagedTensorVersioned`` has it after ``version`` (8),
``manager_ctx``, ``deleter`` and ``flags`` (8 each), so at 32, on the 64-bit platforms
byoc builds for."""
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _retype(capsule: Any, old: int, new: int) -> bool:
    """Change an unconsumed DLPack capsule's 16-bit, one-lane type code ``old`` to
    ``new``; False (and no change) when it holds another type or is no DLPack capsule."""
    name = _capsule_name(capsule)
    if name not in _DTYPE_OFFSET:
        return False
    dtype = (ctypes.c_uint8 * 4).from_address(_capsule_pointer(capsule, name) + _DTYPE_OFFSET[name])
    if (dtype[0], dtype[1], dtype[2], dtype[3]) != (old, 16, 1, 0):
        return False
    dtype[0] = new
    return True


def bfloat16_tensor(array: np.ndarray) -> tvm_ffi.Tensor:
    """A bfloat16 numpy array as a tvm_ffi Tensor of DLPack type ``(kDLBfloat, 16, 1)``
    over the array's own memory (an output written through it is written into
    ``array``): numpy's export of the array viewed as ``uint16``, its type code changed.
    A read-only array goes through the versioned export (DLPack 1.0), which marks it
    read-only, as other read-only inputs do."""
    bits = array.view(np.uint16)
    capsule = bits.__dlpack__(max_version=(1, 0)) if not array.flags.writeable else bits.__dlpack__()
    if not _retype(capsule, KDL_UINT, KDL_BFLOAT):  # numpy exports uint16 as (kDLUInt, 16, 1)
        raise BufferError("numpy exported a uint16 view in an unexpected DLPack layout")
    return tvm_ffi.from_dlpack(capsule)


class _Capsule:
    """A DLPack capsule that a consumer takes through ``__dlpack__``, as np.from_dlpack does."""

    def __init__(self, capsule: Any, device: tuple[int, int]) -> None:
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **_: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


def bfloat16_array(tensor: Any) -> np.ndarray | None:
    """A DLPack tensor of type ``(kDLBfloat, 16, 1)`` (a tvm_ffi Tensor, a torch
    tensor, ...) as a bfloat16 numpy array over the same memory, or None when it has
    another type (numpy reads those itself)."""
    try:  # a versioned capsule says whether the memory is writeable; a legacy one reads as read-only
        capsule = tensor.__dlpack__(max_version=(1, 0))
    except TypeError:  # a producer from before DLPack 1.0
        capsule = tensor.__dlpack__()
    if not _retype(capsule, KDL_BFLOAT, KDL_UINT):
        return None
    return np.from_dlpack(_Capsule(capsule, tensor.__dlpack_device__())).view(BFLOAT16)
