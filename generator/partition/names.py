"""Readable names for the anonymous values (nested calls) of a function where
partitioning needs them: values that cross a region or a composite's boundary."""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import replace

from byoc.ir import ANON_PREFIX, Function


def rename_anonymous(fn: Function, names: Set[str]) -> Function:
    """Give the anonymous values among ``names`` readable, unique names (``relu_0``)."""
    crossing = {name for name in names if name.startswith(ANON_PREFIX)}
    if not crossing:
        return fn
    taken = set(fn.types())
    ops = {out: node.op for node in fn.nodes for out in node.outputs}
    rename: dict[str, str] = {}
    for name in sorted(crossing, key=lambda n: int(n[len(ANON_PREFIX) :])):
        rename[name] = fresh_name(ops[name], taken)
    nodes = tuple(
        replace(n, outputs=substitute(n.outputs, rename), inputs=substitute(n.inputs, rename))
        for n in fn.nodes
    )
    return replace(fn, nodes=nodes, outputs=substitute(fn.outputs, rename))


def fresh_name(base: str, taken: set[str]) -> str:
    """``<base>_<k>`` for the first k that no name of ``taken`` has; added to ``taken``."""
    k = 0
    while f"{base}_{k}" in taken:
        k += 1
    taken.add(f"{base}_{k}")
    return f"{base}_{k}"


def substitute(names: tuple[str, ...], rename: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(rename.get(n, n) for n in names)
