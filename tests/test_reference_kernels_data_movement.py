"""byoc.reference_kernels.data_movement (transpose, reshape, expand, concatenate, pad, gather,
slice, split, where) element by element against their definitions (ONNX's clamping for slice), and
byoc.shape_layout / byoc.shape_indexing against the outputs' shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference_kernels_support import FAST, inside, seeded_rng, small_shape

from byoc import shape_indexing, shape_layout
from byoc.reference_kernels import data_movement

# ----------------------------------------------------------------------------------- shape ops


@FAST
@given(small_shape(max_rank=5), st.data())
def test_layout_ops_agree_with_their_shape_functions(shape, data):
    x = np.arange(math.prod(shape), dtype=np.int16).reshape(shape)
    rank = len(shape)
    perm = data.draw(st.permutations(range(rank)))
    got = data_movement.transpose(x, perm=perm)
    assert got.shape == shape_layout.transpose(shape, perm=perm) and got.dtype == x.dtype
    assert all(
        got[idx] == x[tuple(idx[perm.index(a)] for a in range(rank))] for idx in np.ndindex(*got.shape)
    )

    axis = data.draw(st.integers(-rank, rank))
    got = data_movement.flatten(x, axis=axis)
    assert got.shape == shape_layout.flatten(shape, axis=axis)
    np.testing.assert_array_equal(got.ravel(), x.ravel())

    count = data.draw(st.integers(1, 2))
    out_rank = rank + count
    new = data.draw(
        st.lists(
            st.integers(-out_rank, out_rank - 1),
            min_size=count,
            max_size=count,
            unique_by=lambda a: a % out_rank,
        )
    )
    got = data_movement.unsqueeze(x, axes=new)
    assert got.shape == shape_layout.unsqueeze(shape, axes=new)
    assert all(got.shape[a] == 1 for a in new)
    assert data_movement.squeeze(got, axes=new).shape == shape
    assert data_movement.squeeze(x).shape == tuple(d for d in shape if d != 1) == shape_layout.squeeze(shape)

    target = list(data.draw(st.permutations(shape)))  # same element count
    if target and data.draw(st.booleans()):
        target[data.draw(st.integers(0, len(target) - 1))] = -1
    got = data_movement.reshape(x, target)
    assert got.shape == shape_layout.reshape(shape, target)
    np.testing.assert_array_equal(got.ravel(), x.ravel())


def test_reshape_zero_copies_the_input_dimension_unless_allowzero():
    assert shape_layout.reshape((2, 3, 4), [0, -1]) == (2, 12)
    assert shape_layout.reshape((0, 3), [0, 3], allowzero=1) == (0, 3)
    assert data_movement.reshape(np.zeros((2, 3, 4)), [0, 0, 2, 2]).shape == (2, 3, 2, 2)


@FAST
@given(small_shape(max_rank=3), st.data())
def test_expand_and_concatenate_agree_with_their_shape_functions(shape, data):
    x = seeded_rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal(shape)
    lead = data.draw(small_shape(0, 2, 1, 3))
    target = (*lead, *(data.draw(st.sampled_from([1, d])) for d in shape))
    got = data_movement.expand(x, target)
    assert got.shape == shape_layout.expand(shape, target) == np.broadcast_shapes(shape, target)
    for idx in np.ndindex(*got.shape):
        tail = idx[len(idx) - len(shape) :]
        assert got[idx] == x[tuple(0 if d == 1 else i for i, d in zip(tail, shape))]

    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    others = [np.ones(shape[: axis % len(shape)] + (k,) + shape[axis % len(shape) + 1 :]) for k in (1, 2)]
    got = data_movement.concatenate(x, *others, axis=axis)
    assert got.shape == shape_layout.concatenate(x.shape, *(o.shape for o in others), axis=axis)
    np.testing.assert_array_equal(np.take(got, range(shape[axis]), axis=axis), x)


def _reflect(i: int, size: int) -> int:
    while not 0 <= i < size:
        i = -i if i < 0 else 2 * (size - 1) - i
    return i


@FAST
@given(small_shape(max_rank=3, max_side=4), st.sampled_from(["constant", "reflect", "edge"]), st.data())
def test_pad_maps_every_output_element_to_its_source(shape, mode, data):
    top = [(d - 1 if mode == "reflect" else 3) for d in shape]
    pads = [data.draw(st.integers(0, t)) for t in top + top]  # begins, then ends
    x = seeded_rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal(shape)
    got = data_movement.pad(x, pads=pads, mode=mode, value=-7.5)
    assert got.shape == shape_layout.pad(shape, pads=pads, mode=mode)
    for idx in np.ndindex(*got.shape):
        src = [i - pads[a] for a, i in enumerate(idx)]
        if mode == "constant":
            want = x[tuple(src)] if inside(src, shape) else -7.5
        elif mode == "edge":
            want = x[tuple(min(max(s, 0), d - 1) for s, d in zip(src, shape))]
        else:
            want = x[tuple(_reflect(s, d) for s, d in zip(src, shape))]
        assert got[idx] == want


@FAST
@given(small_shape(max_rank=3), small_shape(0, 2, 1, 3), st.data())
def test_gather_takes_indices_along_the_axis(shape, indices_shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[axis]
    rng = seeded_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal(shape)
    indices = rng.integers(-size, size, indices_shape)
    got = data_movement.gather(x, indices, axis=axis)
    a = axis % len(shape)
    assert got.shape == shape_indexing.gather(shape, indices_shape, axis=axis)
    for idx in np.ndindex(*got.shape):
        pre, mid, post = idx[:a], idx[a : a + len(indices_shape)], idx[a + len(indices_shape) :]
        assert got[idx] == x[(*pre, int(indices[mid]) % size, *post)]


def test_gather_rejects_an_index_out_of_range():
    with pytest.raises(ValueError, match="index 3 is out of range for axis size 3"):
        data_movement.gather(np.zeros(3), np.array([0, 3]))
    with pytest.raises(ValueError, match="index -4"):
        data_movement.gather(np.zeros(3), np.array([-4]))


def _onnx_slice(size: int, start: int, end: int, step: int) -> list[int]:
    """ONNX Slice's documented rule, spelled out."""
    start, end = start + size if start < 0 else start, end + size if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), size), min(max(end, 0), size)
    else:
        start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
    picked, i = [], start
    while (i < end) if step > 0 else (i > end):
        picked.append(i)
        i += step
    return picked


