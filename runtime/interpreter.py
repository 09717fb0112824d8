"""The numpy interpreter core shared by the ExampleJSON and JSON runtime modules.

A function is precompiled once, at load time, into a :class:`InterpreterPlan`: a flat list of
*entries* (TVM's data entries) and a list of :class:`InterpreterStep` s, each computing the
entries of one node's outputs with a catalog op's numpy kernel from other entries. A call checks its
arguments the way the generated TVM FFI entries do (count, dtype, shape; outputs
C-contiguous and writeable), binds them to entries, runs the steps and copies the
results into the caller's output arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from byoc.errors import RuntimeFailure
from byoc.ir import TensorType

from .dlpack import bfloat16_array
from .interface import Signature

Kernel = Callable[[list[np.ndarray]], Sequence[np.ndarray]]
"""A step's computation: the input entries' arrays in, one new array per output out."""


@dataclass(frozen=True, slots=True)
class InterpreterStep:
    """Compute the entries ``outputs`` by ``kernel`` of the entries ``inputs``."""

    kernel: Kernel
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class InterpreterPlan:
    """One function, precompiled. The arguments bind ``input_slots`` and the
    constants ``const_slots``; each step writes one entry; the outputs are copied
    from ``output_slots`` into the caller's arrays."""

    symbol: str
    input_names: tuple[str, ...]
    signature: Signature
    n_entries: int
    input_slots: tuple[int, ...]
    const_slots: tuple[int, ...]
    const_types: tuple[TensorType, ...]
    steps: tuple[InterpreterStep, ...]
    output_slots: tuple[int, ...]

    def run(self, args: Sequence[Any], consts: Sequence[np.ndarray] = ()) -> None:
        """Check ``args`` (inputs, then outputs), run the steps, write the outputs."""
        inputs, outputs = self.check_arguments(args)
        env: list[Any] = [None] * self.n_entries
        for slot, value in zip((*self.input_slots, *self.const_slots), (*inputs, *consts)):
            env[slot] = value
        # NaN and infinities are IEEE results, as in the generated C, not warnings.
        with np.errstate(all="ignore"):
            for k, step in enumerate(self.steps):
                try:
                    results = step.kernel([env[i] for i in step.inputs])
                    for slot, value in zip(step.outputs, results, strict=True):
                        env[slot] = value
                except (ArithmeticError, ValueError, TypeError, MemoryError) as exc:
                    raise RuntimeFailure(f"{self.symbol}: step {k} failed: {exc}") from exc
        results = [env[slot] for slot in self.output_slots]
        for out, value in zip(outputs, results):
            np.copyto(out, value)

    def check_arguments(self, args: Sequence[Any]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """A call's arguments as arrays, checked; raises RuntimeFailure."""
        ins, outs = self.signature.inputs, self.signature.outputs
        if len(args) != len(ins) + len(outs):
            raise RuntimeFailure(
                f"{self.symbol}: expected {len(ins) + len(outs)} arguments, got {len(args)}",
                hint=f"pass {len(ins)} input(s) ({', '.join(self.input_names) or 'none'}), "
                f"then {len(outs)} preallocated output(s)",
            )
        arrays = []
        for k, (arg, t) in enumerate(zip(args, (*ins, *outs))):
            what = f"input {self.input_names[k]!r}" if k < len(ins) else f"output {k - len(ins)}"
            arrays.append(as_array(arg, f"{self.symbol}: argument {k} ({what})", t, output=k >= len(ins)))
        return arrays[: len(ins)], arrays[len(ins) :]

    def check_consts(self, consts: Sequence[Any], names: Sequence[str]) -> tuple[np.ndarray, ...]:
        """Arrays given for the constants ``names``, checked against their types."""
        if len(consts) != len(names):
            raise RuntimeFailure(f"{self.symbol}: expected {len(names)} constants, got {len(consts)}")
        return tuple(
            as_array(c, f"{self.symbol}: constant {n!r}", t)
            for c, n, t in zip(consts, names, self.const_types)
        )


def as_array(arg: Any, what: str, t: TensorType, *, output: bool = False) -> np.ndarray:
    """``arg`` as a numpy array (zero-copy from DLPack) of type ``t``; an output must
    also be C-contiguous and writeable. ``what`` names the argument in errors."""
    array = arg
    if not isinstance(arg, np.ndarray):
        if not hasattr(arg, "__dlpack__"):
            raise RuntimeFailure(f"{what} must be an array (numpy or DLPack), got {type(arg).__name__}")
        try:
            array = np.from_dlpack(arg)
        except (BufferError, TypeError, ValueError, RuntimeError) as exc:
            try:  # numpy reads no bfloat16 tensor; bfloat16_array does
                array = bfloat16_array(arg)
            except (BufferError, TypeError, ValueError, RuntimeError):
                array = None
            if array is None:
                raise RuntimeFailure(f"{what} cannot be read through DLPack: {exc}") from None
    if array.dtype != np.dtype(t.dtype) or array.shape != t.shape:
        raise RuntimeFailure(f"{what} is {array.dtype}{list(array.shape)}, expected {t}")
    if output and not array.flags.c_contiguous:
        raise RuntimeFailure(f"{what} is not C-contiguous", hint="pass a C-contiguous output array")
    if output and not array.flags.writeable:
        raise RuntimeFailure(f"{what} is read-only", hint="outputs are written in place")
    return array


def read_module_file(path: str | Path) -> bytes:
    """The bytes of an interpreted module's file; a RuntimeFailure if it cannot be read, is
    not a regular file or is larger than a bundle member may be."""
    from byoc.input_files import BUNDLE_MEMBER_LIMIT, read_limited

    return read_limited(path, str(path), BUNDLE_MEMBER_LIMIT, RuntimeFailure)
