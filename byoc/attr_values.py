"""An op's attribute values as a kernel runs them: the catalog's defaults resolved.

A node carries its attributes as the graph says them, defaults filled in
(:attr:`byoc.ir.Node.attrs`); an empty ``strides`` there means "the kernel's default".
Code generators need the values the kernel really uses, so that a C macro or an engine
layer reads ``strides = (1, 1)`` rather than an empty list. :func:`resolve` computes
them, once, for every generator (``c_source`` macro arguments, engine layer lines,
``c_fused`` loops).

The conventions are those the reference kernels and the shape rules share
(:mod:`byoc.reference_kernels`, :mod:`byoc.shape_checks`), and they key on the
attributes a *shape rule* reads, never on op names:

- a rule that reads ``strides`` lays windows over the spatial axes of its first input
  (N, C, spatial...); there an empty ``strides``, ``dilations`` or ``kernel_shape``
  means one 1 per spatial axis, an empty ``pads`` a 0 at the begin and the end of each
  (begins first), an empty ``output_padding`` one 0 per spatial axis;
- an ``axis`` (int) that the rule reads counts the first input's axes; a negative one
  counts from the end and is resolved to its non-negative index (``flatten``'s axis
  may equal the rank, which stays as it is).

Every other attribute is passed as the node has it. Bools stay bools and floats
floats: rendering them (``1``/``0``, exact C literals) is the generators' business.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from .catalog import OpDef
from .ir import AttrValue, TensorType
from .shape_checks import SPATIAL_FILL

WINDOW_MARK = "strides"
"""A rule that reads this attribute lays windows over the spatial axes of its first input."""


AXIS = "axis"
"""The int attribute that names an axis of the first input."""


def spatial_axes(op: OpDef, rank: int) -> int | None:
    """How many spatial axes a first input of ``rank`` has for ``op``; None when the
    op's rule lays no windows (reads no ``strides``)."""
    if WINDOW_MARK not in op.rule.attrs:
        return None
    return max(rank - 2, 0)


def ints_length(op: OpDef, name: str, rank: int) -> int | None:
    """How many values the resolved ints attribute ``name`` of ``op`` has when its first
    input has ``rank``; None when that does not follow from the rank (``perm``, ``axes``)."""
    n = spatial_axes(op, rank)
    if n is None or name not in SPATIAL_FILL or op.rule.attrs.get(name) != "ints":
        return None
    return n * SPATIAL_FILL[name][1]


class AttrView(Mapping[str, AttrValue]):
    """A node's resolved attributes (:func:`resolve`), read by name as a mapping, or
    typed by the getters, which say what the catalog declares (``int``, ``ints``,
    ``float``, ``bool``, ``str``): ``attrs.ints("strides")`` is a ``tuple[int, ...]``,
    ``attrs.integer("groups")`` an ``int``. A getter of the wrong type is a bug of the
    caller (the catalog declared the attribute otherwise), raised as a TypeError."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, AttrValue]) -> None:
        self._values = dict(values)

    def __getitem__(self, name: str) -> AttrValue:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"AttrView({self._values!r})"

    def integer(self, name: str) -> int:
        value = self._values[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"attribute {name} is {value!r}, not an int")
        return value

    def ints(self, name: str) -> tuple[int, ...]:
        value = self._values[name]
        if not isinstance(value, tuple):
            raise TypeError(f"attribute {name} is {value!r}, not a list of ints")
        return value

    def real(self, name: str) -> float:
        value = self._values[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"attribute {name} is {value!r}, not a number")
        return float(value)

    def flag(self, name: str) -> bool:
        value = self._values[name]
        if not isinstance(value, bool):
            raise TypeError(f"attribute {name} is {value!r}, not a bool")
        return value

    def text(self, name: str) -> str:
        value = self._values[name]
        if not isinstance(value, str):
            raise TypeError(f"attribute {name} is {value!r}, not a string")
        return value


def resolve(op: OpDef, inputs: Sequence[TensorType], attrs: Sequence[tuple[str, AttrValue]]) -> AttrView:
    """Every attribute of a node of ``op`` on ``inputs``, in catalog order, as the kernel
    uses it (see the module docstring), as a typed view (:class:`AttrView`). ``attrs``
    must have passed the op's checks."""
    rank = inputs[0].rank if inputs else 0
    n = spatial_axes(op, rank)
    reads = op.rule.attrs
    out: dict[str, AttrValue] = {}
    for name, value in attrs:
        if n is not None and name in SPATIAL_FILL and reads.get(name) == "ints" and value == ():
            fill, per_axis = SPATIAL_FILL[name]
            value = (fill,) * (n * per_axis)
        elif name == AXIS and reads.get(name) == "int" and isinstance(value, int) and value < 0:
            value = value + rank
        out[name] = value
    return AttrView(out)
