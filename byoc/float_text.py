"""The DSL text of float32 values, computed for a whole array at once.

The printer writes a float32 value as ``repr(float(str(v)))``: numpy's shortest
decimal that reads back as the float32, printed as Python prints that decimal's
double; ``nan``/``-nan`` by the sign bit, ``inf``/``-inf``, ``-0.0``, and ``1e-05`` or
``1e+16`` past Python's bounds (:func:`reference_text`): about a microsecond a value.
This module computes the same text for a whole array with numpy alone, 13 to 20 times
faster for a constant of a million values (benchmarks/parse_speed.py).

Which decimal
-------------
numpy's ``str`` of a float32 (Dragon4 in its unique mode, numpy's ``dragon4.c``) is
the decimal with the fewest significant digits inside the value's rounding interval:
half-way to each neighbour, both ends included when the significand is even (reading
rounds a tie to even), the gap below halved at a power of two. Of the two decimals of
that length either side of the value it takes the one inside the interval, the nearer
if both are, and the even last digit on a tie. That decimal has at most 9 significant
digits, so the double it reads back as prints (``repr``: the shortest text that reads
back as that double) with the same digits: two decimals of at most 15 significant
digits never round to the same double.

How it is computed
------------------
For x = ``|v|``, finite and nonzero, with decimal exponent e10 = floor(log10 x), scale
by 10**k, k = 8 - e10: t = x * 10**k lies in [1e8, 1e9), and the interval's ends
become L and H. The decimals of 9 - j significant digits in the interval are then the
multiples of 10**j in [a, b], a = ceil(L) and b = floor(H) (one step inward for an
integer end when the significand is odd). The shortest length is the largest j with
``b mod 10**j <= b - a`` (then a multiple of 10**j lies in [a, b], and the j that pass
are 0..j*); the candidates are f = floor(t / 10**j) * 10**j and f + 10**j, chosen as
Dragon4 chooses. e10 comes from the binary exponent, corrected by one comparison with
the smallest float32 at or above a power of ten, so it is exact.

Why it is exact: x is a float32 and the half-gaps are powers of two, so for
0 <= k <= 12 (10**k = 5**k * 2**k with 5**k < 2**28), t, L and H are products and sums
of at most 53 significant bits: exact doubles, and every later step is exact integer
or double arithmetic. That covers 1e-4 <= x < 1e9, nearly every number of a model.
For other k, 10**k or a product is rounded, which moves t, L and H (all below 2**31)
by less than 2**-21. There an end within 2**-20 of an integer, or a choice within
2**-20 of a tie, is settled exactly: by an ``fmod`` by 2 * 10**-k (exact, and 10**-k
is a double for -22 <= k < 0; whole numbers from 1e9 up often have integer ends), or
else with fractions (rare: such an end is never an integer, so it is only near one by
chance, about once in 250,000 values). An element the integer steps could not settle
(none is known) would get its decimal from :func:`reference_text` (``Decimals.slow``).

How it is printed
-----------------
Python's ``repr`` writes d.ddde+XX when the point position is <= -4 or > 16, and the
positional text (``0.000123``, ``12.5``, ``1200.0``) otherwise. A value's row (its
text and the separator) is fixed by its sign, point position and digit count (the
``_Layout`` tables): the digits go in two groups into a 16-digit number whose ASCII
form, made eight digits per uint64 by shifts and masks, puts them at their places,
and an XOR turns the "0"s elsewhere into the sign, point, exponent and separator. The
rows are copied in order to their offsets in one byte buffer, 16 bytes each, each
overwriting what the previous one left past its end. The work goes in chunks that
stay in the processor's cache; numpy's temporary elision, which walks the C stack
for every array of 256 KiB or more, never starts.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from functools import cache

import numpy as np

SMALL = 64
"""Below this many values the per-element text is faster than the array set-up."""
CHUNK = 30000
"""Values formatted together: 240 KB per float64 work array, in cache."""

_INF_BITS = 0x7F800000
_TOL = 2.0**-20
"""An inexactly scaled end, or a choice, this close to an integer or a tie is settled
exactly."""
_E2_MIN, _E2_MAX = -149, 127
"""Binary exponents of nonzero finite float32 values (subnormals included)."""
_POW_LO, _POW_HI = -40, 60
"""The powers of ten tabled (``_Tables.pow10``)."""
_FIXED_LO, _FIXED_HI = -3, 16
"""Point positions that Python's repr writes without an exponent."""
_SPECIAL = (b"0.0", b"inf", b"nan")
_COMBO_SPECIAL = 1000
"""Layout combos of zero, inf, nan (+0, 1, 2); a finite value's combo is
(point + 45) * 10 + its digit count, below 1000."""


