"""Register tiles of the blocked reduction nests (:mod:`byoc.generator.c_fused.blocking`):
the interior lanes of a block in accumulators that stay in vector registers.

A blocked nest updates its accumulator block ``t0_acc[block][lane]`` at every point of
the reduction, so each vector multiply-add also loads and stores it (it lives in the L1
cache), and a lane loop whose bounds vary with the point (a convolution tap on the
padding) ends each point with a remainder. Most lanes, though, read inside their inputs
at every point: the block's *interior*, where every lane bound holds even at its
extreme point (:func:`~.blocking.plan_blocking` derives it from the guards'
:class:`~.index.Bound`). The interior is computed in *tiles* of a fixed number
of lanes (:data:`TILES`) with the reduction loops inside the tile: the tile's
accumulators (``t0_acc_tile[block][lanes]``, at most 192 doubles) have compile-time
bounds, so gcc keeps them in vector registers across the whole reduction and stores
each once. The smallest size's last tile overlaps the one before rather than leaving a
remainder: the overlapping outputs are computed twice, the same way. The *border*
lanes, outside the interior, are computed one lane at a time (that lane's outputs of
the block together) with every guard of the plain nest. A block whose interior is
narrower than the smallest tile keeps the blocked lane loops.

Every output still sums the same points in the same order as the plain nest, so the
results stay bit-identical: only which outputs are computed together changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..c.text import comment
from .blocking import BlockedText, Blocking, reduction_loops
from .index import Level

TILES = (48, 16)
"""The lanes of the interior's tiles, widest first; the smallest's last tile overlaps.
With a block of 4 outputs, a tile of 48 lanes holds 192 doubles: 24 of AVX-512's 32
vector registers. Wider tiles convert each input read (float to double) for more
multiply-adds. conv3x3 at 56x56 (interior 54 lanes: 48 and an overlapping 16), the nest
on one thread with fused multiply-adds (the spec's float32 update): 6.5 ms, against 7.1
ms with a last tile of 8 and 7.1 ms with tiles of 32 and 16. A tile of 8 lanes is one
vector: gcc unrolled its lane loop and vectorised across the block instead, with
shuffles and the accumulators on the stack, and with ``#pragma GCC unroll 1`` on the lane
loop it left the fused multiply-adds scalar (14.5 ms)."""

STAGED_WIDTHS = (8, 4, 3, 2)
"""The block widths of a nest that reads staged double weights (:mod:`byoc.generator.c_fused.staging`):
each input vector it converts feeds the multiply-adds of up to 8 outputs (a convolution's
output channels), and each weight comes from memory as a double, so a wider block costs
no conversion. conv3x3 64->64 at 56x56 (the nest alone, median of 300 calls; two threads
/ one): blocks of 8 with tiles of 16, 1.39-1.42 / 2.61 ms; blocks of 4 with tiles of 40
and 16, 1.65-1.68 / 3.15 ms; blocks of 8 with tiles of 24 or 32 and 16, 1.45-1.47 ms;
blocks of 16 with tiles of 16, 1.65 ms. The border lanes gain too: each computes a block's
outputs together, and 8 independent sums keep both multiply-add pipes busy."""

STAGED_TILES = (40, 16)
"""The tiles of a nest that reads staged double weights, those whose accumulators
(block width times lanes) fit :data:`STAGED_ACCUMULATORS`, with its innermost reduction
loop and its block loop unrolled whole (``#pragma GCC unroll``). With a block of 4: 5
vectors of 4 outputs (20 accumulators) leave gcc registers for the inputs; conv3x3 with
blocks of 4 (one thread / two): tiles of 40 and 16, 3.05-3.10 / 1.61-1.63 ms; of 48 and
16, 3.25-3.28 / 1.70-1.71 ms; of 32 and 16, 3.14-3.15 / 1.67-1.74 ms; nothing staged,
tiles of 48 and 16 (:data:`TILES`), 3.16-3.21 / 1.67-1.71 ms. With a block of 8, tiles of
16 (16 vectors)."""

STAGED_ACCUMULATORS = 160
"""The most doubles in a staged tile's accumulators: 20 of AVX-512's 32 vector registers."""

UNROLL = 8
"""A staged nest's innermost reduction loop is unrolled whole when it has at most this
many points (a kernel row's taps): gcc then keeps the tile's accumulators in registers
across it. A longer loop (the channels of a 1x1 convolution) is left to gcc."""


@dataclass(frozen=True)
class TileSizes:
    """The register tiles for one vector width: :data:`AVX512` or :data:`AVX2`."""

    condition: str
    """The preprocessor condition under which a module uses them ("" for the rest)."""
    tiles: tuple[int, ...]
    staged: tuple[int, ...]
    staged_accumulators: int
    floats: tuple[int, ...]
    """The tiles of float accumulators (option ``float32_dots``), widest first."""
    float_accumulators: int
    """The most floats in such a tile's accumulators (its block width times lanes)."""


AVX512 = TileSizes("defined(__AVX512F__)", TILES, STAGED_TILES, STAGED_ACCUMULATORS, (32, 16), 256)
"""32 vector registers of 8 doubles (or 16 floats): the sizes above; float tiles of at
most 16 registers of accumulators (a block of 8 outputs times 32 lanes), like the
AVX2 double tiles that measured best."""

AVX2 = TileSizes("", (16, 8), (16, 8), 64, (16, 8), 64)
"""16 vector registers of 4 doubles (AVX2, and any CPU without AVX-512): tiles of at most
64 accumulators, so that a block of 8 outputs takes tiles of 8 lanes (16 registers)
where AVX-512 takes 16 (which here would spill half its accumulators). On a Zen 3 (one
thread, the nest alone, the same bits): matmul 256x256x256, 16.3-17.4 GFLOP/s with tiles
of 16, 25.2-25.5 with tiles of 8; conv3x3 64->64 at 56x56 + bias + relu, 12.4-13.2
against 18.2-21.1. A module built for the CPU that builds it (``host_isa``) compiles
only its CPU's branch; the ``target_clones`` clones all take this one. Other choices
for the conv, the same machine and thread: blocks of 4 with tiles of 16 and 8, 18.8-19.3;
blocks of 4 with 12 and 8, 15.3-15.4; blocks of 8 with 12 and 8 (spilling), 13.6-13.9.
The non-staged tiles keep the same 64-accumulator bound, untuned. Float accumulators
(8 per register): at most 8 registers of them, a block of 8 outputs times 8 lanes (or 4
times 16), the rest for the block's broadcast inputs and the lanes' loads."""

ISAS = (AVX512, AVX2)
"""The vector widths a nest's tiles are written for, widest first: the text of each is
in its own ``#if`` branch where their sizes differ."""


Updates = Callable[[Mapping[str, str]], list[str]]
"""The update statements of the accumulators, given the C element each one updates."""


def _indent(lines: Sequence[str], by: str = "  ") -> list[str]:
    return [by + line for line in lines]


class TiledText:
    """The reduction text of one block: interior tiles and border lanes, or lane loops."""

    def __init__(
        self,
        blocked: BlockedText,
        name: str,
        levels: Sequence[Level],
        staged: bool = False,
        floats: bool = False,
    ) -> None:
        self.b = blocked
        self.plan = blocked.plan
        self.name = name
        self.levels = levels
        """The anchor's reduction levels with every guard, for the border lanes."""
        self.j = f"{blocked.block}j" if blocked.block else ""
        self.staged = staged
        """The updates read staged double inputs: :data:`STAGED_TILES`, loops unrolled."""
        self.floats = floats
        """The accumulators are floats (option ``float32_dots``): :attr:`TileSizes.floats`."""

    def sizes(self, isa: TileSizes) -> list[int]:
        """The tile sizes for ``isa``, none wider than a block (nor, staged, than its
        accumulators allow)."""
        if self.floats:
            sizes, most = isa.floats, isa.float_accumulators // self.plan.width
        elif self.staged:
            sizes, most = isa.staged, isa.staged_accumulators // self.plan.width
        else:
            sizes, most = isa.tiles, self.plan.chunk
        return [s for s in sizes if s <= min(most, self.plan.chunk)]

    @staticmethod
    def tiles(plan: Blocking) -> bool:
        """Whether the nest of ``plan`` computes any lanes in register tiles: where a
        block is as wide as AVX-512's smallest tile (narrower blocks keep their lane
        loops on every CPU, so they need no staged weights either)."""
        return plan.interior is not None and min(AVX512.tiles[-1], AVX512.staged[-1]) <= plan.chunk

    def reduction(self, inits: Mapping[str, str], updates: Updates) -> list[str]:
        """The reduction of one block into the accumulator arrays ``inits`` (C name ->
        initial value), which the block's epilogue then reads: one text per vector width
        where their texts differ, chosen by the preprocessor (:data:`ISAS`)."""
        wide, narrow = (self._reduction(self.sizes(isa), inits, updates) for isa in ISAS)
        if wide == narrow:
            return wide
        return [f"#if {AVX512.condition}", *wide, "#else", *narrow, "#endif"]

    def _reduction(self, sizes: list[int], inits: Mapping[str, str], updates: Updates) -> list[str]:
        b, n = self.b, self.name
        decls = [b.declaration(acc) for acc in inits]
        lane_loops = [line for acc, init in inits.items() for line in b.fill(acc, init)]
        lane_loops += reduction_loops(self.plan.levels, b.lanes(n, updates({a: b.element(a) for a in inits})))
        if self.plan.interior is None or not sizes:
            return [*decls, *lane_loops]
        lower, upper = self.plan.interior
        lo, hi = f"{n}_in_lo", f"{n}_in_hi"
        tail = b.lane_extent % self.plan.chunk or self.plan.chunk  # the narrowest block
        whole = not lower and not upper and tail >= sizes[-1]  # every block's interior tiles
        tiles = [
            comment(f"register tiles of {' then '.join(map(str, sizes))} lanes over the interior"),
            f"int64_t {n}_at = {lo};",
        ]
        for k, size in enumerate(sizes):
            tiles += self._tiles(size, k == len(sizes) - 1, inits, updates)
        if lower or upper:
            tiles += [
                comment("the border lanes, outside the interior: one at a time, with every guard"),
                *self._borders(inits, updates),
            ]
        lines = [
            *decls,
            comment(
                "the interior: the lanes that read inside their inputs at every point of the "
                "reduction (each lane bound at its extreme point)"
                + ("; here every lane of the block" if whole else "")
            ),
            f"int64_t {lo} = {b.start(b.lane)};",
            f"int64_t {hi} = {b.lane_end()};",
            *(f"if ({lo} < {e}) {lo} = {e};" for e in lower),
            *(f"if ({hi} > {e}) {hi} = {e};" for e in upper),
        ]
        if whole:
            return [*lines, *tiles]
        lines += [
            f"if ({hi} - {lo} >= {sizes[-1]}) {{",
            *_indent(tiles),
            "} else {",
            "  " + comment("an interior narrower than a tile: the lane loops over the whole block"),
            *_indent(lane_loops),
            "}",
        ]
        return lines

    # ------------------------------------------------------------ pieces

    def _over_block(self, body: Sequence[str], unroll: bool = False) -> list[str]:
        """``body`` for each output of the block along its blocked loop (if any); with
        ``unroll``, that loop is unrolled whole."""
        b, j = self.b, self.j
        if not b.block:
            return list(body)
        return [
            *([f"#pragma GCC unroll {self.plan.width}"] if unroll else []),
            f"for (int64_t {j} = 0; {j} < {self.plan.width}; ++{j}) {{",
            *b.block_counter(body, "  "),
            *_indent(body),
            "}",
        ]

    def _all(self, lanes: int | None, text: Callable[[str], str]) -> list[str]:
        """``text(index)`` for every accumulator element of a tile of ``lanes`` lanes
        (``None``: one lane), ``index`` being its ``[j][l]``."""
        width = self.plan.width if self.b.block else None
        index = ("[j]" if width else "") + ("[l]" if lanes else "")
        line = text(index)
        if lanes:
            line = f"for (int64_t l = 0; l < {lanes}; ++l) {line}"
        if width:
            line = f"for (int64_t j = 0; j < {width}; ++j) {line}"
        return [line]

    def _start(self, name: str, init: str, lanes: int | None) -> list[str]:
        """The accumulators ``name`` of a tile of ``lanes`` lanes (``None``: one lane),
        each set to ``init``."""
        ctype = self.b.ctype
        if not self.b.block and not lanes:
            return [f"{ctype} {name} = {init};"]
        shape = (f"[{self.plan.width}]" if self.b.block else "") + (f"[{lanes}]" if lanes else "")
        return [f"{ctype} {name}{shape};", *self._all(lanes, lambda i: f"{name}{i} = {init};")]

    def _tiles(self, size: int, last: bool, inits: Mapping[str, str], updates: Updates) -> list[str]:
        """The loop over the interior's tiles of ``size`` lanes, from ``<name>_at``."""
        b, n, plan = self.b, self.name, self.plan
        at, hi, tile, lane = f"{n}_at", f"{n}_in_hi", f"{n}_t", f"{b.lane}l"
        regs = {acc: f"{acc}_tile" for acc in inits}
        pick = (f"[{self.j}]" if b.block else "") + f"[{lane}]"
        lanes = [
            f"for (int64_t {lane} = 0; {lane} < {size}; ++{lane}) {{",
            f"  const int64_t {b.lane} = {tile} + {lane};",
            *_indent(plan.lane_steps),
            *_indent(updates({acc: regs[acc] + pick for acc in inits})),
            "}",
        ]
        offset = f"{tile} - {b.start(b.lane)}"
        body = [
            *(x for acc, init in inits.items() for x in self._start(regs[acc], init, size)),
            *reduction_loops(
                plan.levels, self._over_block(lanes, self.staged or self.floats), UNROLL if self.staged else 0
            ),
            *(
                x
                for acc in inits
                for x in self._all(size, lambda i, a=acc: f"{a}{i[:-3]}[{offset} + l] = {regs[a]}{i};")
            ),
        ]
        if last:
            head = [
                f"for (; {at} < {hi}; {at} += {size}) {{",
                "  " + comment("the last tile ends at the interior's end, overlapping the one before"),
                f"  const int64_t {tile} = {at} + {size} <= {hi} ? {at} : {hi} - {size};",
            ]
        elif 2 * size > plan.chunk:  # one tile at most: no loop (gcc would see the second overrun the block)
            head = [f"if ({at} + {size} <= {hi}) {{", f"  const int64_t {tile} = {at};"]
            body.append(f"{at} += {size};")
        else:
            head = [f"for (; {at} + {size} <= {hi}; {at} += {size}) {{", f"  const int64_t {tile} = {at};"]
        return [*head, *_indent(body), "}"]

    def _borders(self, inits: Mapping[str, str], updates: Updates) -> list[str]:
        """The lanes before and after the interior, each with the plain nest's guards."""
        b, n = self.b, self.name
        lo, hi, k = f"{n}_in_lo", f"{n}_in_hi", f"{n}_k"
        start, end = b.start(b.lane), b.lane_end()
        left = f"({lo} - {start})"
        ones = {acc: f"{acc}_one" for acc in inits}
        pick = f"[{self.j}]" if b.block else ""
        body = [
            *(x for acc, init in inits.items() for x in self._start(ones[acc], init, None)),
            *reduction_loops(
                self.levels, self._over_block(updates({acc: ones[acc] + pick for acc in inits}))
            ),
            *(
                x
                for acc in inits
                for x in self._all(None, lambda i, a=acc: f"{a}{i}[{b.lane} - {start}] = {ones[a]}{i};")
            ),
        ]
        return [
            f"for (int64_t {k} = 0; {k} < {left} + ({end} - {hi}); ++{k}) {{",
            f"  const int64_t {b.lane} = {k} < {left} ? {start} + {k} : {hi} + {k} - {left};",
            *_indent(body),
            "}",
        ]
