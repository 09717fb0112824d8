"""ONNX's signal-processing ops, Einsum, Det and Pad's ``wrap`` mode, composed at import
from the catalog's transposes, reshapes, gathers, products and sums.

What these ops compute depends on sizes and attributes that byoc knows at import, so
that part is computed then, with numpy, as constants:

* DFT and STFT are linear in their signal: the (real, imaginary) parts of each output
  frequency are a matrix product of the (real, imaginary) parts of the input along
  the transformed axis, with a constant matrix of cosines and sines (truncation or
  zero padding to ``dft_length``, ``onesided`` and the inverse's 1/n are in the
  matrix). STFT first gathers its frames by constant indices, and a constant window
  is folded into the matrix.
* Einsum's equation is parsed at import: a repeated index within one operand takes
  a diagonal (a gather of constant positions), an index that no other operand and
  not the output has is summed, and each pair of operands becomes one batched matrix
  product between transposes and reshapes.
* Det of a small matrix is Leibniz's sum over permutations: gathers of constant
  positions, products and a sum with constant signs.
* Pad's ``wrap`` reads, along each padded axis, input positions modulo its size: a
  gather of constant indices.

The catalog ops emitted are the row's ``op`` and ``roles`` (ops.yaml):
``flip`` (transpose), ``reshape``, ``pick`` (gather), ``times`` (multiply),
``total`` (sum) and, for Det, ``op`` the product.
"""

from __future__ import annotations

import math
from itertools import permutations
from typing import TYPE_CHECKING

import numpy as np

from ..ir import dtype_name

if TYPE_CHECKING:
    from .importer import Importer
    from .ops import OnnxOp

MAX_DET_SIZE = 4
"""Det's largest matrix: Leibniz's formula has n! terms (24 for 4 x 4)."""


def _catalog_takes(e_op: str, dtype) -> bool:
    """Whether the catalog op ``e_op`` takes elements of ``dtype``."""
    from .importer import shipped_catalog

    return dtype is not None and dtype_name(np.dtype(dtype)) in shipped_catalog()[e_op].dtypes


def _transposed(imp: Importer, e: OnnxOp, x: str, perm: list[int], out: str | None = None) -> str:
    """``x`` transposed by ``perm`` (no statement for the identity, but an alias of ``out``)."""
    if perm == sorted(perm):
        if out is not None:
            imp.alias(out, x)
        return x
    return imp.emit(e.roles["flip"], [x], {"perm": perm}, out)


def _reshaped(imp: Importer, e: OnnxOp, x: str, shape: list[int], out: str | None = None) -> str:
    return imp.emit(e.roles["reshape"], [x], {"newshape": [int(d) for d in shape]}, out)


def _one_int(imp: Importer, k: int, what: str) -> int | None:
    """Input ``k`` as one integer (None when absent); anything else is an invalid node."""
    given = imp.const_input(k, what)
    if given is None:
        return None
    flat = np.ravel(given)
    if flat.size != 1 or flat.dtype.kind not in "iu":
        raise imp.invalid(
            f"its {what} is {np.asarray(given).tolist()!r}, not one integer",
            hint=f"{what} is a scalar integer tensor",
        )
    return int(flat[0])


# ---------------------------------------------------------------- DFT and STFT


