"""Compiled libraries, loaded through ``tvm_ffi`` and called by symbol.

A generated library exports ``__tvm_ffi_<sym>`` in the TVM FFI safe-call form, so
``tvm_ffi.load_module(path)[sym]`` calls it with numpy arrays or any DLPack tensor,
zero-copy. The entry itself checks the argument count, dtype, rank, shape,
contiguity and device, and raises ``TypeError`` / ``ValueError`` from C.
:class:`LibraryModule` adds what C cannot see, and one error type:

* **Read-only outputs are refused before the call.** DLPack drops numpy's read-only
  flag (the C entry never sees it), so a read-only numpy output is a
  :class:`RuntimeFailure` and is never written.
* **Read-only inputs work, still zero-copy.** numpy will not export a read-only array
  through legacy DLPack (``BufferError``); such inputs are passed through numpy's
  versioned (DLPack 1.0) export instead. This happens only after the fast path
  failed, so ordinary calls pay nothing for it.
* **bfloat16 arrays work, zero-copy.** numpy's DLPack export refuses ml_dtypes'
  bfloat16 (it has no DLPack type code of its own in numpy); :func:`bfloat16_tensor`
  passes such an array as the DLPack type ``(kDLBfloat, 16)`` over the same memory.
  Like read-only inputs, it is taken after the fast path failed.
* **Loading never kills the process.** The file is checked to be a whole shared
  object for this machine and opened with every symbol bound
  (:func:`~byoc.runtime.native_load.load_now`) before ``tvm_ffi`` loads it: a
  truncated library or one needing a symbol nothing defines is a RuntimeFailure,
  not a SIGBUS or the loader's "symbol lookup error" at the first call.
* **Errors.** Every failure of a call (the entry's ``TypeError`` / ``ValueError`` /
  ``RuntimeError`` / ``MemoryError``, and numpy's ``BufferError``) becomes a
  :class:`byoc.errors.RuntimeFailure` with the same message (the original is its
  ``__cause__``), so byoc's CLI and callers handle bad calls like any other
  ``ByocError``; a plain ``tvm_ffi`` client sees the entry's own exceptions.
* **A prepared call's bindings are checked once, when they are bound.**
  :meth:`LibraryModule.prepare` checks each array against the signature in Python
  (:func:`_mismatch`, the entry's checks with the entry's words) so that a bad binding
  fails at ``prepare``, naming the argument, rather than at some later call. Every call
  then goes through the entry, whose checks stay the only ones a C or TVM caller gets;
  those checks are a few comparisons against constants, which the prepared-call
  benchmark (10x10 dense) includes.

:meth:`LibraryModule.prepare` binds the argument buffers once and returns a
zero-argument callable with no Python-side work per call: refill the bound input
arrays in place and call it again.

This module never imports ``byoc.generator``.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import tvm_ffi

from byoc.errors import RuntimeFailure
from byoc.ir import TensorType

from .dlpack import BFLOAT16, bfloat16_tensor
from .interface import PackedFunction, Signature
from .native_load import load_now

if TYPE_CHECKING:
    from byoc.spec.requirements import Requirement

CALL_ERRORS = (TypeError, ValueError, RuntimeError, MemoryError, BufferError)
"""What tvm_ffi raises for a failed call; turned into RuntimeFailure."""

DLPACK_HINT = "pass a numeric, native-endian array, e.g. np.ascontiguousarray(x, dtype='float32')"
READ_ONLY_HINT = "pass a writeable output, e.g. np.empty(shape, dtype) or arr.copy()"
SignatureLike = Signature | tuple[Sequence[TensorType], Sequence[TensorType]]


class LibraryModule:
    """The external functions of one compiled library.

    ``signatures`` gives every symbol the library exports (without the
    ``__tvm_ffi_`` prefix) with its input and output types, e.g. from a bundle's
    manifest; tvm_ffi cannot list a library's functions, and the types let callers
    allocate outputs and validate bindings without running anything.
    """

    kind = "library"

    def __init__(
        self,
        path: str | PathLike[str],
        signatures: Mapping[str, SignatureLike],
        *,
        requirements: Sequence[Requirement] = (),
        backend: str | None = None,
    ) -> None:
        """``requirements`` are the spec's ``requires:`` the library links against
        (loaded already), and ``backend`` its backend, both named in load errors."""
        self.path = Path(path)
        self.backend = backend
        self._sites: tuple[tuple[str, str, str], ...] | None = None
        self._signatures = {sym: _signature(sig) for sym, sig in signatures.items()}
        what = f"the library of backend {backend}" if backend else "the library"
        # a truncated file or an unbound symbol is an error here, never a signal later
        self._handle = load_now(self.path, what=what, requirements=requirements)
        try:
            self._module = tvm_ffi.load_module(str(self.path))
        except Exception as exc:  # tvm_ffi raises RuntimeError (or others) for a bad file
            raise RuntimeFailure(
                f"cannot load the library {self.path}: {_message(exc)}",
                hint="rebuild it; a library from another machine or byoc version may not load",
            ) from None
        self._raw: dict[str, tvm_ffi.Function] = {}
        for sym in self._signatures:
            try:
                self._raw[sym] = self._module.get_function(sym)
            except AttributeError:
                raise RuntimeFailure(
                    f"the library {self.path} has no function {sym!r}",
                    hint="the library and the signatures given with it do not match",
                ) from None
        self._calls: dict[str, PackedFunction] = {}

    def symbols(self) -> tuple[str, ...]:
        return tuple(self._signatures)

    @property
    def profiling(self) -> bool:
        """Whether the library was built with profiling: it then exports
        ``byoc_profile_read`` and ``byoc_profile_site`` (byoc generator/c/profile.py)."""
        return hasattr(self._handle, "byoc_profile_read")

    def read_profile(self) -> tuple[tuple[tuple[str, str, str], ...], np.ndarray, int]:
        """What a library built with profiling recorded since the last read, which it
        forgets: its sites (function, event name, origin: each event's ``site`` indexes
        them), the events kept (rows of site, start and end in CLOCK_MONOTONIC
        nanoseconds), and how many it recorded (more than it kept when its buffer
        overflowed). Not to be called while one of its functions runs."""
        read = self._handle.byoc_profile_read
        read.restype, read.argtypes = ctypes.c_int64, (ctypes.c_void_p, ctypes.c_int64)
        if self._sites is None:
            site = self._handle.byoc_profile_site
            site.restype, site.argtypes = ctypes.c_char_p, (ctypes.c_int64,)
            entries = []
            while (entry := site(len(entries))) is not None:
                function, name, where = entry.decode("utf-8", "replace").split("\t", 2)
                entries.append((function, name, where))
            self._sites = tuple(entries)
        rows = np.full((read(None, 0), 3), -1, dtype=np.int64)  # a row nothing wrote keeps site -1
        recorded = read(rows.ctypes.data, len(rows))
        return self._sites, rows[rows[:, 0] >= 0], recorded

    def signature(self, symbol: str) -> Signature:
        try:
            return self._signatures[symbol]
        except KeyError:
            raise self._unknown(symbol) from None

    def get_function(self, symbol: str) -> PackedFunction:
        """``f(*inputs, *outputs)``: run ``symbol``, writing the outputs in place.

        Arguments are numpy arrays or any DLPack tensors, passed zero-copy; a bad
        call raises RuntimeFailure and never writes a read-only output.
        """
        call = self._calls.get(symbol)
        if call is None:
            call = self._calls[symbol] = _checked_call(
                symbol, self._raw_function(symbol), self.signature(symbol)
            )
        return call

    def prepare(self, symbol: str, *arrays: Any) -> Callable[[], None]:
        """A zero-argument callable that runs ``symbol`` on ``arrays`` (inputs, then
        outputs), bound once, zero-copy.

        The bindings are checked here, against the signature, so the callable does
        no Python-side work: each call is one tvm_ffi call on prebuilt tensors. To
        run on new data, write it into the bound input arrays (``np.copyto``) and
        call again; the outputs are updated in place.
        """
        sig = self.signature(symbol)
        types = (*sig.inputs, *sig.outputs)
        if len(arrays) != len(types):
            raise RuntimeFailure(
                f"{symbol}: expected {len(types)} arrays ({len(sig.inputs)} input(s), then "
                f"{len(sig.outputs)} output(s)), got {len(arrays)}",
                hint=_describe(sig),
            )
        tensors = []
        for k, (array, expected) in enumerate(zip(arrays, types)):
            role = _role(k, len(sig.inputs))
            tensor = _tensor(symbol, k, role, array, output=k >= len(sig.inputs))
            problem = _mismatch(tensor, expected)
            if problem:
                raise RuntimeFailure(f"{symbol}: argument {k} ({role}) {problem}", hint=_describe(sig))
            tensors.append(tensor)
        return functools.partial(self._raw_function(symbol), *tensors)

    def _raw_function(self, symbol: str) -> tvm_ffi.Function:
        try:
            return self._raw[symbol]
        except KeyError:
            raise self._unknown(symbol) from None

    def _unknown(self, symbol: str) -> RuntimeFailure:
        known = ", ".join(self._signatures) or "none"
        return RuntimeFailure(f"no function {symbol!r} in the library {self.path}", hint=f"known: {known}")

    def __repr__(self) -> str:
        return f"LibraryModule({str(self.path)!r}, symbols={list(self._signatures)})"


def _checked_call(symbol: str, fn: tvm_ffi.Function, sig: Signature) -> PackedFunction:
    """Wrap ``fn``: refuse read-only numpy outputs, convert errors, retry read-only inputs."""
    n_in = len(sig.inputs)
    n_args = n_in + len(sig.outputs)

    def call(*args: Any) -> None:
        for arg in args[n_in:]:
            if type(arg) is np.ndarray and not arg.flags.writeable and len(args) == n_args:
                k = n_in + [a is arg for a in args[n_in:]].index(True)
                raise RuntimeFailure(
                    f"{symbol}: argument {k} (output {k - n_in}) is a read-only numpy array",
                    hint=READ_ONLY_HINT,
                )
        try:
            fn(*args)
        except BufferError:
            _retry_read_only(symbol, fn, sig, args)
        except CALL_ERRORS as exc:
            raise RuntimeFailure(_message(exc), hint=_describe(sig)) from exc

    call.__name__ = call.__qualname__ = symbol
    call.__doc__ = f"{symbol}(*inputs, *outputs): {_describe(sig)}"
    return call


def _retry_read_only(symbol: str, fn: tvm_ffi.Function, sig: Signature, args: tuple[Any, ...]) -> None:
    """The slow path after numpy refused an export: pass read-only numpy inputs
    through versioned DLPack and bfloat16 arrays through :func:`bfloat16_tensor`, and
    name any argument that still cannot be passed."""
    n_in = len(sig.inputs)
    tensors = [_tensor(symbol, k, _role(k, n_in), a, output=k >= n_in) for k, a in enumerate(args)]
    try:
        fn(*tensors)
    except CALL_ERRORS as exc:
        raise RuntimeFailure(_message(exc), hint=_describe(sig)) from exc


def _tensor(symbol: str, k: int, role: str, array: Any, *, output: bool) -> Any:
    """``array`` as a tvm_ffi Tensor (numpy and DLPack tensors), else unchanged."""
    if isinstance(array, tvm_ffi.Tensor) or not hasattr(array, "__dlpack__"):
        return array
    if isinstance(array, np.ndarray) and array.dtype == BFLOAT16:
        if output and not array.flags.writeable:
            raise RuntimeFailure(
                f"{symbol}: argument {k} ({role}) is a read-only numpy array",
                hint=READ_ONLY_HINT,
            )
        try:
            return bfloat16_tensor(array)
        except (BufferError, TypeError, ValueError, RuntimeError) as exc:
            raise RuntimeFailure(
                f"{symbol}: argument {k} ({role}) is not a usable DLPack tensor: {exc}",
                hint=DLPACK_HINT,
            ) from None
    if isinstance(array, np.ndarray) and not array.flags.writeable:
        if output:
            raise RuntimeFailure(
                f"{symbol}: argument {k} ({role}) is a read-only numpy array",
                hint=READ_ONLY_HINT,
            )
        try:
            return tvm_ffi.from_dlpack(array.__dlpack__(max_version=(1, 0)))
        except (BufferError, TypeError) as exc:
            raise RuntimeFailure(
                f"{symbol}: argument {k} ({role}) is not a usable DLPack tensor: {exc}",
                hint=DLPACK_HINT,
            ) from None
    try:
        return tvm_ffi.from_dlpack(array)
    except (BufferError, TypeError, ValueError, RuntimeError) as exc:
        raise RuntimeFailure(
            f"{symbol}: argument {k} ({role}) is not a usable DLPack tensor: {exc}",
            hint=DLPACK_HINT,
        ) from None


def _mismatch(tensor: Any, expected: TensorType) -> str | None:
    """What is wrong with ``tensor`` for ``expected`` (the entry's checks), or None."""
    if not isinstance(tensor, tvm_ffi.Tensor):
        return f"must be a tensor (a numpy array or DLPack tensor), got {type(tensor).__name__}"
    if tensor.device.dlpack_device_type() != 1:
        return f"must be on the CPU, got {tensor.device}"
    if str(tensor.dtype) != expected.dtype:
        return f"must be {expected.dtype}, got {tensor.dtype}"
    shape = tuple(tensor.shape)
    if len(shape) != expected.rank:
        return f"must have rank {expected.rank} (shape {list(expected.shape)}), got rank {len(shape)}"
    if shape != expected.shape:
        return f"must have shape {list(expected.shape)}, got {list(shape)}"
    if expected.size > 0:
        step = 1
        for extent, stride in zip(reversed(shape), reversed(tuple(tensor.strides))):
            if extent != 1 and stride != step:
                return "must be contiguous (row-major)"
            step *= extent
    return None


def _role(k: int, n_in: int) -> str:
    return f"input {k}" if k < n_in else f"output {k - n_in}"


def _signature(sig: SignatureLike) -> Signature:
    if isinstance(sig, Signature):
        return sig
    inputs, outputs = sig
    return Signature(tuple(inputs), tuple(outputs))


def _describe(sig: Signature) -> str:
    ins = ", ".join(map(str, sig.inputs)) or "none"
    outs = ", ".join(map(str, sig.outputs)) or "none"
    return f"takes inputs ({ins}), then outputs ({outs})"


def _message(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__
