"""ONNX test data for ``byoc run --inputs DIR``: a directory of serialised
``onnx.TensorProto`` files, ``input_0.pb``, ``input_1.pb``, ... and optionally
``output_0.pb``, ..., as the ONNX model zoo and ONNX's backend tests ship them
(``test_data_set_0/``).

The inputs bind to the graph's inputs in order: ``input_K.pb`` to its K-th parameter
(for an imported model, the K-th ONNX graph input that is not an initializer). Every
file is read with the checks an untrusted input needs: a regular file, a tensor of a
dtype byoc has, stored in the file itself (external data is refused), and data that
fits its shape. Every failure is a :class:`~byoc.errors.UsageError` naming the file.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UsageError
from ..input_files import TENSOR_LIMIT, read_limited
from ..ir import DTYPES, numpy_dtype
from .model_import import require_onnx

TENSOR_HINT = "an ONNX test-data directory holds input_0.pb, input_1.pb, ... (serialised onnx.TensorProto)"


@dataclass(frozen=True)
class Tensor:
    """One ``.pb`` file's array; ``file`` names it in messages."""

    file: str
    array: np.ndarray


@dataclass(frozen=True)
class TestData:
    """The arrays of a test-data directory, in file order."""

    directory: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]

    __test__ = False  # not a pytest class, despite its name


def read_test_data(directory: str | Path) -> TestData:
    """The input and output tensors of ``directory`` (see the module doc)."""
    d = Path(directory)
    inputs = _numbered(d, "input")
    if not inputs:
        raise UsageError(f"--inputs {d}: the directory has no input_*.pb files", hint=TENSOR_HINT)
    outputs = _numbered(d, "output")
    return TestData(
        str(d),
        tuple(Tensor(str(p), read_tensor(p)) for p in inputs),
        tuple(Tensor(str(p), read_tensor(p)) for p in outputs),
    )


def _numbered(d: Path, role: str) -> list[Path]:
    """``ROLE_0.pb``, ``ROLE_1.pb``, ... of ``d``, in numeric order, with no gap."""
    indexed: dict[int, Path] = {}
    for path in d.glob(f"{role}_*.pb"):
        m = re.fullmatch(rf"{role}_(0|[1-9][0-9]{{0,5}})\.pb", path.name)
        if m is None:
            raise UsageError(f"--inputs {path}: not a numbered {role} file", hint=f"name it {role}_0.pb, ...")
        indexed[int(m.group(1))] = path
    missing = next((k for k in range(len(indexed)) if k not in indexed), None)
    if missing is not None:
        raise UsageError(
            f"--inputs {d}: {role}_{missing}.pb is missing, though there are {len(indexed)} {role} files",
            hint=f"{role} files are numbered from 0 without gaps",
        )
    return [indexed[k] for k in range(len(indexed))]


def read_tensor(path: Path) -> np.ndarray:
    """The array of one serialised TensorProto file."""
    onnx = require_onnx("reading ONNX test data")
    from onnx.external_data_helper import uses_external_data

    where = f"--inputs {path}"
    data = read_limited(path, where, TENSOR_LIMIT, UsageError)
    tensor = onnx.TensorProto()
    try:
        tensor.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError
        raise UsageError(
            f"{where} is not a serialised TensorProto ({type(exc).__name__}: {exc})",
            hint="the file is truncated or not an ONNX tensor",
        ) from None
    if uses_external_data(tensor):
        raise UsageError(
            f"{where} keeps its data in another file", hint="save the tensor with its data inline"
        )
    dtype = _dtype_name(onnx, tensor.data_type)
    if dtype not in DTYPES:
        raise UsageError(
            f"{where} holds a tensor of dtype {dtype}, which byoc does not support",
            hint=f"byoc supports {', '.join(DTYPES)}",
        )
    if any(d < 0 for d in tensor.dims):
        raise UsageError(f"{where}: its shape {list(tensor.dims)} has a negative dimension")
    if tensor.HasField("raw_data"):
        size = math.prod(tensor.dims) * np.dtype(dtype).itemsize
        if size != len(tensor.raw_data):
            raise UsageError(
                f"{where}: its shape {list(tensor.dims)} needs {size:,} bytes of {dtype}, "
                f"but it holds {len(tensor.raw_data):,}",
                hint="the file is truncated or corrupt",
            )
    try:
        array = np.asarray(onnx.numpy_helper.to_array(tensor), order="C")  # a scalar stays rank 0
    except Exception as exc:  # values that do not fill the shape
        raise UsageError(f"{where}: its values do not fit its shape {list(tensor.dims)} ({exc})") from None
    if dtype == "bfloat16" and array.dtype in (np.uint16, np.int32):
        # an onnx without ml_dtypes gives a bfloat16 tensor's bits: from raw_data as
        # uint16, from int32_data (one value per int32, in its low 16 bits) as int32
        array = np.asarray(array.astype(np.uint16).view(numpy_dtype("bfloat16")), order="C")
    if array.dtype != numpy_dtype(dtype):
        raise UsageError(
            f"{where}: onnx read its {dtype} tensor as {array.dtype}", hint="update the onnx package"
        )
    return array


def _dtype_name(onnx, data_type: int) -> str:
    """byoc's name of an ONNX element type, else ONNX's own (``string``, ``float16``)."""
    if data_type == 0:
        return "undefined"
    if data_type == onnx.TensorProto.BFLOAT16:  # older onnx versions name its numpy type uint16
        return "bfloat16"
    try:
        name = onnx.helper.tensor_dtype_to_np_dtype(data_type).name
    except Exception:  # an element type this onnx does not know
        return f"<element type {data_type}>"
    return name if name in DTYPES else onnx.TensorProto.DataType.Name(data_type).lower()