def _dft_matrix(n: int, parts: int, length: int, inverse: bool, onesided: bool) -> tuple[np.ndarray, int]:
    """The matrix [parts * n, out_parts * K] that takes the (real[, imaginary]) parts of
    ``n`` input samples to those of the K outputs, as ONNX's reference computes them
    with numpy's fft (``fft``, ``ifft`` or, inverse and onesided, ``irfft``) of length
    ``length``: inputs beyond it are dropped, missing ones are zeros. Angles are reduced
    modulo the length in integers first, so that they stay exact. Also ``out_parts``:
    2, or 1 for the real output of an irfft."""
    if inverse and onesided:  # irfft: the first length // 2 + 1 frequencies of a real signal
        used = min(n, length // 2 + 1)
        j, t = np.arange(used)[:, None], np.arange(length)[None, :]
        angle = 2 * np.pi * ((j * t) % length) / length
        weight = np.where((j == 0) | (2 * j == length), 1.0, 2.0) / length  # each bin and its mirror
        w = np.zeros((parts, n, 1, length))
        w[0, :used, 0] = weight * np.cos(angle)
        if parts == 2:
            w[1, :used, 0] = -weight * np.sin(angle)
        return w.reshape(parts * n, length), 1
    count = length // 2 + 1 if onesided else length
    used = min(n, length)
    j, k = np.arange(used)[:, None], np.arange(count)[None, :]
    angle = 2 * np.pi * ((j * k) % length) / length
    real, imag = np.cos(angle), (1.0 if inverse else -1.0) * np.sin(angle)
    w = np.zeros((parts, n, 2, count))
    w[0, :used, 0], w[0, :used, 1] = real, imag
    if parts == 2:  # (a + ib)(c + id) = (ac - bd) + i(ad + bc)
        w[1, :used, 0], w[1, :used, 1] = -imag, real
    return w.reshape(parts * n, 2 * count) / (length if inverse else 1), 2


def _spectrum(
    imp: Importer, e: OnnxOp, x: str, shape, axis: int, matrix: np.ndarray, out_parts: int, dtype, out: str
) -> None:
    """``out`` = ``x`` (shape ``[..., n at axis, ..., parts]``) transformed along ``axis``
    by ``matrix`` ([parts * n, out_parts * K]): the parts and the axis moved last and
    merged, one matrix product, then split and moved back. Half-precision signals are
    transformed in float32 (numpy's fft, ONNX's reference, takes them so too)."""
    rank = len(shape)
    others = [d for d in range(rank - 1) if d != axis]
    lead = [shape[d] for d in others]
    x = _transposed(imp, e, x, others + [rank - 1, axis])
    x = _reshaped(imp, e, x, lead + [shape[-1] * shape[axis]])
    wide = np.dtype(dtype).itemsize < 4  # float16 and bfloat16 in float32, as numpy's fft does
    if wide:
        x = imp.emit(e.roles["cast"], [x], {"to": "float32"})
    w = matrix.astype(np.float32 if wide else dtype)
    y = imp.emit(e.op, [x, imp.constant(w, imp.names.fresh("dft"))])
    if wide:
        y = imp.emit(e.roles["cast"], [y], {"to": dtype_name(np.dtype(dtype))})
    y = _reshaped(imp, e, y, lead + [out_parts, matrix.shape[1] // out_parts])
    back = iter(range(len(others)))
    perm = [
        len(others) + 1 if d == axis else len(others) if d == rank - 1 else next(back) for d in range(rank)
    ]
    _transposed(imp, e, y, perm, out)


def _signal_checks(imp: Importer, name: str, shape, dtype) -> None:
    if len(shape) < 2 or shape[-1] not in (1, 2):
        raise imp.invalid(
            f"its signal {name!r} has shape {list(shape)}, whose last dimension is not 1 (real) or 2 (complex)",
            hint="ONNX's DFT and STFT take the real and imaginary parts as a trailing dimension",
        )
    if dtype is None or np.dtype(dtype).kind != "f":
        raise imp.unsupported(f"a signal of {dtype}", hint="DFT and STFT take floating-point signals")


def dft(imp: Importer, node, e: OnnxOp) -> None:
    """DFT: the axis an attribute (default 1) before opset 20, from it an optional input
    (default -2); ``dft_length`` an optional input (a model input's value specialises
    the model); ``inverse`` and ``onesided`` attributes."""
    imp.check_attrs(node, {"axis", "inverse", "onesided"})
    shape, dtype = imp.shape(node.input[0]), imp.dtype(node.input[0])
    _signal_checks(imp, node.input[0], shape, dtype)
    rank = len(shape)
    if imp.opset < 20:
        axis = int(imp.attr("axis", 1))
    else:
        given = _one_int(imp, 2, "DFT axis")
        axis = -2 if given is None else given
    if not -rank <= axis < rank or axis % rank == rank - 1:
        raise imp.invalid(
            f"its axis {axis} is not a signal axis of its rank-{rank} input",
            hint=f"DFT's axis is in [{-rank}, {rank - 2}]; the last axis holds the real and imaginary parts",
        )
    axis %= rank
    inverse, onesided = bool(imp.attr("inverse", 0)), bool(imp.attr("onesided", 0))
    length = _one_int(imp, 1, "DFT dft_length")
    if length is None:
        length = 2 * (shape[axis] - 1) if inverse and onesided else shape[axis]
    if length < 1:
        raise imp.invalid(f"its dft_length is {length}, not a positive length")
    matrix, out_parts = _dft_matrix(shape[axis], shape[-1], length, inverse, onesided)
    _spectrum(imp, e, imp.value(node.input[0]), shape, axis, matrix, out_parts, dtype, node.output[0])


def stft(imp: Importer, node, e: OnnxOp) -> None:
    """STFT of a signal [batch, length, parts]: frames of ``frame_length`` samples every
    ``frame_step`` (gathered by constant indices), each times the window (folded into
    the matrix when it is a constant), then the DFT of each frame (``onesided`` by
    default): [batch, frames, K, 2]."""
    imp.check_attrs(node, {"onesided"})
    shape, dtype = imp.shape(node.input[0]), imp.dtype(node.input[0])
    _signal_checks(imp, node.input[0], shape, dtype)
    if len(shape) != 3:
        raise imp.invalid(f"its signal has rank {len(shape)}, not 3 ([batch, length, 1 or 2])")
    step = _one_int(imp, 1, "STFT frame_step")
    window_name = node.input[2] if len(node.input) > 2 and node.input[2] else None
    window_shape = imp.shape(window_name) if window_name else None
    length = _one_int(imp, 3, "STFT frame_length")
    if length is None:
        length = window_shape[0] if window_shape else shape[1]
    if window_shape is not None and list(window_shape) != [length]:
        raise imp.invalid(f"its window has shape {list(window_shape)}, not [{length}] (its frame length)")
    if step is None or step < 1 or not 1 <= length <= shape[1]:
        raise imp.invalid(
            f"its frame_step {step} and frame_length {length} do not frame a signal of {shape[1]} samples",
            hint="STFT's frame_step is positive and its frame_length at most the signal's length",
        )
    frames = 1 + (shape[1] - length) // step
    starts = np.arange(frames)[:, None] * step + np.arange(length)[None, :]
    x = imp.emit(
        e.roles["pick"],
        [imp.value(node.input[0]), imp.constant(starts, imp.names.fresh("frames"))],
        {"axis": 1},
    )
    matrix, _ = _dft_matrix(length, shape[-1], length, False, bool(imp.attr("onesided", 1)))
    if window_name in imp.consts:  # each sample's row of the matrix times its weight
        weights = np.asarray(imp.consts[window_name], np.float64)
        matrix = (matrix.reshape(shape[-1], length, -1) * weights[None, :, None]).reshape(matrix.shape)
    elif window_name is not None:
        window = _reshaped(imp, e, imp.value(window_name), [length, 1])
        x = imp.emit(e.roles["times"], [x, window])
    _spectrum(imp, e, x, (shape[0], frames, length, shape[-1]), 2, matrix, 2, dtype, node.output[0])


# ---------------------------------------------------------------- Einsum


def _einsum_terms(imp: Importer, equation: str, shapes) -> tuple[list[list[str]], list[str]]:
    """Each operand's labels, one per axis, and the output's: letters, and for the axes
    an ellipsis stands for ``.0``, ``.1``, ... counted so that they align from the right
    across operands (they broadcast as numpy's do). Without ``->`` the output is the
    ellipsis axes then the letters used once, in alphabetical order (numpy's rule)."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    parts = lhs.split(",")
    if len(parts) != len(shapes):
        raise imp.invalid(
            f"its equation {equation!r} has {len(parts)} operand(s), but it has {len(shapes)} input(s)"
        )

    def letters(term: str, what: str) -> tuple[str, str] | None:
        head, dots, tail = term.partition("...")
        if not all(c.isalpha() and c.isascii() for c in head + tail):
            raise imp.invalid(
                f"its equation {equation!r}: {what} {term!r} is not letters and at most one '...'"
            )
        return (head, tail) if dots else None

    split = [letters(p, f"operand {k}") for k, p in enumerate(parts)]
    widths = []
    for k, (p, s, shape) in enumerate(zip(parts, split, shapes)):
        named = len(p) - (3 if s else 0)
        if (named > len(shape)) if s else (named != len(shape)):
            raise imp.invalid(f"its equation's operand {k} {p!r} does not fit its input of rank {len(shape)}")
        widths.append(len(shape) - named if s else 0)
    widest = max(widths, default=0)
    terms = []
    for p, s, w in zip(parts, split, widths):
        dots = [f".{widest - w + k}" for k in range(w)]
        terms.append(list(s[0]) + dots + list(s[1]) if s else list(p))
    dots = [f".{k}" for k in range(widest)]
    if arrow:
        s = letters(rhs, "the output")
        output = list(s[0]) + dots + list(s[1]) if s else list(rhs)
        everywhere = {label for term in terms for label in term}
        if len(set(output)) != len(output) or not set(output) <= everywhere | set(dots):
            raise imp.invalid(f"its equation's output {rhs!r} repeats a label or names one no operand has")
    else:
        counts = [label for term in terms for label in term if not label.startswith(".")]
        output = dots + sorted(c for c in set(counts) if counts.count(c) == 1)
    return terms, output


def einsum(imp: Importer, node, e: OnnxOp) -> None:
    """Einsum: each operand's diagonals taken and its own indices summed, then the
    operands multiplied pairwise, left to right, as batched matrix products (batch:
    the indices both have that are needed later; contracted: those they share that are
    not), and the result transposed to the output's order."""
    imp.check_attrs(node, {"equation"})
    equation = imp.attr("equation")
    if equation is None:
        raise imp.invalid("it has no equation")
    shapes = [tuple(imp.shape(i)) for i in node.input]
    terms, output = _einsum_terms(imp, equation, shapes)
    dtype = imp.dtype(node.input[0])
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes):
        for label, size in zip(term, shape):
            known = sizes.setdefault(label, size)
            if known != size and not (label.startswith(".") and 1 in (known, size)):
                raise imp.invalid(f"its equation {equation!r} gives index {label!r} sizes {known} and {size}")
            sizes[label] = max(known, size)

    def needs(op: str, what: str) -> None:
        if not _catalog_takes(op, dtype):
            raise imp.unsupported(
                f"an Einsum of {dtype} that {what}", hint="byoc sums floating-point tensors only"
            )

    operands = []
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        x, term, shape = imp.value(node.input[k]), list(term), list(shape)
        while len(set(term)) < len(term):  # a repeated index: the diagonal of its two axes
            label = next(c for c in term if term.count(c) > 1)
            p = term.index(label)
            q = term.index(label, p + 1)
            rest = [a for a in range(len(term)) if a not in (p, q)]
            x = _reshaped(
                imp, e, _transposed(imp, e, x, rest + [p, q]), [shape[a] for a in rest] + [shape[p] ** 2]
            )
            diagonal = imp.constant(
                np.arange(shape[p], dtype=np.int64) * (shape[p] + 1), imp.names.fresh("diagonal")
            )
            x = imp.emit(e.roles["pick"], [x, diagonal], {"axis": len(rest)})
            term, shape = [term[a] for a in rest] + [label], [shape[a] for a in rest] + [shape[p]]
        kept = [a for a, label in enumerate(term) if shape[a] == sizes[label]]
        if len(kept) < len(term):  # a broadcast size-1 ellipsis axis: the other operands' size
            x = _reshaped(imp, e, x, [shape[a] for a in kept])
            term, shape = [term[a] for a in kept], [shape[a] for a in kept]
        operands.append((x, term))

    def summed(x: str, term: list[str], keep: set[str]) -> tuple[str, list[str]]:
        gone = [a for a, label in enumerate(term) if label not in keep]
        if not gone:
            return x, term
        needs(e.roles["total"], "sums over an index")
        return imp.emit(e.roles["total"], [x], {"axes": gone, "keepdims": False}), [
            c for c in term if c in keep
        ]

    def later(k: int) -> set[str]:
        return set(output).union(*(operands[j][1] for j in range(len(operands)) if j != k))

    operands = [summed(x, term, later(k)) for k, (x, term) in enumerate(operands)]
    x, term = operands[0]
    for k in range(1, len(operands)):
        y, other = operands[k]
        needed = set(output).union(*(t for _, t in operands[k + 1 :]))
        x, term = summed(x, term, needed | set(other))
        y, other = summed(y, other, needed | set(term))
        needs(e.op, "multiplies operands")
        batch = [c for c in term if c in other and c in needed]
        shared = [c for c in term if c in other and c not in needed]
        left = [c for c in term if c not in other]
        right = [c for c in other if c not in term]

        def matrix(x: str, term: list[str], rows: list[str], cols: list[str], batch=batch) -> str:
            x = _transposed(imp, e, x, [term.index(c) for c in batch + rows + cols])
            flat = [sizes[c] for c in batch] + [
                math.prod(sizes[c] for c in rows),
                math.prod(sizes[c] for c in cols),
            ]
            return _reshaped(imp, e, x, flat)

        product = imp.emit(e.op, [matrix(x, term, left, shared), matrix(y, other, shared, right)])
        term = batch + left + right
        x = _reshaped(imp, e, product, [sizes[c] for c in term])
    x, term = summed(x, term, set(output))
    _transposed(imp, e, x, [term.index(c) for c in output], node.output[0])


# ---------------------------------------------------------------- Det and Pad's wrap


def det(imp: Importer, node, e: OnnxOp) -> None:
    """Det of [..., n, n] for n up to :data:`MAX_DET_SIZE`: the sum over permutations p
    of sign(p) times the product of x[i, p(i)], each product's factors gathered from
    the flattened matrices by constant positions."""
    imp.check_attrs(node, set())
    shape, dtype = imp.shape(node.input[0]), imp.dtype(node.input[0])
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise imp.invalid(f"its input has shape {list(shape)}, not [..., n, n]")
    n = shape[-1]
    if not 1 <= n <= MAX_DET_SIZE or not _catalog_takes(e.op, dtype):
        raise imp.unsupported(
            f"the determinant of {n} x {n} matrices of {dtype}",
            hint=f"byoc computes Det of floating-point matrices of 1 x 1 to {MAX_DET_SIZE} x {MAX_DET_SIZE}",
        )
    orders = list(permutations(range(n)))
    positions = np.asarray([[i * n + p[i] for i in range(n)] for p in orders], np.int64)
    signs = np.asarray(
        [(-1) ** sum(p[i] > p[j] for i in range(n) for j in range(i + 1, n)) for p in orders], dtype
    )
    flat = _reshaped(imp, e, imp.value(node.input[0]), [*shape[:-2], n * n])
    factors = imp.emit(
        e.roles["pick"], [flat, imp.constant(positions, imp.names.fresh("terms"))], {"axis": len(shape) - 2}
    )
    terms = imp.emit(e.op, [factors], {"axes": [-1], "keepdims": False})
    signed = imp.emit(e.roles["times"], [terms, imp.constant(signs, imp.names.fresh("signs"))])
    imp.emit(e.roles["total"], [signed], {"axes": [-1], "keepdims": False}, node.output[0])


def wrap_pad(imp: Importer, node, e: OnnxOp, pads: list[int]) -> None:
    """Pad with ``mode`` wrap: along each padded axis, a negative pad first crops it
    (as ONNX Runtime does; numpy's pad, ONNX's reference, takes none), then output
    position j reads the kept position (j - begin) mod kept: one gather of constant
    indices per axis (the row's ``wrap`` role)."""
    shape = imp.shape(node.input[0])
    rank = len(shape)
    if len(pads) != 2 * rank:
        raise imp.invalid(f"its pads {pads} are not a begin and an end for each of its {rank} axes")
    x = imp.value(node.input[0])
    padded = [a for a in range(rank) if pads[a] or pads[a + rank]]
    if not padded:
        imp.alias(node.output[0], x)
    for k, a in enumerate(padded):
        begin, end = pads[a], pads[a + rank]
        first, kept = max(-begin, 0), shape[a] - max(-begin, 0) - max(-end, 0)
        if kept < 1:
            raise imp.invalid(
                f"its pads {pads} leave nothing of axis {a} (of size {shape[a]}) to wrap",
                hint="Pad's wrap repeats what its negative pads leave of each axis",
            )
        indices = first + np.arange(-max(begin, 0), kept + max(end, 0), dtype=np.int64) % kept
        out = node.output[0] if k == len(padded) - 1 else None
        x = imp.emit(e.roles["wrap"], [x, imp.constant(indices, imp.names.fresh("wrap"))], {"axis": a}, out)


SIGNAL_KINDS = {"dft": dft, "stft": stft, "einsum": einsum, "determinant": det}
"""The handlers of this module that ops.yaml's ``kind`` names."""
