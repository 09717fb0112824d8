"""A pass of a ``c_fused`` reduction over a contiguous row, in vector lanes of partial
accumulators.

A reduction that makes several passes over its points (softmax: the maximum, then the
sum of the exponentials) is never blocked (:mod:`byoc.generator.c_fused.blocking`):
each output's pass is one loop whose accumulator waits for its own last update, so a
row of 128 scores took 128 dependent adds and 128 dependent maxima, and BERT-base's
softmax nests 9.2 ms of its 136 on ``fused``. Where every accumulator of the pass says
how two partial values combine (the spec's ``merge``), and the pass walks one
contiguous row (a single loop, no guard, its reads stepping by one element), the pass
keeps :data:`LANES` partial values, lane ``l`` taking the points ``l``, ``l + LANES``,
...; gcc turns the lane loop into vector code. The partial values merge in lane order,
and the points after the last whole group of lanes are added one by one: a fixed
order, the same on every run and machine, though not the single loop's (a sum in
double can differ from it in its last bits, which the float result rarely shows).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from byoc.spec.kind_c_fused import PART, Accumulator
from byoc.spec.template import render

from .blocking import reduction_loops, scaled_use
from .index import Level

LANES = 8
"""Partial values per accumulator: one AVX-512 register of doubles, two of AVX2."""


def lane_level(levels: Sequence[Level], reads: Sequence[str]) -> Level | None:
    """The one loop of a reduction pass that can run in lanes: the only level of more
    than one point, at least two groups of lanes long, no level with a step (a guard or
    a local), and every read that names its counter stepping by one element with it."""
    loops = [lv for lv in levels if lv.extent != 1]
    if len(loops) != 1 or loops[0].extent < 2 * LANES or any(lv.steps for lv in levels):
        return None
    return None if scaled_use(reads, {loops[0].var}) else loops[0]


def lane_pass(
    level: Level,
    names: Sequence[str],
    declared: Sequence[str],
    update: Callable[[Mapping[str, str], Callable[[str], str]], list[str]],
    merge: Callable[[str, str], str],
    acc_type: str,
) -> list[str]:
    """The pass over ``level`` in lanes: ``declared`` (each accumulator of ``names`` set
    to its init), then a block that keeps each one's partial values in an array, updates
    lane ``l`` with the points ``l``, ``l + LANES``, ..., merges the partial values in
    lane order and adds the remaining points one by one. ``update(names, at)`` gives the
    update statements with each accumulator named as ``names`` says and each read's
    index rewritten by ``at``; ``merge(acc, part)`` the merge of a partial value into
    an accumulator."""
    var, extent = level.var, level.extent
    lane = f"{names[0]}_lane"
    whole = extent - extent % LANES
    parts = {n: f"{n}_part[{lane}]" for n in names}
    point = re.compile(rf"\b{re.escape(var)}\b")
    in_lane = update(parts, lambda read: point.sub(f"({var} + {lane})", read))
    lines = [
        *declared,
        f"{{ /* {LANES} lanes of partial values, merged in lane order (generator/c_fused/partials.py) */",
        *(f"  {acc_type} {n}_part[{LANES}];" for n in names),
        f"  for (int64_t {lane} = 0; {lane} < {LANES}; ++{lane}) {{",
        *(f"    {n}_part[{lane}] = {n};" for n in names),
        "  }",
        f"  for (int64_t {var} = 0; {var} < {whole}; {var} += {LANES}) {{",
        f"    for (int64_t {lane} = 0; {lane} < {LANES}; ++{lane}) {{",
        *(f"      {s}" for s in in_lane),
        "    }",
        "  }",
        f"  for (int64_t {lane} = 0; {lane} < {LANES}; ++{lane}) {{",
        *(f"    {n} = {merge(n, parts[n])};" for n in names),
        "  }",
    ]
    if whole < extent:
        rest = update({n: n for n in names}, lambda read: read)
        lines += [
            f"  for (int64_t {var} = {whole}; {var} < {extent}; ++{var}) {{",
            *(f"    {s}" for s in rest),
            "  }",
        ]
    return [*lines, "}"]


def pass_lines(
    group: Sequence[Accumulator],
    accs: Mapping[str, str],
    base: Mapping[str, object],
    update_of: Mapping[str, str],
    reads: Sequence[str],
    levels: Sequence[Level],
    acc_type: str,
    in_lanes: bool,
) -> list[str]:
    """The C of one pass of a reduction: ``group``'s accumulators (C names ``accs``)
    declared and updated (``update_of``, with the nest's placeholder values ``base`` and
    ``reads``) over the reduction ``levels``; in lanes (:func:`lane_pass`) when
    ``in_lanes`` (a reduction of several passes, never blocked), every accumulator has
    a ``merge`` and :func:`lane_level` finds a loop that allows it."""
    decls = [f"{acc_type} {accs[a.name]} = {render(a.init, base)};" for a in group]

    def updates(names: Mapping[str, str], at: Callable[[str], str]) -> list[str]:
        """The updates, an accumulator's C name ``c`` written as ``names.get(c, c)``."""
        own = {a.name: names.get(accs[a.name], accs[a.name]) for a in group}
        args = {**base, **accs, **own, **{f"x{j}": at(r) for j, r in enumerate(reads)}}
        return [f"{own[a.name]} = {render(update_of[a.name], args)};" for a in group]

    level = lane_level(levels, reads) if in_lanes and all(a.merge for a in group) else None
    if level is None:
        return [*decls, *reduction_loops(levels, updates({}, lambda read: read))]
    by_c = {accs[a.name]: a for a in group}

    def merge(acc: str, part: str) -> str:
        return render(str(by_c[acc].merge), {**base, by_c[acc].name: acc, PART: part})

    return lane_pass(level, list(by_c), decls, updates, merge, acc_type)
