"""A graph's literal values: a constant's numbers, bools, NaNs and infinities read
and checked against its dtype (``[n, ...]`` lists read in one piece), and numbers
rounded to a float dtype."""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
from lark import Token

from byoc.errors import GraphError, Location, ParseError
from byoc.ir import TensorType, is_float, is_integer

MAX_CONSTANT_ELEMENTS = 1 << 24
"""The most elements a constant written as literal values (``[0.5, 1, ...]``) may have.
Every literal is a token and a Python number while it is read, so a text that size is
hundreds of megabytes of parser objects; larger values belong in a weights file
(``weights["entry"]``), which is read as one array and has only the 2**48 limit of
every tensor type."""
MAX_INT_DIGITS = 40
"""Integer literals longer than this are out of range for every dtype (and Python's
int() refuses those above 4300 digits)."""
BOOL_LITERALS = ("true", "false")
"""The values of a bool constant (``const bool[2] [true, false]``)."""
NONFINITE_LITERALS = ("nan", "inf")
"""The words of a float constant's NaN and infinities: ``nan``, ``inf``, and with a
sign ``-inf``, ``+inf``, ``-nan`` (a NaN with its sign bit set)."""

Locate = Callable[[Token], Location]
"""Where a token of the text is (the reader's ``_loc``)."""


def constant_values(type_: TensorType, values: list, loc: Location, locate: Locate) -> tuple | np.ndarray:
    """The values of the constant of ``type_`` at ``loc`` whose literals are ``values``
    (numbers, and NAME or NONFINITE tokens), checked against its dtype: one per element
    (a single value fills the tensor), rounded already for bfloat16. ``locate`` gives a
    token's location."""
    if type_.size > MAX_CONSTANT_ELEMENTS:
        raise GraphError(
            f"constant of type {type_} has {type_.size:,} elements; the limit for literal values "
            f"is {MAX_CONSTANT_ELEMENTS:,}",
            loc,
            hint='put large values in a weights file (`const T weights["entry"]`), '
            "or pass them as graph parameters",
        )
    dtype = type_.dtype
    values, spelled = literal_values(values, dtype, locate)
    # The values are checked as written, before one value fills the tensor: a
    # constant with no elements (`const float32[0] 1e39`) is refused like any other.
    if dtype == "bool":
        number = next((v for v in values if type(v) is not bool), None)
        if number is not None:
            raise GraphError(
                f"a bool constant takes true or false, not {number!r}",
                loc,
                hint="write true or false: 1 and 0 are numbers, not bools",
            )
    elif is_integer(dtype):
        if any(isinstance(v, float) for v in values):
            raise GraphError(f"{article(dtype)} {dtype} constant takes integers only", loc)
        info = np.iinfo(dtype)
        low, high = int(info.min), int(info.max)
        bad = next((v for v in values if not low <= v <= high), None)
        if bad is not None:
            raise GraphError(
                f"constant value {bad!r} is out of range for {dtype}",
                loc,
                hint=f"{dtype} values lie in [{low}, {high}]",
            )
    else:
        written, values = values, [float(v) for v in values]
        bad_at = out_of_range(values, dtype, spelled)
        if bad_at is not None:
            high = float(ml_dtypes.finfo(dtype).max)
            raise GraphError(
                f"constant value {written[bad_at]!r} is out of range for {dtype}",
                loc,
                hint=f"{dtype} values lie in [{-high:.8g}, {high:.8g}]: a larger one rounds to "
                "infinity (write inf or -inf for an infinity)",
            )
    if len(values) == 1 and type_.size != 1:
        values = values * type_.size  # a single value fills the tensor
    if len(values) != type_.size:
        raise GraphError(
            f"constant of type {type_} needs {type_.size} values, got {len(values)}",
            loc,
            hint="give one value per element in row-major order, or a single value to fill it",
        )
    if dtype == "bfloat16":
        return rounded(values, dtype)
    return tuple(values)


def literal_values(values: list, dtype: str, locate: Locate) -> tuple[list, list[int]]:
    """The numbers of a constant's literals: a word (a NAME or NONFINITE token)
    becomes its bool, or the NaN or infinity it spells, if ``dtype`` takes it; and
    the indices of those NaNs and infinities (a number that overflows is no such)."""
    if not any(type(v) is Token for v in values):
        return values, []
    out, spelled = [], []
    for v in values:
        if type(v) is not Token:
            out.append(v)
            continue
        word = v.value
        if word in BOOL_LITERALS:
            if dtype != "bool":
                raise GraphError(
                    f"{article(dtype)} {dtype} constant takes numbers, not {word}",
                    locate(v),
                    hint="true and false are the values of bool constants; write 1 or 0 here",
                )
            out.append(word == "true")
        elif word.lstrip("+-") in NONFINITE_LITERALS:
            if not is_float(dtype):
                raise GraphError(
                    f"{article(dtype)} {dtype} constant cannot hold {word}",
                    locate(v),
                    hint="nan, inf and -inf are values of float constants "
                    "(float16, bfloat16, float32, float64)",
                )
            spelled.append(len(out))
            out.append(float(word))
        else:
            raise ParseError(
                f"unexpected name {word!r} as a constant's values",
                locate(v),
                hint='give a number, [numbers], true/false (bool), nan/inf/-inf (float) or weights["ENTRY"]',
            )
    return out, spelled


