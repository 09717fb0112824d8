"""The memory layout of each value inside one ``c_source`` function (a spec's ``layouts:``,
:mod:`byoc.spec.layouts`).

A library kernel may work fastest on another order of a value's axes than byoc's
row-major one (channels last, say): given row-major data it reorders its source on the
way in and its result on the way out, on every call. When both ends of a value agree,
the value can stay in their order between them. The rule, per value of one function:

- a value takes a layout L other than ``plain`` only when the kernel computing it offers
  L at ``out``, *every* kernel reading it offers L at each port it reads it from, and
  it is read by at least one kernel;
- parameters, constants and the function's outputs stay plain (a caller hands them in,
  or reads them, row-major), so a value that is both an output and read by kernels
  stays plain;
- when several layouts qualify, the first the producing macro lists wins;
- a kernel whose macro says ``mixed_layouts: false`` sees one layout at all the ports of
  its ``layouts`` (a library whose fast code needs its source and result in one order):
  while one sees two, its values there go back to plain, and so on until none does. A
  value counts as any layout that stores its elements in the same order as its own
  (one that only moves axes of extent 1: a (N, C, 1, 1) value is the same bytes plain
  and channels last), and the kernel gets that layout's name at each such port.

Each kernel then gets its ports' layouts as ``${in<k>_layout}`` and ``${out_layout}``
(a layout's name, or ``plain``). A layout permutes axes and keeps the byte size, so the
memory plan and the workspace are the same whatever the layouts (a buffer may hold a
channels-last value, then a plain one). Kernels are shared by identical uses; a kernel's
layouts are part of what identifies it, so two uses that differ only in layout are two
kernels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from byoc.ir import Node, TensorType
from byoc.spec.backend import PLAIN_LAYOUT, BackendSpec, MacroDef
from byoc.spec.bindings import MacroBinding
from byoc.spec.layouts import LAYOUT_PLACEHOLDER, OUT_PORT

from ..composite import Match

SHOWN_VALUES = 6
"""How many of the values a buffer holds in a layout the body's comment names."""


def kernel_macro(spec: BackendSpec, node: Node, found: Match | None) -> MacroDef | None:
    """The macro ``node``'s kernel expands (its composite's pattern's, when ``found``),
    or None when there is none (the generator reports that where it renders the use)."""
    binding = found.pattern.binding if found is not None else spec.ops.get(node.op)
    name = binding.construct(node.type.rank) if isinstance(binding, MacroBinding) else None
    return spec.macros.get(name) if name is not None else None


@dataclass(frozen=True)
class LayoutPlan:
    """The layouts of one function: ``values``, each value (by number) that takes a layout
    other than plain -> its layout; ``ports``, each kernel (by node) with a port that is
    not plain -> the layouts of its inputs and result, in that order."""

    values: Mapping[int, str]
    ports: Mapping[int, tuple[str, ...]]


def choose_layouts(
    spec: BackendSpec,
    nodes: Sequence[Node],
    composites: Mapping[int, Match],
    node_inputs: Sequence[Sequence[int]],
    first_node_value: int,
    types: Sequence[TensorType],
    outputs: Sequence[int],
) -> LayoutPlan:
    """The layout of each value, and of each kernel's ports.

    Kernel ``k`` runs ``nodes[k]`` (the composite ``composites[k]``, when there), reads
    the values ``node_inputs[k]`` and computes value ``first_node_value + k``;
    ``outputs`` are the function's outputs. A spec without layouts costs nothing."""
    if not spec.layouts:
        return LayoutPlan({}, {})
    macros = [kernel_macro(spec, node, composites.get(k)) for k, node in enumerate(nodes)]
    offered = {
        first_node_value + k: m.layouts[OUT_PORT]
        for k, m in enumerate(macros)
        if m is not None and OUT_PORT in m.layouts
    }
    for value in outputs:
        offered.pop(value, None)
    readers: dict[int, list[tuple[MacroDef | None, int]]] = {}
    for k, ins in enumerate(node_inputs):
        for port, value in enumerate(ins):
            if value in offered:
                readers.setdefault(value, []).append((macros[k], port))
    chosen: dict[int, str] = {}
    for value, names in offered.items():
        taking = readers.get(value, [])
        for name in names:
            if (
                taking
                and spec.layouts[name].rank == types[value].rank
                and all(m is not None and name in m.layouts.get(f"in{port}", ()) for m, port in taking)
            ):
                chosen[value] = name
                break
    tied = {
        k: [v for port, v in _ports(node_inputs[k], first_node_value + k) if port in m.layouts]
        for k, m in enumerate(macros)
        if m is not None and not m.mixed_layouts
    }
    _untie(spec, tied, chosen, types)
    ports: dict[int, tuple[str, ...]] = {}
    for k, ins in enumerate(node_inputs):
        layouts = {port: chosen.get(v, PLAIN_LAYOUT) for port, v in _ports(ins, first_node_value + k)}
        if k in tied:
            # A tied kernel gets one name at all its ports: its plain values hold the
            # same bytes in its layout (they would not have been kept tied otherwise).
            common = _common_layout(spec, tied[k], chosen, types) or PLAIN_LAYOUT
            for port in macros[k].layouts:
                layouts[port] = common
        if any(layout != PLAIN_LAYOUT for layout in layouts.values()):
            ports[k] = tuple(layouts.values())
    return LayoutPlan(chosen, ports)


