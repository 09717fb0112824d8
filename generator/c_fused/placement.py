"""Where the statements of one ``c_fused`` loop nest go: each at the outermost loop whose
counters (and locals) it uses, so that what is invariant in the inner loops is computed
once per outer iteration; and, for a blocked reduction
(:mod:`byoc.generator.c_fused.blocking`), the loops over blocks, with the statements of
the blocked loops and inside them run for each output of the block."""

from __future__ import annotations

from collections.abc import Sequence

from ..c.text import C_WORD, comment
from .blocking import BlockedText
from .loops import Loops
from .outline import outer_loop, steps
from .support import pragmas

OUTER_LANE_BLOCKS = 8
"""A blocked product with at least this many lane blocks runs them outside its row blocks
even when it has more row blocks (:meth:`Placement.order`): enough for the thread pool to
share out. A dense 1024x1024x1024 (16 lane blocks, 128 row blocks; 4 MB of weights,
which every block of 8 rows read whole from beyond the L2 cache) on two threads, Intel
Xeon with AVX-512: 14.8 ms with the row blocks outside, 7.2 ms with the lane blocks;
row blocks in groups of 512 KB of rows inside each lane block, 7.5 ms."""


class Placement:
    """Statements at the outermost loop level whose counters (and locals) they use."""

    def __init__(self, loops: Loops) -> None:
        self.loops = loops
        self.depth: dict[str, int] = {v: k + 1 for k, v in enumerate(loops.variables[: len(loops.axes)])}
        self.levels: list[list[str]] = [[] for _ in range(len(loops.axes) + 1)]
        self.points = 0
        """The points of the reduction of each output, for a reduction nest; else 0."""
        self.blocked: tuple[BlockedText, list[str]] | None = None
        """A blocked reduction (:mod:`byoc.generator.c_fused.blocking`): its text and its
        accumulators and loops, which sit in the innermost loop; the statements of the
        blocked loops and inside them then run for each output of the block."""

    def add(self, code: str, note: str, defines: str | tuple[str, ...] = ()) -> None:
        used = [self.depth.get(w, 0) for w in C_WORD.findall(code)]
        level = max(used, default=0)
        lines = code.split("\n")
        if note:
            lines[-1] += f" {note}"
        self.levels[level].append("\n".join(lines))
        for name in (defines,) if isinstance(defines, str) else defines:
            self.depth[name] = level

    def store(self, code: str) -> None:
        """A store writes every element: innermost, after everything it reads."""
        self.levels[-1].append(code)

    def _steps(self) -> dict[int, int]:
        """The step of each loop over blocks (a blocked reduction's), by loop index."""
        if self.blocked is None:
            return {}
        plan = self.blocked[0].plan
        return {plan.lane: plan.chunk, **({plan.block: plan.width} if plan.block is not None else {})}

    def order(self) -> list[int]:
        """The loops, outermost first: the nest's own order, except that a blocked
        product whose lane loop directly follows its block loop (a matmul's rows, then
        its columns) runs the lane blocks outside the row blocks when it has more of
        them, or at least :data:`OUTER_LANE_BLOCKS`. Each lane block reads a panel of
        the lane-dependent operand (a column panel of the weights) that every row block
        reads again: with the lane blocks outside, the panel stays in the cache for all
        the row blocks, and the rows are what is read again, once per panel; with the
        row blocks outside, every block of rows (8 of them) reads all the weights. A
        block of rows is narrower than a panel, so the lanes outside move fewer bytes
        whenever the outer loop still has blocks enough to share out between threads.
        A pure interchange of two block loops with nothing between them: every output
        sums the same points in the same order."""
        order = list(range(min(len(self.loops.variables), len(self.loops.extents))))
        if self.blocked is None:
            return order
        plan = self.blocked[0].plan
        lane, block, extents = plan.lane, plan.block, self.loops.extents
        if block is None or block != lane - 1:
            return order
        lane_blocks = steps(extents[lane], plan.chunk)
        if lane_blocks > steps(extents[block], plan.width) or lane_blocks >= OUTER_LANE_BLOCKS:
            order[block], order[lane] = lane, block
        return order

    def outer_count(self) -> int:
        """The iterations of the outer loop (of blocks, when it is blocked): what a
        parallel nest's chunks divide."""
        outer = self.order()[0]
        return steps(self.loops.extents[outer], self._steps().get(outer, 1))

    def lines(self, label: str, parallel: bool, simd: bool) -> list[str]:
        """The nest; with ``parallel``, its outer loop over one chunk ``[begin, end)``
        (:func:`byoc.generator.c_fused.outline.outer_loop`)."""
        out = ["  {", f"    {comment(label)}"]
        indent = "    "
        out += _indented(self.levels[0], indent)
        loops = self.loops
        step_of = self._steps()
        cut = min(step_of) + 1 if step_of else len(loops.axes) + 1
        for position, k in enumerate(self.order()):
            var, extent = loops.variables[k], loops.extents[k]
            out += pragmas(simd and k == len(loops.axes) - 1)
            if parallel and position == 0:
                out.append(outer_loop(indent, f"{var}b" if k in step_of else var, step_of.get(k, 1)))
            elif k in step_of:
                out.append(f"{indent}for (int64_t {var}b = 0; {var}b < {extent}; {var}b += {step_of[k]}) {{")
            else:
                out.append(f"{indent}for (int64_t {var} = 0; {var} < {extent}; ++{var}) {{")
            indent += "  "
            if k + 1 < cut:
                out += _indented(self.levels[k + 1], indent)
        if self.blocked is not None:
            blocked, reduction = self.blocked
            epilogue = blocked.each_output([s for level in self.levels[cut:] for s in level])
            out += _indented(
                [
                    comment("a block of outputs: the reduction for all, then each stored"),
                    *reduction,
                    *epilogue,
                ],
                indent,
            )
        for _ in loops.axes:
            indent = indent[:-2]
            out.append(f"{indent}}}")
        out.append("  }")
        return out


def _indented(statements: Sequence[str], indent: str) -> list[str]:
    return [indent + line for s in statements for line in s.split("\n")]
