"""Register-blocked reduction nests of the ``c_fused`` codegen (option ``block_reductions``).

A reduction anchor's plain nest computes one output element at a time: its accumulator
is one ``double`` that every point of the reduction space updates in turn, so each add
waits for the one before and nothing runs in vector lanes. A *blocked* nest computes a
block of outputs at once, with the reduction loops outside the block:

* the **lanes**: a run of consecutive elements along the innermost output loop (up to
  :data:`CHUNK`), the loop nearest the reduction loops inside;
* and a **block** of :data:`WIDTHS` elements along another output loop whose counter no
  index step uses and no lane-dependent read uses (a convolution's output channels: each
  input vector read is reused for several channels), when one divides its extent.

Every output keeps its own accumulator (``t0_acc[block][lane]``, doubles) and its own
summation order, the reduction space's, so the results are bit-identical to the plain
nest's; only which output is updated next changes. The accumulators of a block are
independent, so gcc -O3 vectorises the lane loop, which is innermost: at each point of
the reduction, the block's outputs one after the other, each over the lanes (with the
block loop inside the lane loop instead, gcc left the lanes scalar where the input was
8-bit: a conv_integer 16->16 at 16x16 took 550 µs on one thread, 380 µs with the lanes
innermost; the same conv in float32, 207 and 131 µs). A guard that skips a point of the
reduction for some lanes (a convolution tap on the padding, :class:`~.index.Bound`)
becomes the lane loop's bounds, so no lane reads outside its input and no branch is
left in the loop; every other step stays where it was, or moves into the lane loop when
it defines a local from the lane's counter. An anchor whose lanes need a guard that is
not affine in the lane counter (a strided transposed convolution) keeps the plain nest.

After the reduction loops, each output of the block gets its result and its fused
consumers (bias_add, batch_norm, relu, ...) and is stored, as in the plain nest.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..c.text import C_WORD
from .index import Anchor, Bound, Level, affine

CHUNK = 64
"""The most lanes per block: 64 doubles per accumulator row stay in the L1 cache."""
FEWEST_LANES = 8
"""The fewest lanes a block is cut to for its reads' sake (:func:`lane_chunk`)."""
L1_SETS, LINE_BYTES, LINES_PER_SET = 64, 64, 4
"""The L1 data cache as :func:`lane_chunk` sees it: 64 sets of 64-byte lines (4 KB
before the sets repeat, on every x86 core of this century), of which a block's strided
reads may fill 4 lines of each set, half of the smallest associativity (8 ways)."""
WIDTHS = (4, 3, 2)
"""The block widths tried, widest first: the first that divides the loop's extent (a
nest that reads staged double weights tries :data:`~.tiles.STAGED_WIDTHS`)."""

_DEFINE = re.compile(r"const int64_t (\w+) = ")


@dataclass(frozen=True, slots=True)
class Blocking:
    """How one reduction nest is blocked: loop positions (outermost 0) and sizes."""

    lane: int
    """The loop of the lanes: the innermost."""
    chunk: int
    """The most lanes per block."""
    block: int | None
    """The other blocked loop, or None."""
    width: int
    """Outputs per block along ``block`` (1 without one)."""
    levels: tuple[Level, ...]
    """The reduction levels without the steps that moved into the lane loop."""
    lane_steps: tuple[str, ...]
    """The index locals defined from the lane counter, in the lane loop."""
    lower: tuple[str, ...]
    """C expressions the lane counter must be at least (from the guards)."""
    upper: tuple[str, ...]
    """C expressions the lane counter must be below."""
    lane_reads: tuple[bool, ...] = ()
    """For each of the anchor's reads, whether its element changes from lane to lane
    (it names the lane counter or a lane local)."""
    interior: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    """The lane bounds at their extreme points (lower, upper): between them, no guard
    of the lanes fails anywhere in the reduction (:mod:`byoc.generator.c_fused.tiles`).
    None when a bound is not affine in the reduction and output counters."""


def _uses(text: str, names: set[str]) -> bool:
    return any(w in names for w in C_WORD.findall(text))