@FAST
@given(small_shape(max_rank=3, max_side=5), st.data())
def test_slice_follows_onnx_clamping(shape, data):
    rank = len(shape)
    axes = data.draw(
        st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank, unique_by=lambda a: a % rank)
    )
    big = st.integers(-9, 9) | st.sampled_from([-(2**63), 2**63 - 1])
    starts, ends = [data.draw(big) for _ in axes], [data.draw(big) for _ in axes]
    steps = [data.draw(st.sampled_from([-3, -2, -1, 1, 2, 3])) for _ in axes]
    x = seeded_rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal(shape)
    got = data_movement.slice(x, starts=starts, ends=ends, axes=axes, steps=steps)
    want = x
    for a, s, e, t in zip(axes, starts, ends, steps):
        want = np.take(want, _onnx_slice(shape[a], s, e, t), axis=a)
    assert (
        got.shape == want.shape == shape_layout.slice(shape, starts=starts, ends=ends, axes=axes, steps=steps)
    )
    np.testing.assert_array_equal(got, want)


def test_slice_onnx_examples_and_where_it_differs_from_python():
    data = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    got = data_movement.slice(data, starts=[1, 0], ends=[2, 3], axes=[0, 1], steps=[1, 2])
    np.testing.assert_array_equal(got, [[5, 7]])
    np.testing.assert_array_equal(data_movement.slice(data, starts=[0, 1], ends=[-1, 1000]), [[2, 3, 4]])
    # a start before the beginning with a negative step is clamped to 0 (Python gives nothing)
    np.testing.assert_array_equal(
        data_movement.slice(np.arange(5), starts=[-10], ends=[-100], steps=[-1]), [0]
    )
    assert list(range(5))[-10:-100:-1] == []


@FAST
@given(small_shape(max_rank=3, max_side=6), st.data())
def test_split_parts_concatenate_back(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[axis]
    x = seeded_rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal(shape)
    if data.draw(st.booleans()):
        cuts = sorted(data.draw(st.lists(st.integers(0, size), max_size=3)))
        attrs = {"sizes": [b - a for a, b in zip([0, *cuts], [*cuts, size])]}
    else:
        attrs = {
            "num_outputs": data.draw(st.integers(1, size).filter(lambda n: (n - 1) * -(-size // n) < size))
        }
    parts = data_movement.split(x, axis=axis, **attrs)
    assert tuple(p.shape for p in parts) == shape_layout.split(shape, axis=axis, **attrs)
    np.testing.assert_array_equal(np.concatenate(parts, axis=axis), x)
    if "num_outputs" in attrs:
        chunk = -(-size // attrs["num_outputs"])
        assert all(p.shape[axis] == chunk for p in parts[:-1]) and 1 <= parts[-1].shape[axis] <= chunk


def test_where_takes_nonzero_and_nan_as_true():
    cond = np.array([0.0, -0.0, 1.0, np.nan, -2.0])
    got = data_movement.where(cond, np.arange(5), np.full(5, -1))
    assert got.tolist() == [-1, -1, 2, 3, 4]
    ints = data_movement.where(np.array([[1], [0]], np.int32), np.int32(7), np.zeros(3, np.int32))
    assert ints.tolist() == [[7, 7, 7], [0, 0, 0]]