def reference_text(value: np.float32) -> str:
    """One float32's DSL text as the printer writes it value by value: the
    specification of this module."""
    x = math.copysign(float(str(value)), -1.0 if np.signbit(value) else 1.0)
    if x != x:
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    return repr(x)


def _pow10(k: int) -> float:
    """10**k rounded to the nearest double (int division rounds correctly)."""
    return float(10**k) if k >= 0 else 1 / 10**-k


def _float32_at_or_above(num: int, den: int) -> float:
    """The smallest float32 >= num / den (positive) as a double; inf past the range."""
    inf = np.float32(np.inf)
    f = np.float32(num / den) if num < 2**128 * den else inf

    def below_value(v: np.float32) -> bool:  # v < num / den, exactly
        p, q = float(v).as_integer_ratio()
        return p * den < num * q

    while np.isfinite(f) and below_value(f):
        f = np.nextafter(f, inf)
    while True:
        lower = np.nextafter(f, np.float32(0))
        if lower > 0 and not below_value(lower):
            f = lower
        else:
            return float(f)


class _Tables:
    """Lookup tables of the decimal search, built once (:func:`_tables`).

    By the double's biased exponent ``e`` of x: ``thr[e]``, the smallest float32 at or
    above 10**(est + 1), where est = floor(log10 2**(e - 1023)); x >= thr[e] tells
    whether e10 is est or est + 1. By ``i2 = 2 * e + that``: ``scale`` 10**k (rounded
    to a double), ``half`` half the float32 gap above x times 10**k, ``point`` e10 + 1,
    ``inexact`` k outside 0..12. ``pow10[i - _POW_LO]`` = 10**i. ``jt[r * 256 + d]``:
    the largest j <= 3 with r mod 10**j <= d; ``tz[z]``: z's trailing decimal zeros,
    at most 6."""

    def __init__(self) -> None:
        self.thr = np.full(2048, np.inf)
        self.scale = np.ones(4096)
        self.half = np.ones(4096)
        self.point = np.ones(4096, np.int64)
        self.inexact = np.ones(4096, np.bool_)
        for e2 in range(_E2_MIN, _E2_MAX + 1):
            e = e2 + 1023
            est = len(str(2**e2)) - 1 if e2 >= 0 else -len(str(2**-e2))  # 2**e2 is no power of ten
            j = est + 1
            self.thr[e] = _float32_at_or_above(10**j, 1) if j >= 0 else _float32_at_or_above(1, 10**-j)
            for up in (0, 1):
                k = 8 - (est + up)
                self.scale[2 * e + up] = _pow10(k)
                # half the gap to the next float32, 2**(max(e2, -126) - 24), times 10**k:
                # scaling the rounded power of ten by a power of two is exact
                self.half[2 * e + up] = np.ldexp(_pow10(k), max(e2, -126) - 24)
                self.point[2 * e + up] = est + up + 1
                self.inexact[2 * e + up] = not 0 <= k <= 12
        self.pow10 = np.array([_pow10(i) for i in range(_POW_LO, _POW_HI + 1)])
        r = np.arange(1000)[:, None]
        d = np.arange(256)[None, :]
        self.jt = ((r % 10 <= d).astype(np.uint8) + (r % 100 <= d) + (r <= d)).reshape(-1)
        self.tz = np.zeros(10**6 + 1, np.uint8)
        for i in range(1, 7):
            self.tz[:: 10**i] += 1


@cache
def _tables() -> _Tables:
    return _Tables()