def plan_blocking(
    variables: Sequence[str],
    extents: Sequence[int],
    anchor: Anchor,
    most: int = CHUNK,
    itemsizes: Sequence[int] = (),
) -> Blocking | None:
    """The blocking of a reduction nest over loops ``variables`` (outermost first), in
    blocks of at most ``most`` lanes (fewer for strided reads of inputs of
    ``itemsizes`` bytes an element: :func:`lane_chunk`), or None when its lanes would
    need a guard that is not affine in the lane counter."""
    if not variables:
        return None
    lane = len(variables) - 1
    most = lane_chunk(anchor, variables[lane], itemsizes, most)
    moving = {variables[lane]}
    levels, lane_steps, lower, upper = [], [], [], []
    bounds: list[Bound] = []
    for level in anchor.levels:
        kept = []
        guards = {b.guard: b for b in level.bounds}
        for step in level.steps:
            if not _uses(step, moving):
                kept.append(step)
                continue
            define = _DEFINE.match(step)
            bound = guards.get(step)
            if define:
                moving.add(define.group(1))
                lane_steps.append(step)
            elif bound is not None and _lane_bounds(bound, variables[lane], moving, lower, upper):
                bounds.append(bound)
            else:
                return None
        levels.append(Level(level.var, level.extent, tuple(kept)))
    lane_reads = tuple(_uses(r, moving) for r in anchor.reads)
    return Blocking(
        lane,
        min(most, extents[lane]),
        *_block(variables, extents, anchor, lane_reads),
        tuple(levels),
        _used(lane_steps, anchor.reads),
        tuple(lower),
        tuple(upper),
        lane_reads,
        _interior(bounds, variables, anchor.levels) if _unit_stride(anchor, moving, lane_steps) else None,
    )


