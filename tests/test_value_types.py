"""byoc.value_types: the one type system of op attributes and backend options."""

from __future__ import annotations

import pytest

from byoc.catalog import AttrDef, RuleError, check_attr_value
from byoc.spec.backend import OptionDef
from byoc.value_types import OPTION_TYPES, VALUE_TYPES, type_of, value_text


class MyInt(int):
    """Like ruamel's scalar subclasses: an int that is not exactly int."""


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        ("int", [0, -3, MyInt(7)], [True, 1.5, "1", None, (1,)]),
        ("float", [0.5, 2, MyInt(7)], [False, "0.5", None]),
        ("bool", [True, False], [0, 1, "true", None]),
        ("str", ["", "x"], [1, True, None]),
        ("ints", [(), (1, 2), [3, 4]], [(1, True), (1, 2.0), 3, "1,2", None]),
    ],
)
def test_check_accepts_its_values_and_no_others(name, good, bad):
    vtype = VALUE_TYPES[name]
    for value in good:
        assert vtype.accepts(value), (name, value)
        vtype.check(value)
    for value in bad:
        assert not vtype.accepts(value), (name, value)
        with pytest.raises(ValueError, match=f"must be {name}, got"):
            vtype.check(value)


def test_check_gives_plain_values():
    assert type(VALUE_TYPES["int"].check(MyInt(7))) is int
    assert VALUE_TYPES["float"].check(2) == 2.0 and type(VALUE_TYPES["float"].check(2)) is float
    assert VALUE_TYPES["ints"].check([1, MyInt(2)]) == (1, 2)


def test_parse_option_text():
    assert VALUE_TYPES["int"].parse(" 0x10 ") == 16
    assert VALUE_TYPES["float"].parse("1e-3") == 0.001
    assert VALUE_TYPES["bool"].parse("Yes") is True and VALUE_TYPES["bool"].parse("off") is False
    assert VALUE_TYPES["str"].parse(" a b ") == " a b "
    assert VALUE_TYPES["ints"].parse("[1, 2,3]") == (1, 2, 3) and VALUE_TYPES["ints"].parse("") == ()
    for name, text, message in [
        ("int", "fast", "'fast' is not an integer"),
        ("float", "x", "'x' is not a number"),
        ("bool", "maybe", "'maybe' is not a boolean"),
        ("ints", "1, a", "is not a list of integers"),
    ]:
        with pytest.raises(ValueError, match=message):
            VALUE_TYPES[name].parse(text)


def test_text_and_switches():
    assert [value_text(v) for v in (True, 3, 0.5, "x", (1, 2), None)] == [
        "true",
        "3",
        "0.5",
        "x",
        "[1, 2]",
        "None",
    ]
    assert type_of(True) is VALUE_TYPES["bool"] and type_of(1) is VALUE_TYPES["int"] and type_of(None) is None
    assert [n for n, t in VALUE_TYPES.items() if t.switch] == ["int", "bool"]
    assert VALUE_TYPES["int"].enabled(2) and not VALUE_TYPES["int"].enabled(0)
    assert not VALUE_TYPES["str"].enabled("yes")
    assert OPTION_TYPES == ("int", "float", "bool", "str")


def test_attributes_and_options_use_them():
    with pytest.raises(RuleError, match=r"attribute axis must be int, got True"):
        check_attr_value(AttrDef("axis", "int"), True)
    assert check_attr_value(AttrDef("axes", "ints"), [0, 1]) == (0, 1)
    level = OptionDef("opt_level", "int", 2, choices=(0, 1, 2, 3))
    assert level.value("3") == 3 and level.value(1) == 1
    with pytest.raises(ValueError, match="9 is not one of 0, 1, 2, 3"):
        level.value("9")
    with pytest.raises(ValueError, match="must be int, got 1.5"):
        level.value(1.5)
    flag = OptionDef("fast", "bool", False, choices=(False, True))
    with pytest.raises(ValueError, match="is not a boolean"):
        flag.value("2")
