"""What every runtime module offers, whatever runs its functions.

A *module* holds external (or host) functions by symbol. ``get_function(symbol)``
returns a callable in destination-passing style, the calling convention of the
generated TVM FFI entries: ``f(*inputs, *outputs)`` reads the input arrays and
writes the preallocated, C-contiguous output arrays, returning nothing. Compiled
libraries (through tvm_ffi), the ExampleJSON and JSON interpreters and the host
functions all follow it, so the graph executor dispatches to any of them alike.

``signature(symbol)`` gives the expected input and output types, so callers can
allocate outputs and check arguments without running anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from byoc.ir import TensorType

PackedFunction = Callable[..., None]


@dataclass(frozen=True, slots=True)
class Signature:
    inputs: tuple[TensorType, ...]
    outputs: tuple[TensorType, ...]

    def allocate_outputs(self) -> tuple[np.ndarray, ...]:
        return tuple(np.empty(t.shape, dtype=t.dtype) for t in self.outputs)


class Module(Protocol):
    kind: str
    """``library`` (compiled), ``examplejson``, ``json`` or ``host``."""

    def symbols(self) -> tuple[str, ...]: ...

    def get_function(self, symbol: str) -> PackedFunction: ...

    def signature(self, symbol: str) -> Signature: ...


def call(module: Module, symbol: str, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Allocate outputs, run ``symbol`` on ``inputs``, return the outputs."""
    outputs = module.signature(symbol).allocate_outputs()
    module.get_function(symbol)(*inputs, *outputs)
    return outputs
