"""What the placeholders of a ``c_source`` macro argument stand for, besides byoc's
fixed names and the vars: the extents of the inputs and the op's attributes.

- ``${in<k>_dim<j>}``, ``${in<k>_rank}``, ``${in<k>_size}``, ``${in<k>_shape}``,
  ``${in<k>_ctype}``, ``${in<k>_dtype}``: input ``k``'s extent ``j``, rank, element
  count, shape and element type (0-based, as the kernel's ``in0``, ``in1``, ...
  pointers are);
- ``${in<k>_stride<j>}``, ``${in<k>_strides}``: how many elements of input ``k`` one
  step along axis ``j`` *of the output* moves, after numpy broadcasting (0 where input
  ``k`` lacks the axis or has extent 1 there), one or all of them; only in a macro that
  declares ``broadcast: true``;
- ``${in<k>_layout}`` (and ``${out_layout}``, a fixed name of the kind): the layout
  the function chose for input ``k`` (the result), a name of the spec's ``layouts:``
  or ``plain`` (:mod:`byoc.spec.layouts`);
- ``${<attr>}``: the op's attribute ``attr`` as the kernel uses it
  (:func:`byoc.attr_values.resolve`): an int, a float (an exact C double literal), a
  bool (``1`` / ``0``), a string, or an ints list as one parenthesised argument,
  ``(1, 1)``;
- ``${<attr><j>}``: value ``j`` of an ints attribute whose length follows from the
  rank (``${strides0}``, ``${pads3}``).

Lists (``${shape}``, ``${in<k>_shape}``, an ints attribute) render in parentheses so
that their commas stay inside one macro argument; a body expands one with a variadic
helper macro of the prelude (``#define LIST(...) __VA_ARGS__``, then
``{LIST p_SHAPE_}``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from byoc.catalog import AttrDef, OpDef

INPUT_PLACEHOLDER = re.compile(
    r"in(0|[1-9][0-9]*)_(?:(dim|stride)(0|[1-9][0-9]*)|(rank|size|shape|strides|ctype|dtype|layout))\Z"
)
"""``${in<k>_dim<j>}``, ``${in<k>_stride<j>}``, ``${in<k>_rank}``, ``${in<k>_size}``,
``${in<k>_shape}``, ``${in<k>_strides}``, ``${in<k>_ctype}``, ``${in<k>_dtype}``,
``${in<k>_layout}``."""

STRIDE_PLACEHOLDERS = ("stride", "strides")
"""What an :class:`InputRef` of a broadcast stride says (``${in<k>_stride<j>}``,
``${in<k>_strides}``): placeholders only a macro with ``broadcast: true`` may use."""

WHOLE_SHAPE = ("rank", "shape", *STRIDE_PLACEHOLDERS)
"""Input placeholders that tell a kernel an input's whole shape (its rank included),
unlike ``${in<k>_dim<j>}``, from which a kernel knows only the axes it reads."""

CONST_INPUT = re.compile(r"in(0|[1-9][0-9]*)_const\Z")
"""``${in<k>_const}``, in a macro's ``state``, ``init`` and ``teardown`` only: the C name
of input k's constant array, for macros whose every user is a pattern that lists
input k in its ``constants``."""

_ELEMENT = re.compile(r"([a-z_][a-z0-9_]*?)(0|[1-9][0-9]*)\Z")


@dataclass(frozen=True, slots=True)
class InputRef:
    """``${in<index>_<what>}``; ``axis`` is set when ``what`` is ``dim`` (an axis of the
    input) or ``stride`` (an axis of the output)."""

    index: int
    what: str
    axis: int | None = None


def input_ref(name: str) -> InputRef | None:
    """What an input placeholder names, or None when ``name`` is not one."""
    m = INPUT_PLACEHOLDER.match(name)
    if m is None:
        return None
    if m.group(2) is not None:
        return InputRef(int(m.group(1)), m.group(2), int(m.group(3)))
    return InputRef(int(m.group(1)), m.group(4))


def const_input(name: str) -> int | None:
    """The input index ``${in<k>_const}`` names, or None when ``name`` is not one."""
    m = CONST_INPUT.match(name)
    return None if m is None else int(m.group(1))


def attribute_of(op: OpDef, name: str) -> tuple[AttrDef, int | None] | None:
    """The attribute of ``op`` that ``${name}`` stands for, with the index of one value
    of an ints attribute (``strides1`` -> strides, 1); None when it names none."""
    for a in op.attrs:
        if a.name == name:
            return a, None
    m = _ELEMENT.match(name)
    if m is not None:
        for a in op.attrs:
            if a.name == m.group(1) and a.type == "ints":
                return a, int(m.group(2))
    return None


def attribute_placeholders(op: OpDef) -> str:
    """The attribute placeholders of ``op``, for hints."""
    shown = [f"${{{a.name}}}" + (f", ${{{a.name}0}}, ..." if a.type == "ints" else "") for a in op.attrs]
    return ", ".join(shown) if shown else "none (it has no attributes)"
