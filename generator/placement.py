"""How many ops each backend runs in an offloaded program: the ``placement:`` line of
``byoc run`` and of a build's log. Apart from :mod:`byoc.generator.explain`, which says
why, so that a build does not import the partitioner to count (a run of regions written
in the source never partitions).
"""

from __future__ import annotations

from byoc.ir import Node, Program


def placement(program: Program) -> dict[str | None, int]:
    """How many ops each backend runs in ``program`` (an offloaded one), and the host
    (key None): an op inside a region counts for its backend, a composite's ops each."""

    def ops(node: Node) -> int:
        return sum(map(ops, node.callee.nodes)) if node.callee is not None else 1

    counts: dict[str | None, int] = {}
    for fn in program.functions:
        for node in fn.nodes:
            backend = node.callee.backend if node.callee is not None else None
            counts[backend] = counts.get(backend, 0) + ops(node)
    return counts


def placement_summary(counts: dict[str | None, int]) -> str:
    """``placement: N of M ops offloaded (backend n, ...), K on the host`` (see :func:`placement`)."""
    total = sum(counts.values())
    host = counts.get(None, 0)
    per = ", ".join(f"{b} {n}" for b, n in sorted(counts.items(), key=lambda kv: -kv[1]) if b is not None)
    return f"placement: {total - host} of {total} ops offloaded ({per}), {host} on the host"
