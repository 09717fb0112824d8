"""byoc.attr_values: attributes as the kernels use them, resolved once for every generator."""

from __future__ import annotations

import pytest

from byoc.attr_values import ints_length, resolve, spatial_axes
from byoc.ir import TensorType
from byoc.spec import load_catalog

CATALOG = load_catalog()


def t(*shape: int) -> TensorType:
    return TensorType(shape, "float32")


def test_empty_spatial_lists_become_the_kernel_defaults():
    conv = CATALOG["conv"]
    attrs = (("strides", ()), ("pads", ()), ("dilations", (2, 1)), ("groups", 2))
    got = resolve(conv, [t(1, 4, 5, 6), t(4, 2, 3, 3)], attrs)
    assert got == {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (2, 1), "groups": 2}
    assert list(got) == ["strides", "pads", "dilations", "groups"]
    pool = CATALOG["max_pool"]
    got = resolve(
        pool, [t(2, 3, 7)], (("kernel_shape", (3,)), ("strides", ()), ("pads", ()), ("ceil_mode", True))
    )
    assert got == {"kernel_shape": (3,), "strides": (1,), "pads": (0, 0), "ceil_mode": True}


def test_given_lists_and_other_attributes_stay_as_they_are():
    pad = CATALOG["pad"]  # its pads cover every axis, and its rule lays no windows
    attrs = (("pads", (1, 0, 0, 2)), ("mode", "edge"), ("value", 0.5))
    assert resolve(pad, [t(3, 4)], attrs) == dict(attrs)
    reduce = CATALOG["sum"]
    assert resolve(reduce, [t(3, 4)], (("axes", ()), ("keepdims", False))) == {"axes": (), "keepdims": False}


@pytest.mark.parametrize(
    ("op", "rank", "axis", "want"),
    [
        ("softmax", 2, -1, 1),
        ("softmax", 4, -3, 1),
        ("bias_add", 4, 1, 1),
        ("flatten", 3, 3, 3),
        ("flatten", 3, -3, 0),
    ],
)
def test_a_negative_axis_counts_from_the_end(op, rank, axis, want):
    assert resolve(CATALOG[op], [t(*([2] * rank))], (("axis", axis),)) == {"axis": want}


def test_lengths_follow_from_the_rank_only_for_spatial_lists():
    conv, pool, pad = CATALOG["conv"], CATALOG["avg_pool"], CATALOG["pad"]
    assert spatial_axes(conv, 4) == 2 and spatial_axes(pad, 4) is None
    assert ints_length(conv, "strides", 4) == 2
    assert ints_length(conv, "pads", 5) == 6
    assert ints_length(pool, "kernel_shape", 3) == 1
    assert ints_length(conv, "groups", 4) is None
    assert ints_length(pad, "pads", 4) is None
    assert ints_length(CATALOG["transpose"], "perm", 3) is None


GETTERS = {"int": "integer", "ints": "ints", "float": "real", "bool": "flag", "str": "text"}
"""The getter of :class:`AttrView` for each attribute type the catalog declares."""


def test_every_catalog_attribute_reads_typed_by_its_declared_type():
    """Each op's attributes with defaults, resolved, read through the getter of the type
    ops.yaml declares, give a value of that Python type; every other getter refuses."""
    read = 0
    for op in (CATALOG[name] for name in CATALOG):
        if not op.attrs or any(a.default is None for a in op.attrs):
            continue
        view = resolve(op, [t(*([2] * 4))], tuple((a.name, a.default) for a in op.attrs))
        for a in op.attrs:
            got = getattr(view, GETTERS[a.type])(a.name)
            kind = {"int": int, "ints": tuple, "float": float, "bool": bool, "str": str}[a.type]
            assert isinstance(got, kind), (op.name, a.name, got)
            for other in set(GETTERS.values()) - {GETTERS[a.type]}:
                if (a.type, other) == ("int", "real"):  # an int reads as a number too
                    continue
                with pytest.raises(TypeError, match=f"attribute {a.name} is"):
                    getattr(view, other)(a.name)
            read += 1
    assert read > 50


def test_the_view_is_a_read_only_mapping_in_catalog_order():
    view = resolve(CATALOG["conv"], [t(1, 4, 5, 6), t(4, 2, 3, 3)], (("groups", 2), ("strides", ())))
    assert list(view) == ["groups", "strides"] and len(view) == 2 and view["groups"] == 2
    assert view.ints("strides") == (1, 1) and view.integer("groups") == 2
    with pytest.raises(TypeError):
        view["groups"] = 3  # type: ignore[index]
