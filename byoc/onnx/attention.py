"""ONNX's Attention (opsets 23 and 24; 25's sliding window too) and RotaryEmbedding
(opset 23): each node's inputs and attributes checked against ONNX's rules first, so
that a malformed node is refused with a located error that says what is wrong,
instead of failing somewhere inside the function ONNX defines the op by.

Attention is then composed from the catalog ops of its row in ops.yaml, in the
order of ONNX's reference (``onnx/reference/ops/op_attention.py``), which the node
tests' expected outputs come from:

* 3-D inputs split into heads (reshape, transpose) and the result merged back;
* past key and value joined before the new ones on the sequence axis, which gives
  the present key and value outputs;
* Q and K each scaled by ``sqrt(scale)``, then ``Q @ K^T``; grouped-query attention
  without copying K and V per query head: the query heads that share a key head are
  stacked on the sequence axis of one matrix product, which reshapes undo;
* ``softcap * tanh(scores / softcap)``, then the bias: a bool mask as 0 where true and
  -inf where false, a float one added as it is, a mask shorter than the keys padded
  with -inf, and the causal mask aligned to the bottom right (a query ``i`` sees key
  ``j`` when ``j <= i + past length``). Without a run-time mask input, the bias is
  one constant computed here;
* softmax (in ``softmax_precision`` when given), a row whose bias is -inf everywhere
  set to zero, as ONNX says (not NaN), then the product with V;
* the fourth output, as ``qk_matmul_output_mode`` says: the scores (0 and 1, as the
  reference gives them: after softcap), with the bias (2), or the probabilities (3).

Attention with ``nonpad_kv_seqlen`` (per-batch lengths known only at run time) or a
sliding window, and RotaryEmbedding, import once checked as the function ONNX defines
them by (byoc/onnx/expand.py): their bodies are already what a handler would write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..ir import dtype_name, numpy_dtype
from .expand import expand

if TYPE_CHECKING:
    from .importer import Importer
    from .ops import OnnxOp

FLOATS = ("float16", "bfloat16", "float32", "float64")
SOFTMAX_PRECISIONS = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}
"""ONNX's element types that ``softmax_precision`` may name, as byoc's dtypes."""


def _kind(imp: Importer, name: str) -> str | None:
    dtype = imp.dtype(name)
    return None if dtype is None else dtype_name(np.dtype(dtype))


def _given(node, k: int) -> str | None:
    """Input ``k``'s name, None when the node leaves it out."""
    return node.input[k] if k < len(node.input) and node.input[k] else None


def _wanted(node, k: int) -> str | None:
    """Output ``k``'s name, None when the node leaves it out."""
    return node.output[k] if k < len(node.output) and node.output[k] else None


def _schema_attrs(imp: Importer, node) -> None:
    """Refuse an attribute that the op's schema at the model's opset lacks."""
    try:
        schema = imp.onnx.defs.get_schema(node.op_type, imp.opset)
    except Exception:  # noqa: BLE001 - onnx's SchemaError: no such op at this opset
        raise imp.unsupported(f"{node.op_type} at opset {imp.opset}") from None
    imp.check_attrs(node, set(schema.attributes))


def _floats(imp: Importer, names: dict[str, str], what: str) -> str:
    """The one float dtype of the named inputs (the op's type constraint)."""
    kinds = {k: _kind(imp, n) for k, n in names.items()}
    for k, kind in kinds.items():
        if kind not in FLOATS:
            raise imp.invalid(f"its {k} is {kind or 'of an unknown dtype'}, not a float", hint=what)
    if len(set(kinds.values())) > 1:
        shown = ", ".join(f"{k} {v}" for k, v in kinds.items())
        raise imp.unsupported(f"inputs of different dtypes ({shown})", hint=what)
    return next(iter(kinds.values()))


# ---------------------------------------------------------------- Attention


