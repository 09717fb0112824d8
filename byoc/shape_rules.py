"""The shape rules of the op catalog: a small named vocabulary, implemented once.

An op of ``spec/ops.yaml`` names its rule (``shape: conv``); the rule computes the op's
output type from its input types and attributes. Most rules wrap a shape function
(:func:`~byoc.shape_rule_wrap.wrap`) of :mod:`byoc.shape_conv_pool`,
:mod:`byoc.shape_linear_norm`, :mod:`byoc.shape_layout`, :mod:`byoc.shape_reductions`
or :mod:`byoc.shape_indexing` (the shape half of the reference kernels), so an op's
inferred shape is exactly the shape its kernel computes. A rule reads the attributes
it lists in :attr:`~byoc.shape_rule_model.ShapeRule.attrs`, each of a fixed value type;
an op of the rule must declare them (the catalog loader checks), with any defaults it likes.

A rule's failure is a :class:`~byoc.shape_rule_model.RuleError`; when one attribute is at
fault (a :class:`~byoc.shape_checks.AttributeProblem`) its ``key`` names the attribute, so
the graph DSL puts the caret on that attribute rather than on the op.

This is the one Python module that knows rule names; no op name appears in Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from . import (
    shape_conv_pool,
    shape_indexing,
    shape_integer,
    shape_layout,
    shape_linear_norm,
    shape_reductions,
)
from .shape_rule_dtypes import data_with_indices, int64_result, numeric_indices, scattered, values_and_indices
from .shape_rule_elementwise import bitcast, cast, compare, elementwise, predicate, select, unidirectional
from .shape_rule_model import ShapeRule
from .shape_rule_quantize import dequantize, nonzero_scale, one_step, quantize, scaled_step
from .shape_rule_wrap import fill_checked, wrap

SHAPE_RULES: Mapping[str, ShapeRule] = MappingProxyType(
    {
        rule.name: rule
        for rule in (
            ShapeRule(
                "elementwise", elementwise, True, doc="numpy broadcasting of the inputs, all of one dtype"
            ),
            ShapeRule(
                "compare",
                compare,
                True,
                doc="numpy broadcasting of the inputs, all of one dtype; the output is bool",
            ),
            ShapeRule(
                "predicate",
                predicate,
                True,
                doc="the input's shape; a float input, a bool output",
                max_inputs=1,
            ),
            ShapeRule(
                "select",
                select,
                True,
                doc="a bool condition and two values of one dtype, all three broadcast (numpy's rule)",
                min_inputs=3,
                max_inputs=3,
            ),
            ShapeRule(
                "cast",
                cast,
                True,
                MappingProxyType({"to": "str"}),
                doc="the input's shape, of the dtype named by the attribute to",
                max_inputs=1,
            ),
            ShapeRule(
                "bitcast",
                bitcast,
                True,
                MappingProxyType({"to": "str"}),
                doc="the input's shape, of the dtype named by the attribute to, which has the input's width",
                max_inputs=1,
            ),
            ShapeRule(
                "dequantize",
                dequantize,
                True,
                doc="x (an 8-, 16- or 32-bit integer), a float scale and a zero point of x's type, all "
                "three broadcast; the scale's dtype",
                min_inputs=3,
                max_inputs=3,
                parameters=(1, 2),
                step=scaled_step,
            ),
            ShapeRule(
                "quantize",
                quantize,
                True,
                doc="x and a scale (float32) and an 8- or 16-bit integer zero point, all three broadcast; "
                "the zero point's dtype",
                min_inputs=3,
                max_inputs=3,
                parameters=(1, 2),
                check_constant=nonzero_scale,
                step=one_step,
            ),
            ShapeRule(
                "mod",
                elementwise,
                True,
                MappingProxyType({"fmod": "bool"}),
                doc="numpy broadcasting of inputs of one dtype; fmod picks C's fmod over the divisor's sign",
            ),
            ShapeRule(
                "unidirectional",
                unidirectional,
                True,
                doc="the first input's shape; the other inputs broadcast to it (numpy's rule)",
            ),
            wrap(
                "concatenate",
                shape_layout.concatenate,
                "inputs of one rank >= 1, equal but along axis, where sizes add up",
            ),
            wrap(
                "conv",
                shape_conv_pool.conv,
                "x (N, C, D...), w (M, C/groups, k...) -> (N, M, O...); 1-D to N-D by x's rank",
            ),
            wrap(
                "conv_transpose",
                shape_conv_pool.conv_transpose,
                "x (N, C, D...), w (C, M/groups, k...) -> (N, M, O...)",
            ),
            wrap(
                "pool",
                shape_conv_pool.max_pool,
                "x (N, C, D...) -> (N, C, O...) over windows of kernel_shape",
            ),
            wrap("global_pool", shape_conv_pool.global_pool, "x (N, C, D...) -> (N, C, 1...)"),
            wrap(
                "conv_integer",
                shape_integer.conv_integer,
                "conv's shapes; 8-bit x and w, x's zero point one value, w's one or one per output "
                "channel; int32",
                dtype=shape_integer.int32_product,
            ),
            wrap(
                "matmul_integer",
                shape_integer.matmul_integer,
                "numpy.matmul's shapes; 8-bit a and b, a's zero point one value, b's one or one per "
                "column; int32",
                dtype=shape_integer.int32_product,
            ),
            wrap("dense", shape_linear_norm.dense, "x (..., in), w (units, in) -> (..., units)"),
            wrap("matmul", shape_linear_norm.matmul, "numpy.matmul's shapes (batch axes broadcast)"),
            wrap(
                "bias_add",
                shape_linear_norm.bias_add,
                "x, and a bias of shape (x[axis],) -> x's shape",
            ),
            wrap(
                "batch_norm",
                shape_linear_norm.batch_norm,
                "x (N, C, ...) and four parameters of shape (C,) -> x's shape",
            ),
            wrap(
                "lrn",
                shape_linear_norm.lrn,
                "x (N, C, ...) -> x's shape; a window of size channels",
            ),
            wrap("softmax", shape_linear_norm.softmax, "x's shape; axis in range"),
            wrap(
                "attention",
                shape_linear_norm.attention,
                "q (..., Sq, D), k (..., Sk, D), v (..., Sk, Dv), a scale of one value and an optional "
                "bias broadcast to (..., Sq, Sk) -> (..., Sq, Dv); batch axes broadcast",
            ),
            wrap(
                "reduce",
                shape_reductions.reduce,
                "x without axes (every axis when empty), or with them as 1 when keepdims",
            ),
            wrap(
                "reshape",
                shape_layout.reshape,
                "newshape; one -1 is inferred, 0 copies the input's size unless allowzero",
            ),
            wrap("flatten", shape_layout.flatten, "(prod(x[:axis]), prod(x[axis:]))"),
            wrap(
                "transpose",
                shape_layout.transpose,
                "x's axes permuted by perm (empty: reversed)",
            ),
            wrap(
                "squeeze",
                shape_layout.squeeze,
                "x without axes of size 1 (empty: all of them)",
            ),
            wrap("unsqueeze", shape_layout.unsqueeze, "x with size-1 axes inserted at axes"),
            wrap("expand", shape_layout.expand, "x and newshape broadcast both ways"),
            fill_checked(
                wrap(
                    "pad",
                    shape_layout.pad,
                    "x grown by pads (begins, then ends); value must fit the dtype",
                ),
                "value",
            ),
            wrap(
                "slice",
                shape_layout.slice,
                "ONNX Slice's shape: clamped starts and ends along axes, with steps",
            ),
            wrap(
                "split",
                shape_layout.split,
                "one part per output along axis: of sizes, or equal parts (the last smaller)",
                several=True,
            ),
            wrap(
                "gather",
                shape_indexing.gather,
                "x[:axis] + indices + x[axis+1:]; x's dtype, integer indices",
                dtype=data_with_indices,
            ),
            wrap(
                "arg_reduce",
                shape_reductions.arg_reduce,
                "x without axis (as 1 when keepdims); int64 indices; axis not empty",
                dtype=int64_result,
            ),
            wrap(
                "gather_elements",
                shape_indexing.gather_elements,
                "the indices' shape (of x's rank); x's dtype, integer indices",
                dtype=data_with_indices,
            ),
            wrap(
                "scatter_elements",
                shape_indexing.scatter_elements,
                "x's shape; indices and updates of one shape and x's rank, updates of x's dtype",
                dtype=scattered,
            ),
            wrap(
                "gather_nd",
                shape_indexing.gather_nd,
                "indices[:-1] + x[batch_dims + indices[-1]:]; x's dtype, integer indices",
                dtype=data_with_indices,
            ),
            wrap(
                "scatter_nd",
                shape_indexing.scatter_nd,
                "x's shape; updates of shape indices[:-1] + x[indices[-1]:] and x's dtype",
                dtype=scattered,
            ),
            wrap(
                "cumulative",
                shape_reductions.cumulative,
                "x's shape (rank >= 1); axis in range",
            ),
            wrap(
                "top_k",
                shape_reductions.top_k,
                "two outputs, x with axis cut to k: values of x's dtype, int64 indices",
                dtype=values_and_indices,
                several=2,
            ),
            wrap(
                "one_hot",
                shape_indexing.one_hot,
                "the indices' shape with depth inserted at axis; the values' ([off, on]) dtype",
                dtype=numeric_indices,
            ),
        )
    }
)
"""Every shape rule that ops.yaml may name, by name."""
