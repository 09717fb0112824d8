"""Step 2 of partitioning (:mod:`byoc.generator.partition`): the region of each node,
grown and merged along a union-find whose bit sets keep regions from forming a cycle."""

from __future__ import annotations

from collections.abc import Sequence, Set

from byoc.ir import Function


def merge(fn: Function, chosen: Sequence[str | None], single: Set[int] = frozenset()) -> list[int | None]:
    """The region of each node (None: the host); regions never form a cycle.
    The nodes at the indices in ``single`` each stay alone in their region.

    Regions are classes of a union-find. ``deps[v]`` is the bit set of region ids
    value ``v`` depends on, ``mask[c]`` the ids in class ``c``, and ``ext[c]`` what
    the inputs entering class ``c`` from outside depend on. A node joins (and so
    merges) the classes of its same-backend producers when no other input depends
    on them and no two of them reach each other through the outside.

    A region runs as a whole, so a value that depends on one id of a class depends
    on everything entering the class; as classes merge, ``deps`` recorded earlier
    miss those paths. ``closure`` adds them back before every check.
    """
    parent: list[int] = []
    mask: list[int] = []
    ext: list[int] = []
    backend_of: list[str] = []
    closed: list[bool] = []
    region_of_value: dict[str, int] = {}
    deps: dict[str, int] = {}
    regions: list[int | None] = []

    def find(r: int) -> int:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    def root_of(name: str) -> int | None:
        r = region_of_value.get(name)
        return None if r is None else find(r)

    def closure(bits: int) -> int:
        """Every region id ``bits`` depends on, through whole classes and their inputs."""
        seen = 0
        todo = bits
        while todo:
            low = todo & -todo
            todo ^= low
            if seen & low:
                continue
            c = find(low.bit_length() - 1)
            seen |= mask[c]
            todo |= (mask[c] | ext[c]) & ~seen
        return seen

    for k, (node, backend) in enumerate(zip(fn.nodes, chosen)):
        reach = 0
        for name in node.inputs:
            reach |= deps.get(name, 0)
        region = None
        if backend is not None:
            joined: list[int] = []
            for name in () if k in single else node.inputs:
                c = root_of(name)
                if c is None or c in joined or backend_of[c] != backend or closed[c]:
                    continue
                trial = 0
                for j in (*joined, c):
                    trial |= mask[j]
                outside_ok = all(
                    not closure(deps.get(q, 0)) & trial for q in node.inputs if root_of(q) not in (*joined, c)
                )
                pairs_ok = all(
                    not closure(ext[c]) & mask[j] and not closure(ext[j]) & mask[c] for j in joined
                )
                if outside_ok and pairs_ok:
                    joined.append(c)
            if joined:
                region = joined[0]
                for c in joined[1:]:
                    parent[c] = region
                    mask[region] |= mask[c]
                    ext[region] |= ext[c]
            else:
                region = len(parent)
                parent.append(region)
                mask.append(1 << region)
                ext.append(0)
                backend_of.append(backend)
                closed.append(k in single)
            for q in node.inputs:
                if root_of(q) != region:
                    ext[region] |= deps.get(q, 0)
            reach |= mask[region]
            for out in node.outputs:
                region_of_value[out] = region
        for out in node.outputs:
            deps[out] = reach
        regions.append(region)
    roots = [None if r is None else find(r) for r in regions]
    renumber: dict[int, int] = {}
    return [None if r is None else renumber.setdefault(r, len(renumber)) for r in roots]
