"""Inputs of a tiled reduction nest converted to double, or packed in panels, before it.

A dot reduction's update converts every read to double (``fused.yaml``'s conv, dense
and matmul: ``fused_madd_float32(acc, (double)${x0}, (double)${x1})``), so a register
tile (:mod:`byoc.generator.c_fused.tiles`) converts each weight it reads, once per tap,
before broadcasting it over the tile's lanes. A *staged* input is converted once,
before the nest, into a double buffer of the workspace, and the nest reads that buffer
instead: ``(double)x`` of a double is the same value, so the results keep their bits,
and each multiply-add takes its weight straight from memory.

An input is staged when every use of it in the accumulators' updates is ``(double)``
of it (so the spec converts it anyway; an update that computes with the element's own
type, a pool's maximum, is left alone), its type is not already double, the nest has
register tiles, and its element is the same for every lane of a tile (a convolution's
weights, not its input). Staging the input too made the nest faster on one thread
(conv3x3 64->64 at 56x56: 2.7 against 3.1 ms) but slower on two (1.71 against 1.62 ms):
its double copy (1.6 MB) outgrows each core's 1 MB L2, from which every block of output
channels reads the whole input again, and the copy, written by the calling thread, is
read by both. The buffer costs 8 bytes per element of the weights.

The float32 input whose element a dot product's lanes read along one of its axes (a
matmul's weights ``w[k, n]``, the lanes being the ``n`` of one block; a dense's ``w[n, k]``)
is *packed* instead (:func:`packed_inputs`): copied into panels of a block's columns,
each panel's rows one after the other, so that a tile's reads at consecutive points of
the reduction are consecutive in memory instead of a row apart (a new page per point for
a wide matrix; with float accumulators, on a 2-core AVX2 machine, the matmuls alone:
1024x1024x1024 56 -> 70 GFLOP/s, 128x3072x768 20 -> 32, 128x768x3072 53 -> 60; a dense's
strided weights had no register tiles at all). The same values are read, so packing
changes no result. A constant is packed when the module is generated
(:mod:`byoc.generator.c_fused.dots`), anything else before its nest at every call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from byoc.ir import TensorType

from ..c import dtypes as c_dtypes
from ..c.text import comment
from .blocking import CHUNK, BlockedText, Blocking
from .index import Anchor, Site, row_major


@dataclass(frozen=True, slots=True)
class Staged:
    """One input of one nest, converted to double into ``buffer``."""

    buffer: str
    """The C name of the double buffer (``tmp<node>_x<input>``)."""
    type: TensorType
    """The buffer's type: the input's shape, float64."""
    source: str
    """The C array it is converted from."""
    value: str
    """The graph value of that array (the key of its workspace slot is ``key``)."""
    nest: int
    """The nest that reads it."""
    dtype: str = "float32"
    """The dtype of the source array (a half type's elements are read through its conversion)."""
    panel: Panel | None = None
    """The source's layout in panels, for a packed input (its dtype unchanged); None: the
    source's own layout, converted to double."""

    read: str = ""
    """A packed input's read in the nest (:func:`panel_read`)."""

    def description(self, label: str) -> str:
        """What the buffer holds, for the workspace's comment."""
        if self.panel is None:
            return f"{label} as double (nest {self.nest})"
        return f"{label} in panels of {self.panel.width} columns (nest {self.nest})"

    @property
    def key(self) -> str:
        """The buffer's name in the workspace plan (no graph value can be named so)."""
        return f"%staged:{self.buffer}"


@dataclass(frozen=True, slots=True)
class Panel:
    """A packed input's layout. The input's elements are ``rows`` x ``columns``: the
    columns its axis that the lanes run along (``columns`` elements, ``stride`` apart),
    the rows every other axis in order (row-major without that axis). They are stored in
    panels of ``width`` columns, each panel's rows one after the other: row ``p``,
    column ``c`` at ``(c - c % width) * rows + p * width + c % width``. A last panel
    narrower than ``width`` keeps the stride: its unused columns are never read. With the
    lanes along the last axis (``stride`` 1, a matmul's weights ``w[k, n]``) a panel is
    a block of columns; along the first (a dense's ``w[n, k]``, ``stride`` k), the packing
    transposes it."""

    rows: int
    columns: int
    width: int
    stride: int = 1

    @property
    def size(self) -> int:
        """The buffer's elements."""
        return -(-self.columns // self.width) * self.width * self.rows

    def pack(self, values: np.ndarray) -> np.ndarray:
        """``values`` (the source's elements, flat) in this layout; a last panel's unused
        columns are 0."""
        s, n, w = self.stride, self.columns, self.width
        # row p, column c is source element (p // s, c, p % s) of this view
        by_column = values.reshape(self.rows // s, n, s).transpose(1, 0, 2).reshape(n, self.rows)
        panels = -(-n // w)
        padded = np.zeros((panels * w, self.rows), values.dtype)
        padded[:n] = by_column
        return padded.reshape(panels, w, self.rows).transpose(0, 2, 1).reshape(-1)

    def source(self, p: str, c: str) -> str:
        """The source's index of row ``p``, column ``c`` (C expressions)."""
        s, n = self.stride, self.columns
        if s == 1:
            return f"{p} * {n} + {c}"
        if self.rows == s:  # the columns' axis is the first
            return f"({c}) * {s} + {p}"
        return f"{p} / {s} * {s * n} + ({c}) * {s} + {p} % {s}"


_TERM = re.compile(r"(\w+)(?: \* (\d+))?\Z")


def panel_read(read: str, array: str, buffer: str, lane: str, start: str, panel: Panel) -> str | None:
    """``read`` (``<array>[index]``) as a read of ``buffer``, the array packed in
    ``panel``'s layout, where the lane counter ``lane`` runs from its block's first
    column ``start`` (a multiple of the width); None unless the index is ``lane`` times
    the columns' stride plus terms that each step either whole rows of columns (a
    coefficient that is a multiple of ``stride * columns``: an axis before the
    columns') or within one column (a coefficient below ``stride``: an axis after it;
    an in-bounds element keeps their sum below it)."""
    if not read.startswith(f"{array}[") or not read.endswith("]"):
        return None
    terms = []
    for part in read[len(array) + 1 : -1].split(" + "):
        match = _TERM.match(part)
        if match is None or match.group(1).isdigit():
            return None
        terms.append((match.group(1), int(match.group(2) or 1)))
    s, n = panel.stride, panel.columns
    if [c for name, c in terms if name == lane] != [s]:
        return None
    rows = []
    for name, coef in terms:
        if name == lane:
            continue
        if coef % (s * n) == 0:
            rows.append(f"{name} * {coef // n * panel.width}")
        elif coef < s:
            rows.append(f"{name} * {coef * panel.width}")
        else:
            return None
    row = "".join(f"{r} + " for r in rows)
    return f"{buffer}[{start} * {panel.rows} + {row}({lane} - {start})]"


PANEL_BYTES = 512 * 1024
"""The most bytes of one packed panel (a block's lanes times the reduction's points): the
L2 cache of one core of the smallest of the project's machines (Zen 3), so that a panel
stays there while every block of rows reads it. Measured there (2 threads, the nests
alone): matmul 128x3072x768 (a transformer's FFN down-projection, panels of 3072 rows)
with panels of 64 columns (786 KB) 30-37 GFLOP/s, of 32 (393 KB) 48-58, of 16 55; in
double accumulators 20 against 36; 128x768x3072 and 1024x1024x1024, whose 64-column
panels fit, unchanged."""


def panel_width(points: int) -> int:
    """The lanes of a block of a dot product whose reduction has ``points`` points: 64
    (:data:`~.blocking.CHUNK`), or fewer where a panel of 64 would outgrow
    :data:`PANEL_BYTES`, down to 16 (the narrowest register tile)."""
    return next((w for w in (CHUNK, 32) if w * points * 4 <= PANEL_BYTES), 16)


def packed_inputs(
    c: str,
    names: Sequence[str],
    site: Site,
    anchor: Anchor,
    var: Sequence[str],
    extents: Sequence[int],
    nest: int,
    chunk: int = CHUNK,
) -> dict[int, Staged]:
    """The float32 inputs of nest ``nest`` (anchor ``c``, input values ``names``) that
    its lanes, the innermost of the loops ``var``, read along one of their axes (a
    matmul's or a dense's weights), each packed in panels of a block's lanes (at most
    ``chunk``), by position; the nest reads each through its ``Staged.read``."""
    if not var:
        return {}  # a single output: no lanes
    lane, extent = var[-1], extents[-1]
    width = min(chunk, extent)
    packs = {}
    for j in range(len(site.ins)):
        if re.search(rf"\b{lane}\b", anchor.reads[j]):
            staged = _panels(c, j, names, site, anchor, lane, extent, width, nest)
            if staged is not None:
                packs[j] = staged
    return packs


BLOCK_PANEL_WIDTH = 4
"""The narrowest block whose reads :func:`block_packed_inputs` packs: 4 floats are one
128-bit load; 3 or 2 outputs (a convolution of 6 channels) gain nothing worth a copy."""


def block_packed_inputs(
    c: str,
    names: Sequence[str],
    site: Site,
    anchor: Anchor,
    plan: Blocking,
    loops: tuple[Sequence[str], Sequence[int]],
    nest: int,
) -> dict[int, Staged]:
    """The float32 inputs of a blocked nest over ``loops`` (counters, extents) that its
    block reads along one of their axes and its lanes do not (a convolution's weights
    ``w[oc, ...]``, the block being a run of output channels), each packed in panels of
    the block's width: the block's elements at one point of the reduction side by side.
    Only for a nest with border lanes (a guard on the lanes: a padded convolution),
    which computes each border lane's block of outputs together: its multiply-adds then
    take the block's weights as one vector load instead of one load per output channel
    (the weights of channel after channel are a whole filter apart). conv3x3 64->64 at
    56x56 + bias + relu, the nest alone (Intel Xeon, AVX-512; one thread / two): 2.97 /
    1.56-1.67 ms with the weights as they are, 2.34-2.39 / 1.27-1.30 ms packed; the same
    products in the same order. A block narrower than :data:`BLOCK_PANEL_WIDTH` keeps
    the input as it is."""
    if plan.block is None or plan.width < BLOCK_PANEL_WIDTH or not (plan.lower or plan.upper):
        return {}
    var, extents = loops
    block, extent = var[plan.block], extents[plan.block]
    packs = {}
    for j, lanes in enumerate(plan.lane_reads):
        if not lanes and re.search(rf"\b{block}\b", anchor.reads[j]):
            staged = _panels(c, j, names, site, anchor, block, extent, plan.width, nest)
            if staged is not None:
                packs[j] = staged
    return packs


def _panels(
    c: str,
    j: int,
    names: Sequence[str],
    site: Site,
    anchor: Anchor,
    var: str,
    extent: int,
    width: int,
    nest: int,
) -> Staged | None:
    """Input ``j`` of anchor ``c`` packed in panels of ``width`` along its axis of
    ``extent`` elements that loop counter ``var`` indexes, when it is float32 and its read
    is that counter times the axis' stride plus whole rows or in-row terms; else None."""
    t = site.ins[j]
    if t.dtype != "float32":
        return None
    buf = f"tmp{c[1:]}_x{j}"
    for axis, stride in enumerate(row_major(t.shape)):
        if t.shape[axis] != extent or (stride == 1 and extent <= width):
            continue  # not the axis, or one panel: the input's own layout
        panel = Panel(math.prod(t.shape) // extent, extent, width, stride)
        read = panel_read(anchor.reads[j], site.arrays[j], buf, var, BlockedText.start(var), panel)
        if read is not None:
            return Staged(
                buf,
                TensorType((panel.size,), "float32"),
                site.arrays[j],
                names[j],
                nest,
                "float32",
                panel,
                read,
            )
    return None


def double_copy(c: str, j: int, site: Site, names: Sequence[str], nest: int) -> Staged:
    """Input ``j`` of anchor ``c`` (of nest ``nest``, input values ``names``) converted to
    double once before its nest (see above: :func:`stageable` chooses it)."""
    t = site.ins[j]
    return Staged(f"tmp{c[1:]}_x{j}", replace(t, dtype="float64"), site.arrays[j], names[j], nest, t.dtype)


def stageable(updates: Sequence[str], types: Sequence[TensorType]) -> tuple[int, ...]:
    """The inputs (their positions) that a tiled nest of these accumulator ``updates``
    (spec templates over ``${x0}``, ``${x1}``, ...) may read from a double buffer."""
    chosen = []
    for j, t in enumerate(types):
        token = f"${{x{j}}}"
        uses = sum(u.count(token) for u in updates)
        converted = sum(u.count(f"(double){token}") for u in updates)
        if t.dtype != "float64" and uses and uses == converted:
            chosen.append(j)
    return tuple(chosen)


def staged_read(read: str, array: str, buffer: str) -> str:
    """``read`` (``<array>[index]``) as a read of ``buffer`` at the same index."""
    assert re.match(rf"{re.escape(array)}\[", read), (read, array)
    return buffer + read[len(array) :]


def conversion(staged: Staged, label: str) -> list[str]:
    """The body statements that fill ``staged.buffer`` before its nest."""
    if staged.panel is not None:
        return _packing(staged, staged.panel, label)
    size = math.prod(staged.type.shape)
    read = c_dtypes.load(f"{staged.source}[s]", staged.dtype)
    note = (
        f"{staged.buffer}: {label} converted to double once, for the register tiles of nest "
        f"{staged.nest} (its update converts every read to double: the same values)"
    )
    return [
        f"  {comment(note)}",
        f"  for (int64_t s = 0; s < {size}; ++s) {staged.buffer}[s] = (double){read};",
    ]


def _packing(staged: Staged, panel: Panel, label: str) -> list[str]:
    buf, rows, cols, width = staged.buffer, panel.rows, panel.columns, panel.width
    note = (
        f"{buf}: {label} packed in panels of {width} columns, each panel's {rows} rows one "
        f"after the other, for the register tiles of nest {staged.nest} (each reads a panel's "
        "rows in turn)"
    )
    last = cols % width
    columns = str(width) if not last else f"(c + {width} <= {cols} ? {width} : {last})"
    store = f"{buf}[c * {rows} + p * {width} + l] = {staged.source}[{panel.source('p', 'c + l')}];"
    if panel.stride == 1:  # a panel's row is a run of the source's row: copied as it is
        return [
            f"  {comment(note)}",
            f"  for (int64_t c = 0; c < {cols}; c += {width}) {{",
            f"    const int64_t n = {columns};",
            f"    for (int64_t p = 0; p < {rows}; ++p) {{",
            f"      for (int64_t l = 0; l < n; ++l) {store}",
            "    }",
            "  }",
        ]
    t = TRANSPOSE_SQUARE
    p_end = f"p0 + {t}" if rows % t == 0 else f"(p0 + {t} <= {rows} ? p0 + {t} : {rows})"
    l_end = f"l0 + {t}" if width % t == 0 and not last else f"(l0 + {t} <= n ? l0 + {t} : n)"
    return [
        f"  {comment(note + f'; transposed in squares of {t} by {min(t, width)}, whose source lines stay in the L1 cache')}",
        f"  for (int64_t c = 0; c < {cols}; c += {width}) {{",
        f"    const int64_t n = {columns};",
        f"    for (int64_t p0 = 0; p0 < {rows}; p0 += {t}) {{",
        f"      for (int64_t l0 = 0; l0 < n; l0 += {t}) {{",
        f"        for (int64_t p = p0; p < {p_end}; ++p) {{",
        f"          for (int64_t l = l0; l < {l_end}; ++l) {store}",
        "        }",
        "      }",
        "    }",
        "  }",
    ]


TRANSPOSE_SQUARE = 16
"""The side of the squares in which a transposing pack (a dense's weights ``w[n, k]``)
copies: each square reads 16 source rows of one 64-byte line each and writes 16 panel
rows of 16 floats. Column by column instead, one row of a panel read its 64 columns from
64 source rows 4 KB apart (for k = 1024), all in one set of the L1 cache, which held a
handful of them. A dense 1024x1024's weights, packed alone on one thread (Intel Xeon,
AVX-512): 1.88 ms column by column, 0.62 ms in runs of 16 rows, 0.45 ms in squares."""