class Decimals:
    """Per element of a float32 array: ``kind`` 0 finite nonzero, 1 zero, 2 inf,
    3 nan; ``neg`` the sign bit; for finite nonzero values the shortest decimal:
    ``digits9`` its digits followed by zeros to nine (an int in [1e8, 1e9)),
    ``ndigits`` and ``point`` (the value is 0.d1d2... * 10**point); ``slow`` the
    indices whose decimal came from :func:`reference_text`."""

    __slots__ = ("kind", "neg", "digits9", "ndigits", "point", "slow")

    def __init__(self, kind, neg, digits9, ndigits, point, slow) -> None:
        self.kind, self.neg, self.digits9 = kind, neg, digits9
        self.ndigits, self.point, self.slow = ndigits, point, slow


def float32_decimals(values: np.ndarray) -> Decimals:
    """The shortest decimal of every element of the float32 array ``values``."""
    bits = np.ascontiguousarray(values, dtype=np.float32).reshape(-1).view(np.uint32)
    neg = (bits >> 31).astype(np.bool_)
    absbits = bits & np.uint32(0x7FFFFFFF)
    kind = np.zeros(len(bits), np.int8)
    unusual = (absbits - np.uint32(1)) >= np.uint32(_INF_BITS - 1)  # zero, inf or nan
    if unusual.any():
        special = np.flatnonzero(unusual)
        sb = absbits[special]
        kind[special] = np.where(sb == 0, 1, np.where(sb == _INF_BITS, 2, 3))
        absbits[special] = 0x3F800000  # 1.0, which keeps the arithmetic tame
    digits9, ndigits, point, slow = _shortest(absbits)
    return Decimals(kind, neg, digits9, ndigits, point, slow)