class _Shapes:
    """An Attention node's sizes, checked: batch, query and key heads, query and key
    sequence lengths, past length, head sizes of Q/K and of V."""

    def __init__(self, imp: Importer, node) -> None:
        q, k, v = (imp.shape(n) for n in node.input[:3])
        self.rank = len(q)
        if {len(q), len(k), len(v)} != {self.rank} or self.rank not in (3, 4):
            raise imp.invalid(
                f"its Q, K and V have shapes {list(q)}, {list(k)} and {list(v)}: not all 3-D or all 4-D",
                hint="Attention takes (batch, sequence, hidden) or (batch, heads, sequence, head size)",
            )
        heads = (imp.attr("q_num_heads"), imp.attr("kv_num_heads"))
        if self.rank == 3:
            if None in heads or min(heads) < 1:
                raise imp.invalid(
                    f"its inputs are 3-D, but q_num_heads and kv_num_heads are {heads[0]} and {heads[1]}",
                    hint="3-D inputs need both attributes, positive",
                )
            self.hq, self.hkv = (int(h) for h in heads)
            for what, shape, h in (("Q", q, self.hq), ("K", k, self.hkv), ("V", v, self.hkv)):
                if shape[2] % h:
                    raise imp.invalid(
                        f"its {what}'s hidden size {shape[2]} is not a multiple of its {h} heads",
                        hint="a 3-D input's last axis is heads * head size",
                    )
            self.sq, self.skv = q[1], k[1]
            q, k, v = ((s[0], h, s[1], s[2] // h) for s, h in ((q, self.hq), (k, self.hkv), (v, self.hkv)))
        else:
            self.hq, self.hkv, self.sq, self.skv = q[1], k[1], q[2], k[2]
            for name, h in zip(("q_num_heads", "kv_num_heads"), (self.hq, self.hkv)):
                given = imp.attr(name)
                if given is not None and int(given) != h:
                    raise imp.invalid(f"its {name} {given} disagrees with its 4-D inputs' {h} heads")
        self.batch, self.d, self.dv = q[0], q[3], v[3]
        if (
            k[0] != self.batch
            or v[0] != self.batch
            or k[3] != self.d
            or v[1] != self.hkv
            or v[2] != self.skv
            or self.hq % self.hkv
        ):
            raise imp.invalid(
                f"its Q, K and V (as batch, heads, sequence, head size: {list(q)}, {list(k)}, {list(v)}) "
                "do not fit together",
                hint="one batch; K and V share heads and sequence; Q and K share the head size; "
                "the query heads are a multiple of the key heads",
            )
        self.q4, self.k4, self.v4 = q, k, v
        self.past = 0
        past = [_given(node, 4), _given(node, 5)]
        if any(past) and not all(past):
            raise imp.invalid("it has one of past_key and past_value without the other")
        if all(past):
            pk, pv = imp.shape(past[0]), imp.shape(past[1])
            self.past = pk[2] if len(pk) == 4 else -1
            if list(pk) != [self.batch, self.hkv, self.past, self.d] or list(pv) != [
                self.batch,
                self.hkv,
                self.past,
                self.dv,
            ]:
                raise imp.invalid(
                    f"its past_key {list(pk)} and past_value {list(pv)} do not fit its K and V",
                    hint="they are (batch, kv heads, past length, head size)",
                )
        self.total = self.past + self.skv


def attention(imp: Importer, node, e: OnnxOp) -> None:
    """Attention: checked, then composed (see the module doc), or imported as ONNX's
    function when it reads ``nonpad_kv_seqlen`` or has a sliding window."""
    _schema_attrs(imp, node)
    if len(node.input) < 3 or not all(node.input[:3]):
        raise imp.invalid("it lacks one of Q, K and V")
    what = "Attention's Q, K and V (and past key and value) are bfloat16, float16, float32 or float64"
    io = dict(zip(("Q", "K", "V", "", "past_key", "past_value"), node.input[:6]))
    dtype = _floats(imp, {k: n for k, n in io.items() if k and n}, what)
    s = _Shapes(imp, node)
    mode = int(imp.attr("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        raise imp.invalid(f"its qk_matmul_output_mode is {mode}", hint="it is 0, 1, 2 or 3")
    precision = imp.attr("softmax_precision")
    if precision is not None and int(precision) not in SOFTMAX_PRECISIONS:
        raise imp.invalid(
            f"its softmax_precision {precision} is not a float type",
            hint="ONNX's FLOAT (1), FLOAT16 (10), DOUBLE (11) or BFLOAT16 (16)",
        )
    mask = _given(node, 3)
    if mask is not None:
        _check_mask(imp, mask, s)
    lengths = _given(node, 6)
    if lengths is not None:
        if s.past or _wanted(node, 1) or _wanted(node, 2):
            raise imp.invalid("it has nonpad_kv_seqlen and a past or present key and value")
        if _kind(imp, lengths) != "int64" or list(imp.shape(lengths)) != [s.batch]:
            raise imp.invalid(
                f"its nonpad_kv_seqlen is not {s.batch} int64 lengths, one per batch entry",
                hint="nonpad_kv_seqlen has shape (batch_size,)",
            )
    windowed = any(int(imp.attr(w, -1)) != -1 for w in ("left_window_size", "right_window_size"))
    if lengths is not None or windowed:
        if not expand(imp, node):
            raise imp.unsupported(f"Attention at opset {imp.opset} with nonpad_kv_seqlen or a window")
        return
    _compose(imp, node, e, s, dtype, mode, precision)


def _check_mask(imp: Importer, mask: str, s: _Shapes) -> None:
    shape = list(imp.shape(mask))
    kind = _kind(imp, mask)
    if kind is None:
        raise imp.unsupported("an attn_mask of an unknown dtype")
    if not shape or shape[-1] > s.total:
        raise imp.invalid(
            f"its attn_mask has shape {shape}, whose last axis is not 1 to {s.total} keys long",
            hint="the mask covers at most the past and new keys; a shorter one is padded",
        )
    padded = [*shape[:-1], s.total]
    try:
        full = np.broadcast_shapes(tuple(padded), (s.batch, s.hq, s.sq, s.total))
    except ValueError:
        full = None
    if full != (s.batch, s.hq, s.sq, s.total):
        raise imp.invalid(
            f"its attn_mask of shape {shape} does not broadcast to (batch, heads, queries, keys) "
            f"{[s.batch, s.hq, s.sq, s.total]}"
        )


def _heads(imp: Importer, name: str, s: _Shapes, heads: int, r) -> str:
    """Input ``name`` as (batch, heads, sequence, head size): a 3-D one split."""
    x = imp.value(name)
    if s.rank == 4:
        return x
    b, n, hidden = imp.shape(name)
    x = imp.emit(r["reshape"], [x], {"newshape": [b, n, heads, hidden // heads]})
    return imp.emit(r["flip"], [x], {"perm": [0, 2, 1, 3]})


def _const_bias(imp: Importer, mask: np.ndarray | None, s: _Shapes, causal: bool, dtype) -> np.ndarray:
    """The additive bias, as the reference computes it, from a constant mask (or none)."""
    neg, zero = np.asarray(-np.inf, dtype), np.asarray(0, dtype)
    bias = np.zeros((s.sq, s.total), dtype)
    if mask is not None:
        short = s.total - mask.shape[-1]
        if short:
            fill = False if mask.dtype == np.bool_ else -np.inf
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, short)], constant_values=fill)
        mask = np.where(mask, zero, neg) if mask.dtype == np.bool_ else mask.astype(dtype)
        bias = bias + mask
    if causal:
        rows, cols = np.indices((s.sq, s.total))
        bias = bias + np.where(cols <= rows + s.past, zero, neg)
    return bias.astype(dtype)


def _runtime_bias(imp: Importer, mask: str, s: _Shapes, causal: bool, dtype, r) -> str:
    """The additive bias from a mask computed at run time: a bool one made 0 or -inf, an
    integer one cast, then padded with -inf, and the causal mask (a constant) added."""
    shape = list(imp.shape(mask))
    kind = _kind(imp, mask)
    x = imp.value(mask)
    if kind == "bool":
        zero, neg = (imp.constant(np.asarray(v, dtype), imp.names.fresh("k")) for v in (0, -np.inf))
        x = imp.emit(r["choose"], [x, zero, neg])
    elif kind != dtype_name(dtype):
        x = imp.emit(r["cast"], [x], {"to": dtype_name(dtype)})
    short = s.total - shape[-1]
    if short:  # keys the mask does not cover: masked out
        pad = np.full([*shape[:-1], short], -np.inf, dtype)
        x = imp.emit(r["join"], [x, imp.constant(pad, imp.names.fresh("pad"))], {"axis": -1})
    if causal:
        x = imp.emit(
            r["plus"], [x, imp.constant(_const_bias(imp, None, s, True, dtype), imp.names.fresh("causal"))]
        )
    return x


def _present(imp: Importer, node, new: str, index: int, r) -> str:
    """The present key (``index`` 1) or value (2): the past one, when given, joined
    before the new one on the sequence axis; the node's output ``index`` when it has one."""
    if _given(node, index + 3):
        return imp.emit(
            r["join"], [imp.value(node.input[index + 3]), new], {"axis": 2}, out=_wanted(node, index)
        )
    if _wanted(node, index):
        imp.alias(node.output[index], new)
    return new


def _compose(imp: Importer, node, e: OnnxOp, s: _Shapes, dtype, mode: int, precision) -> None:
    r = e.roles
    np_dtype = np.dtype(imp.dtype(node.input[0]))
    q = _heads(imp, node.input[0], s, s.hq, r)
    k = _heads(imp, node.input[1], s, s.hkv, r)
    v = _heads(imp, node.input[2], s, s.hkv, r)
    k, v = (_present(imp, node, new, index, r) for index, new in ((1, k), (2, v)))
    given = imp.attr("scale")
    scale = np.float32(given) if given is not None else np.float32(1) / np.sqrt(np.float32(s.d))
    if not scale >= 0:  # Q and K are scaled by its square root
        raise imp.invalid(f"its scale {given} is negative", hint="ONNX scales Q and K by sqrt(scale)")
    root = imp.constant(np.asarray(np.sqrt(scale), np_dtype), imp.names.fresh("scale"))
    q = imp.emit(r["times"], [q, root])
    kt = imp.emit(r["times"], [imp.emit(r["flip"], [k], {"perm": [0, 1, 3, 2]}), root])
    rep = s.hq // s.hkv
    if rep > 1:  # the query heads of one key head, stacked: no copy of K or V per head
        q = imp.emit(r["reshape"], [q], {"newshape": [s.batch, s.hkv, rep * s.sq, s.d]})
    scores = imp.emit(e.op, [q, kt])
    if rep > 1:
        scores = imp.emit(r["reshape"], [scores], {"newshape": [s.batch, s.hq, s.sq, s.total]})
    softcap = float(imp.attr("softcap", 0.0))
    if softcap > 0:
        cap = imp.constant(np.asarray(softcap, np_dtype), imp.names.fresh("softcap"))
        squashed = imp.emit(r["squash"], [imp.emit(r["over"], [scores, cap])])
        scores = imp.emit(r["times"], [squashed, cap])
    extra = _wanted(node, 3)
    if extra and mode in (0, 1):
        imp.alias(extra, scores)
    mask = _given(node, 3)
    causal = bool(int(imp.attr("is_causal", 0)))
    guard = None
    if mask is None or mask in imp.consts:
        array = _const_bias(imp, None if mask is None else np.asarray(imp.consts[mask]), s, causal, np_dtype)
        masked_rows = np.isneginf(array.max(axis=-1, keepdims=True))
        if mask is not None or causal:
            scores = imp.emit(r["plus"], [scores, imp.constant(array, imp.names.fresh("bias"))])
        if masked_rows.any():
            guard = imp.constant(masked_rows, imp.names.fresh("masked_rows"))
    else:
        bias = _runtime_bias(imp, mask, s, causal, np_dtype, r)
        scores = imp.emit(r["plus"], [scores, bias])
        peak = imp.emit(r["peak"], [bias], {"axes": [-1], "keepdims": True})
        neg = imp.constant(np.asarray(-np.inf, np_dtype), imp.names.fresh("k"))
        guard = imp.emit(r["same"], [peak, neg])
    if extra and mode == 2:
        imp.alias(extra, scores)
    low = SOFTMAX_PRECISIONS.get(int(precision)) if precision is not None else None
    if low is not None and low != dtype:
        scores = imp.emit(r["cast"], [scores], {"to": low})
    probs = imp.emit(r["normalize"], [scores], {"axis": -1})
    if guard is not None:
        zero = imp.constant(np.asarray(0, numpy_dtype(low) if low else np_dtype), imp.names.fresh("k"))
        probs = imp.emit(r["choose"], [guard, zero, probs])
    if low is not None and low != dtype:
        probs = imp.emit(r["cast"], [probs], {"to": dtype})
    if extra and mode == 3:
        imp.alias(extra, probs)
    if rep > 1:
        probs = imp.emit(r["reshape"], [probs], {"newshape": [s.batch, s.hkv, rep * s.sq, s.total]})
    y = node.output[0] if s.rank == 4 and rep == 1 else None
    out = imp.emit(e.op, [probs, v], out=y)
    if rep > 1:
        out = imp.emit(
            r["reshape"],
            [out],
            {"newshape": [s.batch, s.hq, s.sq, s.dv]},
            out=node.output[0] if s.rank == 4 else None,
        )
    if s.rank == 3:
        out = imp.emit(r["flip"], [out], {"perm": [0, 2, 1, 3]})
        imp.emit(r["reshape"], [out], {"newshape": [s.batch, s.sq, s.hq * s.dv]}, out=node.output[0])


# ---------------------------------------------------------------- RotaryEmbedding


def rotary_embedding(imp: Importer, node, e: OnnxOp) -> None:
    """RotaryEmbedding: its shapes, attributes and constant position ids checked, then
    imported as the function ONNX defines it by."""
    _schema_attrs(imp, node)
    if len(node.input) < 3 or not all(node.input[:3]):
        raise imp.invalid("it lacks one of its input, cos_cache and sin_cache")
    what = "RotaryEmbedding's input and caches are all float32, float16 or bfloat16"
    _floats(imp, dict(zip(("input", "cos_cache", "sin_cache"), node.input[:3])), what)
    shape = imp.shape(node.input[0])
    heads = imp.attr("num_heads")
    if len(shape) == 4:
        batch, _, seq, head = shape
    elif len(shape) == 3:
        batch, seq, hidden = shape
        if heads is None or int(heads) < 1 or hidden % int(heads):
            raise imp.invalid(
                f"its input is 3-D with hidden size {hidden}, but its num_heads is {heads}",
                hint="a 3-D input needs num_heads, which divides the hidden size",
            )
        head = hidden // int(heads)
    else:
        raise imp.invalid(f"its input has rank {len(shape)}, not 3 or 4")
    dim = int(imp.attr("rotary_embedding_dim", 0)) or head
    if dim % 2 or not 0 < dim <= head:
        raise imp.invalid(
            f"its rotary_embedding_dim {dim} is not an even size of at most the head size {head}",
            hint="0 (the default) rotates the whole head",
        )
    positions = _given(node, 3)
    caches = [list(imp.shape(n)) for n in node.input[1:3]]
    if positions is not None:
        if _kind(imp, positions) != "int64" or list(imp.shape(positions)) != [batch, seq]:
            raise imp.invalid(
                f"its position_ids have shape {list(imp.shape(positions))}, not (batch, sequence) "
                f"{[batch, seq]} int64"
            )
        rows = caches[0][0] if caches[0] else 0
        if any(len(c) != 2 or c != [rows, dim // 2] for c in caches):
            raise imp.invalid(
                f"its caches have shapes {caches[0]} and {caches[1]}, not (positions, {dim // 2})",
                hint="with position_ids the caches are 2-D, half the rotary dimension wide",
            )
        given = imp.consts.get(positions)
        if given is not None and given.size and (given.min() < 0 or given.max() >= rows):
            raise imp.invalid(
                f"its position_ids hold {int(given.min())} to {int(given.max())}, beyond its {rows} cached positions"
            )
    elif any(c != [batch, seq, dim // 2] for c in caches):
        raise imp.invalid(
            f"its caches have shapes {caches[0]} and {caches[1]}, not (batch, sequence, half the "
            f"rotary dimension) {[batch, seq, dim // 2]}",
            hint="without position_ids the caches hold each token's values",
        )
    if not expand(imp, node):
        raise imp.unsupported(f"RotaryEmbedding at opset {imp.opset}")


ATTENTION_KINDS = {"attention": attention, "rotary_embedding": rotary_embedding}
"""The handlers of this module that ops.yaml's ``kind`` names."""