def number_list(tok: Token, locate: Locate) -> list:
    """The numbers of ``[n, n, ...]`` (a NUMBER_LIST: digits, signs, points,
    exponents, commas and blank space only), each as SIGNED_INT or SIGNED_FLOAT reads
    it: an int unless it has a point or an exponent. ``int()`` and ``float()`` take
    exactly those spellings there, so they check them too; one they refuse is a
    ParseError at its column, and an integer too long for any dtype the GraphError
    SIGNED_INT gives."""
    items = tok.value[1:-1].split(",")
    if not items[-1].strip() and len(items) > 1:
        items.pop()  # a trailing comma
    elif items == [""] or items[-1].isspace():
        items = []  # `[]`
    try:
        if "." not in tok.value and "e" not in tok.value and "E" not in tok.value:
            values = list(map(int, items))
        else:
            values = [float(s) if "." in s or "e" in s or "E" in s else int(s) for s in items]
    except ValueError:
        values = None
    if values is None or (values and max(map(len, items)) > MAX_INT_DIGITS):
        number_list_error(tok, items, locate)
    return values


def number_list_error(tok: Token, items: list[str], locate: Locate) -> None:
    """Raise the error of the first item of NUMBER_LIST ``tok`` that is no number
    (``1.2.3``, an empty one between two commas) or an integer too long."""
    offset = 1  # past "["
    for item in items:
        word = item.strip()
        start = offset + len(item) - len(item.lstrip())
        before = tok.value[:start]
        line = tok.line + before.count("\n")
        column = start + 1 - (before.rfind("\n") + 1) if "\n" in before else tok.column + start
        at = Token("NUMBER", word, tok.start_pos + start, line, column)
        if "." not in word and "e" not in word and "E" not in word and len(word) > MAX_INT_DIGITS:
            raise integer_too_long(at, locate(at))
        try:
            float(word)
        except ValueError:
            raise ParseError(
                f"{word!r} is not a number" if word else "a value is missing between two commas",
                locate(at),
                hint="a constant's values are numbers such as 1, -2.5 or 3e-4, separated by commas",
            ) from None
        offset += len(item) + 1
    raise AssertionError("no bad item in " + tok.value[:40])


def integer_too_long(tok: Token, loc: Location) -> GraphError:
    """The error of an integer literal ``tok`` longer than :data:`MAX_INT_DIGITS`."""
    return GraphError(
        f"integer literal of {len(tok):,} characters is out of range for every dtype",
        loc,
        hint="integers are at most 64-bit",
    )


def rounded(values, dtype: str) -> np.ndarray:
    """``values`` (numbers) rounded once, to nearest even, to the float ``dtype``.

    numpy rounds doubles to float16 and float32 directly, but ml_dtypes rounds a double
    to bfloat16 through float32, twice: ``1 + 2**-8 + 2**-40`` becomes ``1 + 2**-8`` in
    float32, a tie, and then 1.0 instead of the nearer ``1 + 2**-7``. Rounding to float32
    *to odd* first (an inexact result with an even last bit moved one unit towards the
    double) keeps the information a second rounding needs, so the bfloat16 is the
    double's nearest; overflow and subnormals come out the same way."""
    doubles = np.asarray(values, dtype=np.float64)
    if dtype != "bfloat16":
        with np.errstate(over="ignore"):
            return doubles.astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        singles = doubles.astype(np.float32)
        bits = singles.view(np.uint32).copy()
        wide = singles.astype(np.float64)
        inexact = (wide != doubles) & ~np.isnan(doubles)
        move = inexact & (bits & 1 == 0)
        towards_zero = np.abs(wide) > np.abs(doubles)
        bits[move & towards_zero] -= np.uint32(1)
        bits[move & ~towards_zero] += np.uint32(1)
        return bits.view(np.float32).astype(ml_dtypes.bfloat16)


def out_of_range(values, dtype: str, spelled=()) -> int | None:
    """The index of the first of ``values`` that rounds to an infinity in the float
    ``dtype`` (it is beyond the largest finite value by half a unit in the last place
    or more), or None. Rounding decides, not ``finfo(dtype).max``: ``3.4028235e+38``,
    the shortest text of float32's largest value, is a little above it as a double and
    still a float32. The values at the indices ``spelled`` are NaNs and infinities written
    as such (``nan``, ``-inf``), in range; ``1e400`` is not (it overflows a double)."""
    bad = ~np.isfinite(rounded(values, dtype).astype(np.float64))
    bad[list(spelled)] = False
    return int(np.argmax(bad)) if bad.any() else None


def article(word: str) -> str:
    """The article before a dtype's name: an int8, a uint8, a float32."""
    return "an" if word.startswith("int") else "a"