def _shortest(work: np.ndarray):
    """(digits9, ndigits, point, indices settled by :func:`reference_text`) of the
    positive finite float32s whose bits are ``work``."""
    tab = _tables()
    x = work.view(np.float32).astype(np.float64)
    i2 = x.view(np.int64) >> 52  # the double's biased exponent
    ge = x >= tab.thr[i2]
    i2 <<= 1
    i2 += ge
    t = tab.scale[i2]
    t *= x  # t = x * 10**k, in [1e8, 1e9)
    half = tab.half[i2]
    lo = t - half
    hi = t + half
    p2 = np.flatnonzero((work & np.uint32(0x7FFFFF)) == 0)
    if len(p2):  # a power of two: its neighbour below is half as far
        p2 = p2[work[p2] >= 0x01000000]
        lo[p2] += half[p2] * 0.5
    point = tab.point[i2]  # e10 + 1
    inexact = np.flatnonzero(tab.inexact[i2])
    if len(inexact):
        _exact_ends(work, x, point, lo, hi, inexact)
    a = np.ceil(lo)
    b = np.floor(hi)
    ends = np.flatnonzero((lo == a) | (hi == b))
    if len(ends):  # an integer end is outside the interval when the significand is odd
        odd = (work[ends] & np.uint32(1)).astype(np.bool_)
        a[ends] += (lo[ends] == a[ends]) & odd
        b[ends] -= (hi[ends] == b[ends]) & odd
    v = b.astype(np.int32)
    d = v - a.astype(np.int32)  # the interval holds d + 1 integers
    z = v // 1000
    r3 = v - z * 1000
    r3 *= 256
    r3 += d
    wide = np.flatnonzero(d > 255)  # subnormals: a wide interval
    if len(wide):
        r3[wide] = 999 * 256  # jt says 0; found below
    j = tab.jt[r3].astype(np.intp)
    deep = np.flatnonzero(j == 3)
    if len(deep):  # r mod 1000 <= d < 1000: a multiple of 10**(3 + i) when 10**i divides z
        j[deep] += tab.tz[z[deep]]
    if len(wide):
        vw, dw = v[wide], d[wide]
        jw = np.zeros(len(wide), np.intp)
        for i in range(1, 10):
            jw[vw % 10**i <= dw] = i
        j[wide] = jw
    step = tab.pow10[j - _POW_LO]
    f = t / step
    np.floor(f, out=f)
    q = f.copy()
    f *= step  # the candidate at or below t
    c = f + step  # and the one above
    ok_f = f >= a
    ok_c = c <= b
    rest = t - f
    rest *= 2.0
    up = rest > step
    up |= ~ok_f
    up &= ok_c
    tie = np.flatnonzero(rest == step)
    if len(tie):  # exactly half-way: the even last digit
        up[tie] = ok_c[tie] & (~ok_f[tie] | (np.fmod(q[tie], 2.0) == 1.0))
    uncertain = ~(ok_f | ok_c)  # cannot happen; settled one by one if it does
    if len(inexact):  # a near-tie, decided exactly
        both = inexact[ok_f[inexact] & ok_c[inexact]]
        for r in both[np.abs(rest[both] - step[both]) <= 2 * _TOL].tolist():
            exact = Fraction(float(x[r])) * Fraction(10) ** int(9 - point[r])
            beyond = 2 * (exact - int(f[r])) - int(step[r])  # 2 (t - f) - 10**j
            up[r] = beyond > 0 or (beyond == 0 and int(f[r] // step[r]) % 2 == 1)
    f += up * step
    digits9 = f.astype(np.int64)
    ndigits = 9 - j
    carry = np.flatnonzero(digits9 >= 10**9)
    if len(carry):  # 10**(e10 + 1) itself
        digits9[carry] = 10**8
        ndigits[carry] = 1
        point[carry] += 1
    slow = np.flatnonzero(uncertain)
    if len(slow):
        _settle(work[slow], digits9, ndigits, point, slow)
    return digits9, ndigits, point, slow


def _exact_ends(work, x, point, lo, hi, rows) -> None:
    """Make exact each end of the inexactly scaled ``rows`` that lies within _TOL of
    an integer: the integer it is, or n + 0.5 when it lies inside (n, n + 1). For
    10**k = 1 / 10**m with m <= 22 (10**m a double; whole numbers from 1e9 up often
    have integer ends) ``fmod`` of the unscaled end by 2 * 10**m, which is exact, tells
    them apart; other rows (rare: their ends are never integers) use fractions."""
    tab = _tables()
    for end, step in ((lo, -1), (hi, 1)):
        e = end[rows]
        near = rows[np.abs(e - np.rint(e)) <= _TOL]
        if not len(near):
            continue
        bits = work[near].astype(np.int64) + step
        other = bits.astype(np.uint32).view(np.float32).astype(np.float64)
        other[bits == _INF_BITS] = 2.0**128  # float32's largest value: the gap as below
        total = x[near] + other  # twice the end, unscaled, exactly
        m = point[near] - 9  # -k
        fast = (m >= 1) & (m <= 22)
        div = 2.0 * tab.pow10[m[fast] - _POW_LO]
        rem = np.fmod(total[fast], div)
        whole = np.rint((total[fast] - rem) / div)  # the end's integer part
        end[near[fast]] = whole + np.where(rem > 0, 0.5, 0.0)
        for r, twice, mr in zip(near[~fast].tolist(), total[~fast].tolist(), m[~fast].tolist()):
            exact = Fraction(twice) / 2 / Fraction(10) ** mr
            end[r] = float(exact) if exact.denominator == 1 else math.floor(exact) + 0.5


def _settle(absbits, digits9, ndigits, point, rows) -> None:
    """Fill ``rows`` from :func:`reference_text`."""
    for i, value in zip(rows.tolist(), absbits.view(np.float32)):
        text = reference_text(value)
        mantissa, _, exponent = text.partition("e")
        whole, _, frac = mantissa.partition(".")
        digits = (whole + frac).lstrip("0")
        # the point follows `whole`, moved by the exponent and the zeros stripped
        pt = len(whole) + int(exponent or 0) - (len(whole + frac) - len(digits))
        digits = digits.rstrip("0")
        digits9[i] = int(digits.ljust(9, "0"))
        ndigits[i] = len(digits)
        point[i] = pt


class _Layout:
    """How the row of a value is made: its text, then the separator. By
    ``2 * combo + sign`` (combo: ``(point + 45) * 10 + ndigits``, or ``_COMBO_SPECIAL``
    + 0, 1, 2 for zero, inf, nan).

    The digits split in two groups, ``h = digits9 // q`` and ``l = digits9 % q``. The
    16-digit number ``h * a + l * b``, written with leading zeros (two 8-digit words),
    puts them at their places in the row's first 16 bytes (no digit lies further), and
    ``g`` (XOR) turns the "0"s at the other places into the sign, the point, the
    exponent, the separator. A row longer than 16 bytes ends with ``extra[i]`` at
    16 + i (where ``extra_len`` > i). ``length``: the row's."""

    def __init__(self, sep: bytes) -> None:
        size = 2 * (_COMBO_SPECIAL + 3)
        self.q = np.ones(size)
        self.a = np.zeros(size, np.int64)
        self.b = np.zeros(size, np.int64)
        self.g = np.zeros((size, 2), np.uint64)
        self.length = np.zeros(size, np.int64)
        self.extra = np.zeros((3 + len(sep), size), np.uint8)  # rows reach 19 + len(sep)
        for kind, text in enumerate(_SPECIAL):
            self._set(_COMBO_SPECIAL + kind, text, sep, 1, 0, 0)
        for pt in range(-44, 41):
            for nd in range(1, 10):
                combo = (pt + 45) * 10 + nd
                if pt == 1:  # d.dddddddd
                    self._set(combo, b"?." + b"?" * max(nd - 1, 1), sep, 10**8, 15, 6)
                elif 2 <= pt <= 8:  # the first pt digits, the point, the other 9 - pt
                    frac = b"?" * max(nd - pt, 1)
                    self._set(combo, b"?" * pt + b"." + frac, sep, 10 ** (9 - pt), 16 - pt, 6)
                elif 9 <= pt <= _FIXED_HI:  # nine digits, zeros, ".0"
                    self._set(combo, b"?" * 9 + b"0" * (pt - 9) + b".0", sep, 1, 7, 0)
                elif _FIXED_LO <= pt <= 0:  # "0.", zeros, the digits
                    self._set(combo, b"0." + b"0" * -pt + b"?" * nd, sep, 1, 5 + pt, 0)
                elif -44 <= pt <= -4 or 17 <= pt <= 39:  # d.ddde-XX
                    mid = b"?." + b"?" * (nd - 1) if nd > 1 else b"?"
                    self._set(combo, mid + f"e{pt - 1:+03d}".encode(), sep, 10**8, 15, 6)
        self.extra_len = np.maximum(self.length - 16, 0)

    def _set(self, combo: int, text: bytes, sep: bytes, q: int, a: int, b: int) -> None:
        """``text`` marks the digits' places with "?"; 10**a and 10**b (0 for a zero ``a``
        or ``b``: no digits) place the groups for a positive value, a sign moves them on."""
        for neg in (0, 1):
            i = 2 * combo + neg
            row = b"-" * neg + text + sep
            assert b"?" not in (b"-" * neg + text)[16:]  # every digit in the first 16 bytes
            self.q[i] = q
            self.a[i] = 10 ** (a - neg) if a else 0
            self.b[i] = 10 ** (b - neg) if b else 0
            self.length[i] = len(row)
            raw = (b"-" * neg + text).translate(_XOR_ZERO) + bytes(c ^ 0x30 for c in sep)
            raw = raw[:16].ljust(16, b"\0")
            self.g[i] = [int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")]
            for k, c in enumerate(row[16:]):
                self.extra[k, i] = c


_XOR_ZERO = bytes(0 if c == ord("?") else c ^ 0x30 for c in range(256))
"""A template byte to its XOR with "0" (a digit's place, "?", to 0)."""


@cache
def _layout(sep: bytes) -> _Layout:
    return _Layout(sep)


def _ascii8(x: np.ndarray) -> None:
    """Replace each uint64 below 1e8 by its eight decimal digits in ASCII, the first
    in the lowest byte: two 4-digit halves in the 32-bit lanes, split into 2-digit
    16-bit lanes, then into bytes. In place."""
    q = x // 10000
    x -= q * 10000  # the last four digits
    x <<= 32
    x |= q  # lane 0: the first four digits; lane 1: the last four
    np.multiply(x, 10486, out=q)
    q >>= 20
    q &= 0x0000007F0000007F  # each 32-bit lane // 100 (exact below 10000)
    x -= q * 100
    x <<= 16
    x |= q  # four 16-bit lanes of two digits, in order
    np.multiply(x, 103, out=q)
    q >>= 10
    q &= 0x000F000F000F000F  # each 16-bit lane // 10 (exact below 100)
    x -= q * 10
    x <<= 8
    x |= q
    x |= 0x3030303030303030


def _window(buf: np.ndarray, size: int) -> np.ndarray:
    """``buf`` seen as overlapping items of ``size`` bytes, one starting at each byte."""
    return np.ndarray((len(buf) - size + 1,), np.dtype((np.void, size)), buf, 0, (1,))


def _format_chunk(bits: np.ndarray, lay: _Layout, buf: np.ndarray, pos: int) -> tuple[int, int]:
    """Write the row (text and separator) of each value of ``bits`` to ``buf`` from
    ``pos``; returns the end position and how many decimals came one by one."""
    d = float32_decimals(bits.view(np.float32))
    n = len(bits)
    i = d.point * 20
    i += d.ndigits * 2
    i += 900
    i += d.neg
    if d.kind.any():
        special = np.flatnonzero(d.kind)
        i[special] = d.kind[special].astype(np.int64) * 2 + d.neg[special] + 2 * (_COMBO_SPECIAL - 1)
    q = lay.q[i]
    digits = d.digits9.astype(np.float64)
    h = digits / q
    np.floor(h, out=h)
    q *= h
    digits -= q  # the second group
    number = h.astype(np.int64)
    number *= lay.a[i]
    low = digits.astype(np.int64)
    low *= lay.b[i]
    number += low  # the 16-digit number
    rows = np.empty((n, 2), np.uint64)
    np.floor_divide(number, 10**8, out=rows[:, 0], casting="unsafe")
    low = rows[:, 0].view(np.int64) * 10**8
    number -= low
    rows[:, 1] = number
    _ascii8(rows.reshape(-1))
    rows ^= np.take(lay.g, i, axis=0)
    length = lay.length[i]
    offset = np.cumsum(length)
    end = pos + int(offset[-1])
    offset -= length
    offset += pos
    # in the values' order: each row overwrites what the one before left past its end
    _window(buf, 16)[offset] = rows.view(np.dtype((np.void, 16))).reshape(n)
    if length.max() > 16:
        extra = lay.extra_len[i]
        for k in range(int(extra.max())):
            more = np.flatnonzero(extra > k)
            buf[offset[more] + 16 + k] = lay.extra[k][i[more]]
    return end, len(d.slow)


def join_float32(values: np.ndarray, sep: str = ", ", prefix: str = "", suffix: str = "") -> str:
    """``prefix + sep.join(map(reference_text, values)) + suffix`` for the float32
    ``values`` (the strings ASCII)."""
    values = np.asarray(values, np.float32).reshape(-1)
    if len(values) < SMALL or sys.byteorder != "little":  # the rows are little-endian words
        return prefix + sep.join(map(reference_text, values)) + suffix
    return vector_join(values, sep, prefix, suffix)[0]


def vector_join(values: np.ndarray, sep: str, prefix: str = "", suffix: str = "") -> tuple[str, int]:
    """:func:`join_float32` computed for the whole array, whatever its size (on a
    little-endian machine), and how many values had their decimal from
    :func:`reference_text` (``Decimals.slow``)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).reshape(-1).view(np.uint32)
    n = len(bits)
    if not n:
        return prefix + suffix, 0
    sepb, head, tail = sep.encode("ascii"), prefix.encode("ascii"), suffix.encode("ascii")
    lay = _layout(sepb)
    # room for the longest rows (a sign, 18 characters, the separator), the 16 bytes
    # the last one writes, and the prefix and suffix
    buf = np.empty(n * (len(sepb) + 19) + 16 + len(head) + len(tail), np.uint8)
    buf[: len(head)] = np.frombuffer(head, np.uint8)
    pos, slow = len(head), 0
    for start in range(0, n, CHUNK):
        pos, settled = _format_chunk(bits[start : start + CHUNK], lay, buf, pos)
        slow += settled
    pos -= len(sepb)  # the last value's separator
    buf[pos : pos + len(tail)] = np.frombuffer(tail, np.uint8)
    return str(memoryview(buf)[: pos + len(tail)], "ascii"), slow


def float32_texts(values: np.ndarray) -> list[str]:
    """The DSL text of each float32 value, :func:`reference_text` of each."""
    values = np.asarray(values, np.float32).reshape(-1)
    if len(values) < SMALL:
        return list(map(reference_text, values))
    return join_float32(values, ", ").split(", ")  # the printer's separator: one layout
