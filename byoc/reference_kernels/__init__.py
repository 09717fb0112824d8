"""numpy reference kernels: the ground truth for an op catalog of real networks, in one module per
family of ops (:data:`FAMILIES`); :func:`by_name` finds the kernel that an op's ``kernel:`` names.

Each kernel takes its input arrays positionally and its attributes as keyword arguments, with
ONNX-like semantics (layout N, C, spatial...; ``pads`` = begin of every axis, then end), and returns
the output array (split: a tuple of arrays). Attributes are validated by the matching shape
function (byoc.shape_conv_pool, shape_linear_norm, shape_layout, shape_reductions, shape_indexing),
so an invalid combination raises ValueError naming the attribute.

Dtypes: arithmetic kernels compute in float64 and return float64, whatever the input dtype; the
caller casts to the graph's dtype. Data-movement kernels (pad, gather, slice, split, concatenate,
reshape, flatten, transpose, squeeze, unsqueeze, expand, where) return the input dtype unchanged.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cache

import numpy as np

from . import (
    activations,
    casts,
    conv_pool,
    data_movement,
    elementwise,
    indexing,
    integer_products,
    normalization,
    reductions,
)

FAMILIES = (
    conv_pool,
    normalization,
    reductions,
    data_movement,
    activations,
    elementwise,
    casts,
    indexing,
    integer_products,
)
"""The modules of kernels: their public functions are the kernels."""


@cache
def by_name() -> dict[str, Callable[..., np.ndarray]]:
    """The public functions of the :data:`FAMILIES` modules, by name (a name defined by two
    families is a programming error, refused here rather than one kernel hiding the other)."""
    found: dict[str, Callable[..., np.ndarray]] = {}
    for module in FAMILIES:
        for name, fn in vars(module).items():
            if inspect.isfunction(fn) and fn.__module__ == module.__name__ and not name.startswith("_"):
                if name in found:
                    raise RuntimeError(
                        f"reference kernel {name} is defined in {found[name].__module__} and {module.__name__}"
                    )
                found[name] = fn
    return found
