"""The dot products of the ``c_fused`` codegen (conv, conv_transpose, dense, matmul):
which ops are dot products, when their accumulators are floats, and the constants
their nests read packed in panels (:mod:`byoc.generator.c_fused.staging`).

An op is a dot product when the spec gives each of its accumulators a float form of
its update (``float_update``): its weights are read again by every block of rows, so
packing them pays, and with the option ``float32_dots`` its float32 (float16, bfloat16)
sums run in those float accumulators."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from byoc.spec.kind_c_fused import ReductionBinding

from ..c import dtypes as c_dtypes
from .staging import Panel, Staged


def dot_product(binding: ReductionBinding) -> bool:
    """Whether the op is a dot product: each of its accumulators has a ``float_update``."""
    return all(a.float_update is not None for a in binding.accumulators)


def float_accumulators(values: Mapping[str, object], binding: ReductionBinding, dtype: str) -> bool:
    """Whether the accumulators of an op of ``dtype`` are C floats: with the option
    ``float32_dots`` (in ``values``), for a dot product whose values are computed in
    float (float32, float16, bfloat16)."""
    return (
        bool(values.get("float32_dots")) and c_dtypes.compute_type(dtype) == "float" and dot_product(binding)
    )


PANEL_POINTER_NOTE = "read through a local restrict pointer, not the array itself (generator/c_fused/dots.py)"
"""The comment on the pointer by which a nest reads a constant's panels. Indexed as the
file-scope array itself, a float register tile's multiply-adds kept their accumulators
on the stack (gcc 12): the whole product ran at half the speed of the same nest reading
a pointer (docs/performance-log.md, 2026-12-01)."""


@dataclass
class ConstantPanels:
    """The constants of one function that its nests read packed: the module holds each
    in its panels' layout, written when it is generated, instead of copying it at every
    call (``function.py`` writes the arrays)."""

    constants: set[str]
    """The names of the function's constants."""
    arrays: dict[str, tuple[str, Panel]] = field(default_factory=dict)
    """C array -> (constant, layout)."""

    def array(self, packed: Staged, c_arrays: Mapping[str, str]) -> str | None:
        """The C array of the packed input ``packed`` when it is a constant (``c_arrays``
        names each value's own array); None for any other input, and for a constant that
        another nest reads in another layout (that nest copies it at each call)."""
        if packed.value not in self.constants or packed.panel is None:
            return None
        name = f"{c_arrays[packed.value]}_panels"
        if self.arrays.setdefault(name, (packed.value, packed.panel))[1] != packed.panel:
            return None  # (equal small constants share an array, and so its panels)
        return name