def lane_chunk(anchor: Anchor, lane: str, itemsizes: Sequence[int], most: int = CHUNK) -> int:
    """How many lanes a block of the reduction ``anchor`` takes (at most ``most``):
    fewer where a read steps through memory from lane to lane by a large stride (a
    reduction along the last axis, whose lanes are rows), so that the lines of one step
    of the reduction do not crowd one set of the L1 cache. A row of 1024 floats is
    4 KB: every lane's line falls in the same set, and 64 lanes missed the L1 at every
    read (a mean over 128 rows of 1024 took 351 us with 64 lanes, 70 us with 8:
    docs/performance-log.md, 2026-12-01). Each output still sums its points in the
    same order, so the results are the same bits."""
    chunk = most
    for read, size in zip(anchor.reads, itemsizes):
        found = re.search(rf"(?<![\w.]){re.escape(lane)} \* (\d+)(?![\w.])", read)
        step = int(found.group(1)) * size if found else 0
        while step >= LINE_BYTES and chunk > FEWEST_LANES:
            per_set = Counter(k * step // LINE_BYTES % L1_SETS for k in range(chunk))
            if max(per_set.values()) <= LINES_PER_SET:
                break
            chunk //= 2
    return chunk


def _unit_stride(anchor: Anchor, moving: set[str], lane_steps: Sequence[str]) -> bool:
    """Whether every read that depends on the lanes steps through consecutive elements
    from lane to lane: each lane-dependent name enters the read's index (and each lane
    local its definition) with coefficient 1. Register tiles pay only then: a tile of a
    strided read (a dense's weights, a strided convolution) builds every vector from
    scalar loads, and the blocked lane loops were faster there."""
    texts = [*anchor.reads, *(step.split(" = ", 1)[1] for step in lane_steps)]
    return not scaled_use(texts, moving)


def scaled_use(texts: Sequence[str], names: set[str]) -> bool:
    """Whether a C index expression of ``texts`` multiplies, divides or takes the
    remainder of one of ``names``: an index that does not step by one element with it."""
    alternatives = "|".join(sorted(map(re.escape, names)))
    return any(re.search(rf"(\* \(?|/ )\b({alternatives})\b|\b({alternatives})\)? [*/%]", t) for t in texts)


def _interior(
    bounds: Sequence[Bound], variables: Sequence[str], levels: Sequence[Level]
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The lane bounds of ``bounds`` that hold at every point of the reduction: each
    reduction counter in a bound's local taken at the end of its range that makes the
    bound tightest (a lower bound at its highest, an upper at its lowest)."""
    last = {lv.var: lv.extent - 1 for lv in levels if lv.extent != 1}
    lane, outputs = variables[-1], set(variables[:-1])
    lower: list[str] = []
    upper: list[str] = []
    for bound in bounds:
        if any(e not in last and e not in outputs and e != lane and not e.isdigit() for e, _ in bound.terms):
            return None
        for high, out in ((False, lower), (True, upper)):
            # lower: lane >= (-const - sum c*r) / a, largest where c*r is smallest; upper: the reverse
            terms = tuple(
                (str(last[e]) if (c > 0) == high else "0", c) if e in last else (e, c) for e, c in bound.terms
            )
            one = Bound(
                bound.local, terms, bound.const, bound.size, bound.low and not high, bound.high and high, ""
            )
            _lane_bounds(one, lane, {lane}, out, out)
    return tuple(lower), tuple(upper)


def _lane_bounds(bound: Bound, lane: str, moving: set[str], lower: list[str], upper: list[str]) -> bool:
    """Add the lane counter's bounds that make ``bound``'s guard never fail, when its local
    is ``a * lane + rest`` with ``a > 0`` and ``rest`` independent of the lane; whether so.
    The lane counter is never negative, so a lower bound may round towards zero."""
    coef = dict(bound.terms).get(lane, 0)
    rest = [(e, -c) for e, c in bound.terms if e != lane]
    if coef <= 0 or any(_uses(e, moving) for e, _ in rest):
        return False
    if bound.low:  # a * lane + rest >= 0
        low = affine(rest, -bound.const)
        lower.append(low if coef == 1 else f"({low} + {coef - 1}) / {coef}")
    if bound.high:  # a * lane + rest <= size - 1
        high = affine(rest, bound.size - 1 - bound.const)
        upper.append(
            affine(rest, bound.size - bound.const)
            if coef == 1
            else f"({high} < 0 ? 0 : ({high}) / {coef} + 1)"
        )
    return True


def _used(steps: Sequence[str], reads: Sequence[str]) -> tuple[str, ...]:
    """The lane locals that a read or a later local uses (one used only by a guard,
    now the lane loop's bounds, is left out: C would warn that it is unused)."""
    kept: list[str] = []
    for step in reversed(steps):
        name = _DEFINE.match(step).group(1)  # type: ignore[union-attr]
        if _uses(" ".join([*reads, *kept]), {name}):
            kept.insert(0, step)
    return tuple(kept)


def _block(
    variables: Sequence[str], extents: Sequence[int], anchor: Anchor, lane_reads: Sequence[bool]
) -> tuple[int | None, int]:
    """The loop blocked besides the lanes, innermost first among those whose counter no
    step uses and no lane-dependent read (``lane_reads``) uses, and its width."""
    steps = [s for level in anchor.levels for s in level.steps]
    moving = [r for r, lanes in zip(anchor.reads, lane_reads) if lanes]
    for k in reversed(range(len(variables) - 1)):
        names = {variables[k]}
        if any(_uses(s, names) for s in steps) or any(_uses(r, names) for r in moving):
            continue
        width = next((w for w in WIDTHS if extents[k] % w == 0), None)
        if width is not None:
            return k, width
    return None, 1


def widened(plan: Blocking, extents: Sequence[int], widths: Sequence[int]) -> Blocking:
    """``plan`` with its blocked loop in blocks of the first of ``widths`` that divides
    the loop's extent, when that leaves at least two blocks (the thread pool shares the
    blocks out); else ``plan`` as it is."""
    if plan.block is None:
        return plan
    extent = extents[plan.block]
    width = next((w for w in widths if extent % w == 0), plan.width)
    return replace(plan, width=width) if extent // width >= 2 else plan


class BlockedText:
    """The C text of one blocked nest's accumulators, given its loop counters."""

    def __init__(
        self, plan: Blocking, variables: Sequence[str], extents: Sequence[int], ctype: str = "double"
    ) -> None:
        self.plan = plan
        self.ctype = ctype
        """The C type of the accumulators: double, or float (option ``float32_dots``)."""
        self.lane = variables[plan.lane]
        self.lane_extent = extents[plan.lane]
        self.block = None if plan.block is None else variables[plan.block]

    @staticmethod
    def start(var: str) -> str:
        """The counter of the loop over the blocks of loop ``var``."""
        return f"{var}b"

    def element(self, acc: str) -> str:
        """The current output's element of accumulator array ``acc``."""
        lane = f"[{self.lane} - {self.start(self.lane)}]"
        return f"{acc}[{self.block}j]{lane}" if self.block else f"{acc}{lane}"

    def lane_end(self) -> str:
        """The end of the current block's lanes."""
        end = f"{self.start(self.lane)} + {self.plan.chunk}"
        if self.lane_extent % self.plan.chunk == 0:
            return end
        return f"({end} < {self.lane_extent} ? {end} : {self.lane_extent})"

    def declaration(self, acc: str) -> str:
        """The accumulator array ``acc`` of a block."""
        shape = (f"[{self.plan.width}]" if self.block else "") + f"[{self.plan.chunk}]"
        return f"{self.ctype} {acc}{shape};"

    def fill(self, acc: str, init: str) -> list[str]:
        """Every element of the accumulator array ``acc`` set to ``init``."""
        inner = (
            f"for (int64_t l = 0; l < {self.plan.chunk}; ++l) {acc}{'[j]' if self.block else ''}[l] = {init};"
        )
        if self.block:
            return [f"for (int64_t j = 0; j < {self.plan.width}; ++j) {{", f"  {inner}", "}"]
        return [inner]

    def each_output(self, body: Sequence[str]) -> list[str]:
        """``body`` for every output of the block (its counters defined as in the plain nest)."""
        lines: list[str] = []
        indent = ""
        if self.block:
            j = f"{self.block}j"
            lines += [
                f"for (int64_t {j} = 0; {j} < {self.plan.width}; ++{j}) {{",
                *self.block_counter(body, "  "),
            ]
            indent = "  "
        lines.append(
            f"{indent}for (int64_t {self.lane} = {self.start(self.lane)}; {self.lane} < {self.lane_end()}; ++{self.lane}) {{"
        )
        lines += [f"{indent}  {line}" for s in body for line in s.split("\n")]
        lines.append(f"{indent}}}")
        return lines + (["}"] if self.block else [])

    def block_counter(self, uses: Sequence[str], indent: str) -> list[str]:
        """The block's counter, defined where ``uses`` read it: an operand of no
        elements along that axis (stride 0) leaves it unread, an unused variable under
        -Werror."""
        if not any(re.search(rf"\b{self.block}\b", u) for u in uses):
            return []
        return [f"{indent}const int64_t {self.block} = {self.start(self.block)} + {self.block}j;"]

    def lanes(self, name: str, updates: Sequence[str]) -> list[str]:
        """The lane loops at one point of the reduction: their bounds (the guards), and
        for every output of the block, a loop over the lanes with the lane-dependent
        locals and ``updates``."""
        lo, hi = f"{name}_lo", f"{name}_hi"
        lines = [f"int64_t {lo} = {self.start(self.lane)};", f"int64_t {hi} = {self.lane_end()};"]
        lines += [f"if ({lo} < {e}) {lo} = {e};" for e in self.plan.lower]
        lines += [f"if ({hi} > {e}) {hi} = {e};" for e in self.plan.upper]
        lane_loop = [
            f"for (int64_t {self.lane} = {lo}; {self.lane} < {hi}; ++{self.lane}) {{",
            *(f"  {s}" for s in self.plan.lane_steps),
            *(f"  {u}" for u in updates),
            "}",
        ]
        if not self.block:
            return [*lines, *lane_loop]
        j = f"{self.block}j"
        return [
            *lines,
            f"for (int64_t {j} = 0; {j} < {self.plan.width}; ++{j}) {{",
            *self.block_counter(updates, "  "),
            *(f"  {s}" for s in lane_loop),
            "}",
        ]


def reduction_loops(levels: Sequence[Level], body: Sequence[str], unroll: int = 0) -> list[str]:
    """The reduction loops around ``body``, two spaces per level. A level of extent 1
    has no loop; when one with steps comes before any loop, everything sits in a
    ``do { ... } while (0)``, so that its ``continue`` skips the point (and keeps its
    locals to itself). The innermost loop is marked to be unrolled whole (``#pragma GCC
    unroll``, which gcc and clang know) when its extent is at most ``unroll``: a
    kernel's taps, never a channel loop (unrolling a 1x1 convolution's 2,048 channels
    kept gcc busy for more than 20 minutes)."""
    lines: list[str] = []
    indent = ""
    closing: list[str] = []
    first_loop = next((k for k, lv in enumerate(levels) if lv.extent != 1), len(levels))
    last_loop = max((k for k, lv in enumerate(levels) if lv.extent != 1), default=-1)
    if any(lv.steps for lv in levels[:first_loop]):
        lines.append("do { /* a single point: `continue` skips it */")
        closing.append("} while (0);")
        indent = "  "
    for k, lv in enumerate(levels):
        if lv.extent != 1:
            if k == last_loop and lv.extent <= unroll:
                lines.append(f"{indent}#pragma GCC unroll {lv.extent}")
            lines.append(f"{indent}for (int64_t {lv.var} = 0; {lv.var} < {lv.extent}; ++{lv.var}) {{")
            closing.append(f"{indent}}}")
            indent += "  "
        lines += [indent + s for s in lv.steps]
    lines += [indent + s for s in body]
    return lines + list(reversed(closing))
