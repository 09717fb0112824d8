"""Checks and conventions shared by the shape functions (the shape_* modules that give the
output shapes of the reference kernels, byoc.reference_kernels): integers, shapes, axes,
attribute lists, and numpy broadcasting.

Every function takes input shapes positionally and attributes as keyword arguments, with the same
names and defaults as its kernel, and returns the output shape as a tuple of ints (split: a tuple of
shapes). An invalid combination raises ValueError with a message naming the op and the attribute at
fault; when one attribute is at fault it is an :class:`AttributeProblem`, whose ``attr`` names it (so
the op catalog can point at that attribute in the text). Kernels call these functions first, so a
kernel rejects exactly what its shape function rejects.

Conventions (ONNX's unless said): layout N, C, spatial...; ``pads`` lists the begin value of every
axis it covers, then the end values; a negative axis counts from the end; ``None`` for strides,
dilations or pads means all ones / all zeros. Stricter than ONNX, to keep ground truth meaningful:
negative pads (cropping) are rejected, and so is a pooling window that would cover padding only.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from types import MappingProxyType

Shape = tuple[int, ...]


class AttributeProblem(ValueError):
    """An invalid value of one attribute, ``attr`` (``strides``, not ``strides[1]``)."""

    def __init__(self, attr: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.attr = attr.split("[", 1)[0]
        self.hint = hint


# ------------------------------------------------------------------------------------------ helpers


Flag = int
"""The annotation of a shape function's parameter for an attribute of type ``bool`` in
``ops.yaml``: the value arrives as 0 or 1, as ONNX writes flags
(:meth:`byoc.catalog.OpDef.kwargs`)."""


def check_int(value: object, what: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None


def check_shape(shape: Sequence[int], what: str) -> Shape:
    dims = tuple(check_int(d, what) for d in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"{what} {list(dims)} has a negative dimension")
    return dims


def check_ints(
    values: Sequence[int] | None, name: str, count: int, *, default: int, minimum: int, op: str, per: str
) -> Shape:
    """``count`` integers >= ``minimum`` (``default`` each when None); ``per`` says what they index."""
    if values is None:
        return (default,) * count
    ints = tuple(check_int(v, f"{op}: {name}") for v in values)
    if len(ints) != count:
        raise AttributeProblem(
            name, f"{op}: {name} has {len(ints)} values {list(ints)}, expected {count} ({per})"
        )
    for i, v in enumerate(ints):
        if v < minimum:
            rule = "positive" if minimum == 1 else "non-negative"
            raise AttributeProblem(name, f"{op}: {name}[{i}] = {v} must be {rule}")
    return ints


def check_flag(value: object, name: str, op: str) -> int:
    flag = check_int(value, f"{op}: {name}")
    if flag not in (0, 1):
        raise AttributeProblem(name, f"{op}: {name} = {flag} must be 0 or 1")
    return flag


def normalize_axis(axis: int, rank: int, op: str, name: str = "axis") -> int:
    """``axis`` in [-rank, rank) as a non-negative axis; ValueError otherwise."""
    a = check_int(axis, f"{op}: {name}")
    if not -rank <= a < rank:
        raise AttributeProblem(
            name, f"{op}: {name} = {a} is out of range for rank {rank} (valid: {-rank}..{rank - 1})"
        )
    return a % rank


def normalize_axes(axes: Sequence[int], rank: int, op: str, name: str = "axes") -> Shape:
    """Every axis normalised; duplicates (after normalisation) are rejected."""
    out = tuple(normalize_axis(a, rank, op, f"{name}[{i}]") for i, a in enumerate(axes))
    if len(set(out)) != len(out):
        raise AttributeProblem(name, f"{op}: {name} {list(axes)} names an axis twice")
    return out


SPATIAL_FILL: Mapping[str, tuple[int, int]] = MappingProxyType(
    {
        "strides": (1, 1),
        "dilations": (1, 1),
        "kernel_shape": (1, 1),
        "pads": (0, 2),
        "output_padding": (0, 1),
    }
)
"""Spatial ints attribute -> (the value an empty list stands for, values per spatial
axis): the one statement of these defaults, which the shape functions apply here and the
code generators through :func:`byoc.attr_values.resolve`."""


def check_spatial(
    values: Sequence[int] | None, name: str, axes: int, *, minimum: int, op: str, per: str
) -> Shape:
    """The spatial ints attribute ``name`` (:data:`SPATIAL_FILL`) over ``axes`` axes,
    checked; None (an empty list in the graph) stands for its fill value on every axis."""
    fill, per_axis = SPATIAL_FILL[name]
    return check_ints(values, name, per_axis * axes, default=fill, minimum=minimum, op=op, per=per)


def check_pads(pads: Sequence[int] | None, count: int, op: str, per: str) -> Shape:
    return check_spatial(pads, "pads", count, minimum=0, op=op, per=f"begin then end for {per}")


def broadcast(*shapes: Sequence[int]) -> Shape:
    """numpy broadcasting of ``shapes``."""
    dims = [check_shape(s, "broadcast: shape") for s in shapes]
    rank = max((len(s) for s in dims), default=0)
    out = []
    for i in range(-rank, 0):
        sizes = {s[i] for s in dims if len(s) >= -i} - {1}
        if len(sizes) > 1:
            raise ValueError(
                f"broadcast: shapes {[list(s) for s in dims]} do not broadcast at axis {i} (sizes {sorted(sizes)})"
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)
