"""Weights of a tiled reduction nest converted to double once per call.

A dot reduction's update converts every read to double (``fused.yaml``'s conv, dense
and matmul: ``fused_madd_float32(acc, (double)${x0}, (double)${x1})``), so a register
tile (:mod:`byoc.generator.c_fused.tiles`) converts each weight it reads, once per tap,
before broadcasting it over the tile's lanes. A *staged* input is converted once,
before the nest, into a double buffer of the workspace, and the nest reads that buffer
instead: ``(double)x`` of a double is the same value, so the results keep their bits,
and each multiply-add takes its weight straight from memory.

An input is staged when every use of it in the accumulators' updates is ``(double)``
of it (so the spec converts it anyway; an update that computes with the element's own
type, a pool's maximum, is left alone), its type is not already double, the nest has
register tiles, and its element is the same for every lane of a tile (a convolution's
weights, not its input). Staging the input too made the nest faster on one thread
(conv3x3 64->64 at 56x56: 2.7 against 3.1 ms) but slower on two (1.71 against 1.62 ms):
its double copy (1.6 MB) outgrows each core's 1 MB L2, from which every block of output
channels reads the whole input again, and the copy, written by the calling thread, is
read by both. The buffer costs 8 bytes per element of the weights.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from byoc.ir import TensorType

from ..c import dtypes as c_dtypes
from ..c.text import comment


@dataclass(frozen=True, slots=True)
class Staged:
    """One input of one nest, converted to double into ``buffer``."""

    buffer: str
    """The C name of the double buffer (``tmp<node>_x<input>``)."""
    type: TensorType
    """The buffer's type: the input's shape, float64."""
    source: str
    """The C array it is converted from."""
    value: str
    """The graph value of that array (the key of its workspace slot is ``key``)."""
    nest: int
    """The nest that reads it."""
    dtype: str = "float32"
    """The dtype of the source array (a half type's elements are read through its conversion)."""

    @property
    def key(self) -> str:
        """The buffer's name in the workspace plan (no graph value can be named so)."""
        return f"%staged:{self.buffer}"


def stageable(updates: Sequence[str], types: Sequence[TensorType]) -> tuple[int, ...]:
    """The inputs (their positions) that a tiled nest of these accumulator ``updates``
    (spec templates over ``${x0}``, ``${x1}``, ...) may read from a double buffer."""
    chosen = []
    for j, t in enumerate(types):
        token = f"${{x{j}}}"
        uses = sum(u.count(token) for u in updates)
        converted = sum(u.count(f"(double){token}") for u in updates)
        if t.dtype != "float64" and uses and uses == converted:
            chosen.append(j)
    return tuple(chosen)


def staged_read(read: str, array: str, buffer: str) -> str:
    """``read`` (``<array>[index]``) as a read of ``buffer`` at the same index."""
    assert re.match(rf"{re.escape(array)}\[", read), (read, array)
    return buffer + read[len(array) :]


def conversion(staged: Staged, label: str) -> list[str]:
    """The body statements that fill ``staged.buffer`` before its nest."""
    size = math.prod(staged.type.shape)
    read = c_dtypes.load(f"{staged.source}[s]", staged.dtype)
    note = (
        f"{staged.buffer}: {label} converted to double once, for the register tiles of nest "
        f"{staged.nest} (its update converts every read to double: the same values)"
    )
    return [
        f"  {comment(note)}",
        f"  for (int64_t s = 0; s < {size}; ++s) {staged.buffer}[s] = (double){read};",
    ]
