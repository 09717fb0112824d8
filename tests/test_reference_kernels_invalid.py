"""Every invalid attribute combination the shape functions (byoc.shape_*) and the kernels of
byoc.reference_kernels must reject: both raise ValueError naming the cause."""

from __future__ import annotations

import numpy as np
import pytest

from byoc import shape_conv_pool, shape_indexing, shape_layout, shape_linear_norm, shape_reductions
from byoc.reference_kernels import by_name

# ------------------------------------------------------------------------------- invalid cases

X4 = (1, 4, 5, 5)
W4 = (6, 2, 3, 3)
INVALID = [
    # (kernel, shape function, input shapes, extra positional, attributes, message)
    (
        "conv",
        "conv",
        [X4, W4],
        [],
        {"groups": 2, "pads": [-1, 0, 0, 0]},
        r"pads\[0\] = -1 must be non-negative",
    ),
    ("conv", "conv", [X4, W4], [], {"groups": 2, "strides": [1, 0]}, r"strides\[1\] = 0 must be positive"),
    (
        "conv",
        "conv",
        [X4, W4],
        [],
        {"groups": 2, "dilations": [-1, 1]},
        r"dilations\[0\] = -1 must be positive",
    ),
    ("conv", "conv", [X4, W4], [], {"groups": 2, "strides": [1, 1, 1]}, r"strides has 3 values .*expected 2"),
    ("conv", "conv", [X4, W4], [], {"groups": 2, "pads": [1, 1]}, r"pads has 2 values .*expected 4"),
    (
        "conv",
        "conv",
        [(1, 3, 5, 5), (6, 1, 3, 3)],
        [],
        {"groups": 2},
        r"groups = 2 does not divide the 3 input",
    ),
    ("conv", "conv", [X4, (3, 2, 3, 3)], [], {"groups": 2}, r"does not divide the 3 output channels"),
    ("conv", "conv", [X4, (6, 4, 3, 3)], [], {"groups": 2}, r"weight shape\[1\] = 4, expected C/groups"),
    ("conv", "conv", [X4, W4], [], {"groups": 0}, r"groups = 0 must be positive"),
    ("conv", "conv", [X4, (6, 2, 7, 3)], [], {"groups": 2}, r"kernel extent 7 .* exceeds the padded input 5"),
    (
        "conv",
        "conv",
        [X4, W4],
        [],
        {"groups": 2, "dilations": [3, 1]},
        r"extent 7 \(kernel 3, dilations\[0\] = 3\)",
    ),
    ("conv", "conv", [X4, (6, 2, 3)], [], {"groups": 2}, r"weight shape \[6, 2, 3\] has rank 3, expected 4"),
    ("conv", "conv", [(4, 5), (6, 4)], [], {}, r"must be \(N, C, spatial...\)"),
    (
        "conv_transpose",
        "conv_transpose",
        [X4, (4, 3, 3, 3)],
        [],
        {"output_padding": [1, 0]},
        r"output_padding\[0\] = 1 must be smaller",
    ),
    (
        "conv_transpose",
        "conv_transpose",
        [X4, (3, 3, 3, 3)],
        [],
        {},
        r"weight shape\[0\] = 3, expected the 4 input",
    ),
    (
        "conv_transpose",
        "conv_transpose",
        [X4, (4, 3, 3, 3)],
        [],
        {"groups": 3},
        r"groups = 3 does not divide the 4 input",
    ),
    (
        "conv_transpose",
        "conv_transpose",
        [(1, 1, 1, 1), (1, 1, 1, 1)],
        [],
        {"pads": [1, 0, 0, 0]},
        r"leave no output on spatial axis 0",
    ),
    ("max_pool", "max_pool", [X4], [], {"kernel_shape": [3]}, r"kernel_shape has 1 values .*expected 2"),
    (
        "max_pool",
        "max_pool",
        [X4],
        [],
        {"kernel_shape": [6, 1]},
        r"window extent 6 .* exceeds the padded input 5",
    ),
    (
        "max_pool",
        "max_pool",
        [(1, 1, 3)],
        [],
        {"kernel_shape": [1], "pads": [2, 0]},
        r"window 0 covers padding only",
    ),
    (
        "max_pool",
        "max_pool",
        [X4],
        [],
        {"kernel_shape": [2, 2], "ceil_mode": 2},
        r"ceil_mode = 2 must be 0 or 1",
    ),
    (
        "avg_pool",
        "avg_pool",
        [X4],
        [],
        {"kernel_shape": [2, 2], "count_include_pad": 2},
        r"count_include_pad = 2",
    ),
    (
        "avg_pool",
        "avg_pool",
        [X4],
        [],
        {"kernel_shape": [2, 2], "strides": [0, 1]},
        r"strides\[0\] = 0 must be positive",
    ),
    ("global_avg_pool", "global_pool", [(2, 3)], [], {}, r"must be \(N, C, spatial...\)"),
    ("lrn", "lrn", [X4], [], {"size": 0}, r"size = 0 must be positive"),
    (
        "batch_norm",
        "batch_norm",
        [X4, (4,), (4,), (3,), (4,)],
        [],
        {},
        r"parameter 3 has shape \[3\], expected \[4\]",
    ),
    ("softmax", "softmax", [(2, 3)], [], {"axis": 2}, r"axis = 2 is out of range for rank 2"),
    ("log_softmax", "softmax", [(2, 3)], [], {"axis": -3}, r"axis = -3 is out of range"),
    ("dense", "dense", [(2, 3), (4, 5)], [], {}, r"last dimension 3 does not match weight shape\[1\] = 5"),
    ("matmul", "matmul", [(2, 3), (4, 5)], [], {}, r"inner dimensions differ"),
    ("matmul", "matmul", [(2, 2, 3), (3, 3, 5)], [], {}, r"batch dimensions .* do not broadcast"),
    ("matmul", "matmul", [(), (3,)], [], {}, r"must both have rank >= 1"),
    ("reduce_sum", "reduce", [(2, 3)], [], {"axes": [2]}, r"axes\[0\] = 2 is out of range"),
    ("reduce_max", "reduce", [(2, 3)], [], {"axes": [1, -1]}, r"names an axis twice"),
    ("reduce_mean", "reduce", [(2, 3)], [], {"keepdims": 2}, r"keepdims = 2 must be 0 or 1"),
    ("reshape", "reshape", [(2, 6)], [[-1, -1]], {}, r"more than one -1"),
    ("reshape", "reshape", [(2, 6)], [[5, 2]], {}, r"holds 10 elements, the input \[2, 6\] 12"),
    ("reshape", "reshape", [(2, 6)], [[-1, 5]], {}, r"cannot infer the -1"),
    ("reshape", "reshape", [(2, 6)], [[-2, -6]], {}, r"shape\[0\] = -2 is negative"),
    ("reshape", "reshape", [(12,)], [[3, 0]], {}, r"shape\[1\] = 0 copies input axis 1"),
    (
        "flatten",
        "flatten",
        [(2, 3)],
        [],
        {"axis": 3},
        r"axis = 3 is out of range for rank 2 \(valid: -2..2\)",
    ),
    ("transpose", "transpose", [(2, 3, 4)], [], {"perm": [0, 0, 1]}, r"not a permutation of 0..2"),
    ("transpose", "transpose", [(2, 3, 4)], [], {"perm": [1, 0]}, r"not a permutation"),
    ("squeeze", "squeeze", [(2, 1)], [], {"axes": [0]}, r"axis 0 has size 2, not 1"),
    ("squeeze", "squeeze", [(2, 1)], [], {"axes": [2]}, r"out of range"),
    ("unsqueeze", "unsqueeze", [(2, 3)], [], {"axes": [0, -4]}, r"names an axis twice"),
    ("unsqueeze", "unsqueeze", [(2, 3)], [], {"axes": [3]}, r"axes\[0\] = 3 is out of range for rank 3"),
    ("expand", "expand", [(2, 3)], [(4, 3, 2)], {}, r"do not broadcast"),
    ("pad", "pad", [(2, 3)], [], {"pads": [0, -1, 0, 0]}, r"pads\[1\] = -1 must be non-negative"),
    ("pad", "pad", [(2, 3)], [], {"pads": [0, 1]}, r"pads has 2 values .*expected 4"),
    ("pad", "pad", [(2, 3)], [], {"pads": [0] * 4, "mode": "wrap"}, r"mode 'wrap' is not one of"),
    ("pad", "pad", [(2, 3)], [], {"pads": [0, 3, 0, 0], "mode": "reflect"}, r"smaller than its size 3"),
    ("slice", "slice", [(4,)], [], {"starts": [0], "ends": [3], "steps": [0]}, r"steps\[0\] is 0"),
    ("slice", "slice", [(4,)], [], {"starts": [0, 1], "ends": [3]}, r"starts has 2 values, ends 1"),
    (
        "slice",
        "slice",
        [(4, 4)],
        [],
        {"starts": [0, 0], "ends": [3, 3], "axes": [0, -2]},
        r"names an axis twice",
    ),
    ("split", "split", [(4, 6)], [], {"axis": 1, "sizes": [2, 3]}, r"add up to 5, axis 1 has size 6"),
    (
        "split",
        "split",
        [(4, 6)],
        [],
        {"sizes": [1, 1, 2], "num_outputs": 2},
        r"give 3 parts, but there are 2 outputs",
    ),
    ("split", "split", [(4, 6)], [], {"axis": 1}, r"give sizes, num_outputs or both"),
    ("split", "split", [(4, 6)], [], {"num_outputs": 3}, r"cannot split size 4 into non-empty parts"),
    ("gather", "gather", [(4, 6), (2,)], [], {"axis": 2}, r"axis = 2 is out of range"),
    ("concatenate", "concatenate", [(2, 3), (2, 3, 1)], [], {}, r"input 1 has shape \[2, 3, 1\]"),
    ("concatenate", "concatenate", [(2, 3), (2, 4)], [], {"axis": 0}, r"input 1 has shape \[2, 4\]"),
    ("concatenate", "concatenate", [(2, 3), (2, 4)], [], {"axis": -3}, r"out of range"),
    ("prelu", "prelu", [(2, 3), (2,)], [], {}, r"slope shape \[2\] does not broadcast"),
    ("bias_add", "bias_add", [(2, 3), (2,)], [], {"axis": 1}, r"bias shape \[2\], expected \[3\]"),
    ("bias_add", "bias_add", [(2, 3), (3,)], [], {"axis": 2}, r"axis = 2 is out of range for rank 2"),
]


SHAPE_MODULES = (shape_conv_pool, shape_linear_norm, shape_layout, shape_reductions, shape_indexing)
"""The modules of the shape functions that INVALID names."""


def shape_function(name: str):
    return next(getattr(m, name) for m in SHAPE_MODULES if hasattr(m, name))


@pytest.mark.parametrize(
    ("kernel", "shape_fn", "shapes", "extra", "attrs", "message"),
    INVALID,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(INVALID)],
)
def test_invalid_attributes_raise_value_error_naming_the_cause(
    kernel, shape_fn, shapes, extra, attrs, message
):
    with pytest.raises(ValueError, match=message):
        shape_function(shape_fn)(*shapes, *extra, **attrs)
    with pytest.raises(ValueError, match=message):
        by_name()[kernel](*(np.zeros(s) for s in shapes), *extra, **attrs)