def _ports(ins: Sequence[int], value: int) -> list[tuple[str, int]]:
    """A kernel's ports and the values at them: ``in0``, ``in1``, ..., then ``out``."""
    return [(f"in{k}", v) for k, v in enumerate(ins)] + [(OUT_PORT, value)]


def _untie(
    spec: BackendSpec, tied: Mapping[int, list[int]], chosen: dict[int, str], types: Sequence[TensorType]
) -> None:
    """Make every tied kernel (``mixed_layouts: false``; its values at the ports of its
    ``layouts``) see one layout: while one sees two, its values go back to plain, which
    may untie another kernel in turn."""
    changed = True
    while changed:
        changed = False
        for values in tied.values():
            if _common_layout(spec, values, chosen, types) is None:
                for v in values:
                    changed |= chosen.pop(v, None) is not None


def _common_layout(
    spec: BackendSpec, values: Sequence[int], chosen: Mapping[int, str], types: Sequence[TensorType]
) -> str | None:
    """A layout (not plain, if one qualifies) that stores each of ``values`` the way its
    own layout does, or None. Both store alike when they differ only in where they put
    axes of extent 1: a (N, C, 1, 1) value has the same bytes plain and channels last."""
    own = [chosen.get(v, PLAIN_LAYOUT) for v in values]
    for name in sorted(set(own), key=lambda n: (n == PLAIN_LAYOUT, n)):
        wanted = [_memory_order(spec, name, types[v].shape) for v in values]
        if all(
            w is not None and w == _memory_order(spec, layout, types[v].shape)
            for w, v, layout in zip(wanted, values, own)
        ):
            return name
    return None


def _memory_order(spec: BackendSpec, layout: str, shape: Sequence[int]) -> tuple[int, ...] | None:
    """The axes of a value of ``shape`` in ``layout``, in the order memory steps through
    them, leaving out axes of extent 1 (they do not move an element); None when the
    layout is of another rank."""
    if layout == PLAIN_LAYOUT:
        axes: Sequence[int] = range(len(shape))
    else:
        axes = spec.layouts[layout].permutation
        if len(axes) != len(shape):
            return None
    return tuple(a for a in axes if shape[a] != 1)


def layout_values(inputs: int, ports: tuple[str, ...] | None) -> dict[str, str]:
    """``${in<k>_layout}`` and ``${out_layout}`` of a kernel of ``inputs`` inputs."""
    names = [f"in{k}" for k in range(inputs)] + [OUT_PORT]
    layouts = ports or (PLAIN_LAYOUT,) * len(names)
    return {LAYOUT_PLACEHOLDER.format(port=n): layout for n, layout in zip(names, layouts)}


def layout_text(ports: tuple[str, ...] | None) -> str:
    """What a kernel's comment adds about its layouts: `` (in0, out: channels_last)``."""
    if ports is None:
        return ""
    names = [f"in{k}" for k in range(len(ports) - 1)] + [OUT_PORT]
    by_layout: dict[str, list[str]] = {}
    for name, layout in zip(names, ports):
        if layout != PLAIN_LAYOUT:
            by_layout.setdefault(layout, []).append(name)
    return " (" + "; ".join(f"{', '.join(ns)}: {layout}" for layout, ns in by_layout.items()) + ")"


def layout_note(
    spec: BackendSpec, chosen: Mapping[int, str], where: Mapping[int, tuple[str, str]]
) -> list[str]:
    """The body comment's lines on its values that are not plain: per layout, the
    buffers that hold them (``where``: value -> (buffer, label))."""
    lines: list[str] = []
    for name, layout in spec.layouts.items():
        held: dict[str, list[str]] = {}
        for value, chosen_name in chosen.items():
            if chosen_name == name:
                buffer, label = where[value]
                held.setdefault(buffer, []).append(label)
        if not held:
            continue
        count = sum(len(labels) for labels in held.values())
        lines += [
            f"{count} value(s) stay in layout {name} (axes in memory order {list(layout.permutation)}):",
            "each is made and read only by kernels that take it (parameters and outputs stay plain):",
        ]
        for buffer, labels in held.items():
            shown = ", ".join(labels[:SHOWN_VALUES])
            more = f", ... ({len(labels)} values)" if len(labels) > SHOWN_VALUES else ""
            lines.append(f"  {buffer}: {shown}{more}")
    return lines


def overwritten_input(
    spec: BackendSpec, node: Node, found: Match | None, ins: Sequence[int], ports: tuple[str, ...] | None
) -> int | None:
    """The value (by number) whose buffer ``node``'s result may take: its macro's
    ``overwrites`` input, when that input and the result have one layout (a kernel that
    reorders between its ports' layouts reads and writes them at different places)."""
    macro = kernel_macro(spec, node, found)
    if macro is None or macro.overwrites is None:
        return None
    if ports is not None and ports[macro.overwrites] != ports[-1]:
        return None
    return ins[macro.overwrites]
