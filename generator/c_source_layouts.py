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
- when several layouts qualify, the first the producing macro lists wins.

Each kernel then gets its ports' layouts as ``${in<k>_layout}`` and ``${out_layout}``
(a layout's name, or ``plain``). A layout permutes axes and keeps the byte size, so the
memory plan and the workspace are the same whatever the layouts (a buffer may hold a
channels-last value, then a plain one). Kernels are shared by identical uses; a kernel's
layouts are part of what identifies it, so two uses that differ only in layout are two
kernels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from byoc.ir import Node, TensorType
from byoc.spec.backend import PLAIN_LAYOUT, BackendSpec, MacroDef
from byoc.spec.bindings import MacroBinding
from byoc.spec.layouts import LAYOUT_PLACEHOLDER, OUT_PORT

from .composite import Match

SHOWN_VALUES = 6
"""How many of the values a buffer holds in a layout the body's comment names."""


def kernel_macro(spec: BackendSpec, node: Node, found: Match | None) -> MacroDef | None:
    """The macro ``node``'s kernel expands (its composite's pattern's, when ``found``),
    or None when there is none (the generator reports that where it renders the use)."""
    binding = found.pattern.binding if found is not None else spec.ops.get(node.op)
    name = binding.construct(node.type.rank) if isinstance(binding, MacroBinding) else None
    return spec.macros.get(name) if name is not None else None


def choose_layouts(
    spec: BackendSpec,
    nodes: Sequence[Node],
    composites: Mapping[int, Match],
    node_inputs: Sequence[Sequence[int]],
    first_node_value: int,
    types: Sequence[TensorType],
    outputs: Sequence[int],
) -> dict[int, str]:
    """Each value (by number) that takes a layout other than plain -> its layout.

    Kernel ``k`` runs ``nodes[k]`` (the composite ``composites[k]``, when there), reads
    the values ``node_inputs[k]`` and computes value ``first_node_value + k``;
    ``outputs`` are the function's outputs. A spec without layouts costs nothing."""
    if not spec.layouts:
        return {}
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
    return chosen


def kernel_layouts(chosen: Mapping[int, str], ins: Sequence[int], value: int) -> tuple[str, ...] | None:
    """The layouts of one kernel's inputs and result, in that order; None when all are plain."""
    if not chosen:
        return None
    ports = tuple(chosen.get(i, PLAIN_LAYOUT) for i in ins) + (chosen.get(value, PLAIN_LAYOUT),)
    return None if all(p == PLAIN_LAYOUT for p in ports) else ports


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
