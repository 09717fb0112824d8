"""The C support text of byoc's element types: one place for every generator.

byoc's C representation of the dtypes (:data:`byoc.ir.C_TYPES`):

- ``bool`` is C99's ``bool`` (``<stdbool.h>``; C++'s own ``bool``): one byte holding 0
  or 1, as numpy's and DLPack's bool.
- ``float16`` and ``bfloat16`` are *storage* types: ``typedef struct { uint16_t bits; }
  byoc_float16;`` (and ``byoc_bfloat16``), so that nothing can compute on them by
  accident, and one representation serves every compiler (C and C++, with or without
  ``_Float16``) and every constant initialiser (``{0x3c00}``, the bit pattern). Generated
  code converts each element to ``float`` where it reads it (``byoc_float16_to_float``),
  rounds a node's value where it defines it (``byoc_float16_round``: to float16 and
  back, round to nearest even, NaN kept a quiet NaN), so its local is a ``float``
  holding a float16 value, and converts it where it stores it (``byoc_float_to_float16``):
  arithmetic runs in float32 (or double, where a
  C expression calls a double libm function), as ONNX Runtime does on CPUs without half
  arithmetic, and each node's value is rounded once to its dtype, as the numpy reference
  rounds it. The float16 conversions use the compiler's ``_Float16`` where it has one
  (gcc >= 12 and clang on x86-64 and AArch64, in C and C++: the F16C instructions where
  the target has them), else the bit manipulation below. A bfloat16 is the high half of
  a float32: ``bits << 16`` one way, rounding to nearest even the other.
- ``byoc_cast_<from>_<to>(x)``: the catalog's ``cast`` op, from a value of ``<from>``'s
  compute type (:data:`byoc.ir.C_COMPUTE_TYPES`: ``float`` for the half types) to one of
  ``<to>``'s: to bool ``x != 0`` (NaN is true); from bool 0 or 1; float to integer NaN ->
  0, else truncated toward zero and saturated to the target's range; integer to integer
  wraps modulo 2**bits (through the unsigned type: no undefined or
  implementation-defined behaviour); to a float type C's conversion (round to nearest;
  float64 to float16 rounded once, through a float rounded to odd); float64 to bfloat16
  through float (as ml_dtypes converts it).
- ``byoc_bitcast_<from>_<to>(x)``: the catalog's ``bitcast`` op, between compute types
  of one width: the bits copied by ``memcpy`` (no value converted, no aliasing rule
  broken); from bool 0 or 1. A half type's bits are those of the float's value (a NaN's
  sign and payload read off the float, which ``byoc_<half>_to_float`` loaded them into:
  exact, but that ``_Float16``'s conversion quietens a signaling float16 NaN), and a
  result of a half type is a float like any value of it: its NaNs stay NaNs of their
  sign, but their payload is the rounding's and the store's (quiet; without
  ``_Float16`` a float16 NaN is the default one).

:func:`support_text` writes only what a module uses, so a float32-only module's text
is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from byoc.ir import C_COMPUTE_TYPES, C_TYPES, DTYPES, Function, is_float, is_half, is_integer

from .called import BITCAST_CALL, CONVERSION_NAME, casts_in, helpers_in, named

NAMES: tuple[str, ...] = (
    "byoc_float16",
    "byoc_bfloat16",
    "byoc_float16_to_float",
    "byoc_float_to_float16",
    "byoc_bfloat16_to_float",
    "byoc_float_to_bfloat16",
    "byoc_float16_round",
    "byoc_bfloat16_round",
    "byoc_have_float16",
)
"""The names the support text may define (no generated name may take them)."""


def compute_type(dtype: str) -> str:
    """The C type generated code computes ``dtype``'s values in."""
    return C_COMPUTE_TYPES[dtype]


def load(text: str, dtype: str) -> str:
    """``text``, a C lvalue of ``dtype``'s storage type, as a value of its compute type."""
    return f"byoc_{dtype}_to_float({text})" if is_half(dtype) else text


def store(text: str, dtype: str) -> str:
    """``text``, a C expression of ``dtype``'s compute type (or double), as a value of
    its storage type: rounded once, for the half types."""
    return f"byoc_float_to_{dtype}({text})" if is_half(dtype) else text


def function_dtypes(functions: Iterable[Function]) -> set[str]:
    """Every dtype a value of ``functions`` has (parameters, constants, nodes)."""
    return {t.dtype for fn in functions for t in fn.types().values()}


def rounded(text: str, dtype: str) -> str:
    """``text``, a C expression of ``dtype``'s compute type (or double), rounded to
    ``dtype`` and kept in its compute type: the value of a node (a half type's rounding
    is ``byoc_<dtype>_round``; the other types' is the conversion to the local's type)."""
    return f"byoc_{dtype}_round({text})" if is_half(dtype) else text


def support_text(dtypes: Iterable[str], text: str = "", *, cplusplus: bool = False) -> str:
    """The support text for a module whose values have ``dtypes`` and whose C ``text``
    calls the cast functions it calls: ``<stdbool.h>`` (C) where bool is used, the half
    types and their conversions where used, and the casts. Empty for a module of the
    original six dtypes that casts nothing."""
    pairs = casts_in(text)
    bitcasts = casts_in(text, BITCAST_CALL)
    conversions = sorted(
        {(k, d) for k, d in named(CONVERSION_NAME, text) if d in DTYPES},
        key=lambda p: (p[0] == "store", DTYPES.index(p[1])),
    )
    used = set(dtypes) | {d for pair in pairs for d in pair if d == "bool"} | {d for _, d in conversions}
    used |= {d for pair in bitcasts for d in pair if d == "bool" or is_half(d)}
    if ("float64", "float16") in pairs:
        used.add("float16")  # its cast rounds through byoc_float16_round
    parts = []
    if "bool" in used and not cplusplus:
        parts.append("#include <stdbool.h>\n")
    if "float16" in used:
        parts.append(FLOAT16)
    if "bfloat16" in used:
        parts.append(BFLOAT16)
    if conversions:
        head = "/* byoc_load_<dtype>(x), byoc_store_<dtype>(x): an element as its compute type and back. */\n"
        lines = []
        for kind, d in conversions:
            name = (load if kind == "load" else store)("x", d)
            lines.append(f"#define byoc_{kind}_{d}(x) {name if name != 'x' else '(x)'}\n")
        parts.append(head + "".join(lines))
    if pairs:
        head = "/* byoc_cast_<from>_<to>(x): the cast op, between compute types (generator/c/dtypes.py). */\n"
        parts.append(head + "".join(cast_function(a, b) for a, b in pairs))
    if bitcasts:
        head = "/* byoc_bitcast_<from>_<to>(x): the bitcast op, a value's bits as another type's. */\n"
        parts.append(head + "".join(bitcast_function(a, b) for a, b in bitcasts))
    helpers = helpers_in(text)
    if helpers:
        head = (
            "/* byoc_mod_<t> (the divisor's sign), byoc_fmod_<t> (the dividend's), byoc_shift_<LEFT|RIGHT>_<t>:\n"
            "   the mod and bit_shift ops; byoc_saturate_<t>: quantize_linear's saturation; with no\n"
            "   undefined behaviour (generator/c/dtypes.py). */\n"
        )
        include = "#include <math.h>\n" if any(is_float(d) for _, d in helpers) else ""  # fmod
        parts.append(include + head + "".join(helper_function(h, d) for h, d in helpers))
    return "\n".join(parts)


FLOAT16 = """\
/* byoc_float16: IEEE binary16 as stored (bits); computed on as float: read through
   byoc_float16_to_float, written through byoc_float_to_float16 (round to nearest even,
   NaN stays NaN), with the compiler's _Float16 where it has one (generator/c/dtypes.py). */
typedef struct {
  uint16_t bits;
} byoc_float16;
#if defined(__FLT16_MANT_DIG__) && !defined(BYOC_NO_FLOAT16)
#define byoc_have_float16 1
static inline float byoc_float16_to_float(byoc_float16 h) {
  _Float16 f;
  memcpy(&f, &h.bits, sizeof f);
  return (float)f;
}
static inline byoc_float16 byoc_float_to_float16(float x) {
  const _Float16 f = (_Float16)x;
  byoc_float16 h;
  memcpy(&h.bits, &f, sizeof h.bits);
  return h;
}
#else
static inline float byoc_float16_to_float(byoc_float16 h) {
  const uint32_t exponent = 0x7c00u << 13;
  uint32_t u = ((uint32_t)h.bits & 0x7fffu) << 13;
  const uint32_t e = u & exponent;
  float f;
  u += (uint32_t)(127 - 15) << 23;
  if (e == exponent) {
    u += (uint32_t)(128 - 16) << 23; /* infinity or NaN */
  } else if (e == 0) { /* zero or subnormal: renormalise through float arithmetic */
    const uint32_t magic_bits = (uint32_t)113 << 23;
    float magic;
    memcpy(&magic, &magic_bits, sizeof magic);
    u += (uint32_t)1 << 23;
    memcpy(&f, &u, sizeof f);
    f -= magic;
    memcpy(&u, &f, sizeof u);
  }
  u |= ((uint32_t)h.bits & 0x8000u) << 16;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline byoc_float16 byoc_float_to_float16(float x) {
  uint32_t u;
  byoc_float16 h;
  memcpy(&u, &x, sizeof u);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  if (u >= (uint32_t)(127 + 16) << 23) { /* at least 65536: infinity, or a quiet NaN */
    h.bits = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (u < (uint32_t)113 << 23) { /* below 2**-14: a subnormal, rounded by the addition */
    const uint32_t magic_bits = (uint32_t)((127 - 15) + (23 - 10) + 1) << 23;
    float magic, f;
    memcpy(&magic, &magic_bits, sizeof magic);
    memcpy(&f, &u, sizeof f);
    f += magic;
    memcpy(&u, &f, sizeof u);
    h.bits = (uint16_t)(u - magic_bits);
  } else { /* normal: round to nearest even; a carry may reach infinity */
    const uint32_t odd = (u >> 13) & 1u;
    u += ((uint32_t)15 << 23) - ((uint32_t)127 << 23) + 0xfffu + odd;
    h.bits = (uint16_t)(u >> 13);
  }
  h.bits = (uint16_t)(h.bits | (sign >> 16));
  return h;
}
#endif
static inline float byoc_float16_round(float x) {
  return byoc_float16_to_float(byoc_float_to_float16(x));
}
"""

BFLOAT16 = """\
/* byoc_bfloat16: the high 16 bits of a float32, as stored; computed on as float: read
   through byoc_bfloat16_to_float (bits << 16), written through byoc_float_to_bfloat16
   (round to nearest even, NaN kept a quiet NaN) (generator/c/dtypes.py). */
typedef struct {
  uint16_t bits;
} byoc_bfloat16;
static inline float byoc_bfloat16_to_float(byoc_bfloat16 h) {
  const uint32_t u = (uint32_t)h.bits << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline byoc_bfloat16 byoc_float_to_bfloat16(float x) {
  uint32_t u;
  byoc_bfloat16 h;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    h.bits = (uint16_t)((u >> 16) | 0x40u); /* NaN: quiet, sign and payload's top kept */
  } else {
    h.bits = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  return h;
}
static inline float byoc_bfloat16_round(float x) {
  return byoc_bfloat16_to_float(byoc_float_to_bfloat16(x));
}
"""

_BITS = {
    "int8": 8,
    "uint8": 8,
    "int16": 16,
    "uint16": 16,
    "int32": 32,
    "uint32": 32,
    "int64": 64,
    "uint64": 64,
}


def _limits(dtype: str) -> tuple[str, str]:
    """The C names of ``dtype``'s minimum and maximum."""
    bits = _BITS[dtype]
    if dtype.startswith("u"):
        return "0", f"UINT{bits}_MAX"
    return f"INT{bits}_MIN", f"INT{bits}_MAX"


def cast_function(src: str, dst: str) -> str:
    """The ``static inline`` C function ``byoc_cast_<src>_<dst>``."""
    arg, result = compute_type(src), compute_type(dst)
    head = f"static inline {result} byoc_cast_{src}_{dst}({arg} x) {{\n"
    if dst == "bool":
        body = ["  return x != 0;"]
    elif (src, dst) == ("float64", "float16"):  # one rounding, as numpy's: see below
        body = [
            "  float f = (float)x; /* to nearest; then odd when inexact, so the rounding to",
            "                         float16 (13 bits fewer) is the one from x itself */",
            "  if ((double)f != x && x == x) {",
            "    uint32_t u;",
            "    memcpy(&u, &f, sizeof u);",
            "    if ((u & 1u) == 0) {",
            "      u = (f < 0 ? -(double)f : (double)f) < (x < 0 ? -x : x) ? u + 1 : u - 1;",
            "      memcpy(&f, &u, sizeof f);",
            "    }",
            "  }",
            "  return byoc_float16_round(f);",
        ]
    elif is_float(dst):
        body = [f"  return ({result})x;"]
    elif src == "bool":
        body = [f"  return ({result})(x ? 1 : 0);"]
    elif is_float(src):  # float to integer: NaN is 0; truncated toward zero, saturated
        low, high = _limits(dst)
        body = [
            "  if (x != x) return 0;",
            f"  if ((double)x <= (double){low}) return {low};",
            f"  if ((double)x >= (double){high}) return {high};",
            f"  return ({result})x;",
        ]
    else:  # integer to integer: modulo 2**bits, through the unsigned type
        assert is_integer(src) and is_integer(dst), (src, dst)
        bits = _BITS[dst]
        unsigned = f"uint{bits}_t"
        if dst.startswith("u"):
            body = [f"  return ({unsigned})x;"]
        else:
            body = [
                f"  const {unsigned} u = ({unsigned})x;",
                f"  return u <= INT{bits}_MAX ? ({result})u : ({result})(-({result})(UINT{bits}_MAX - u) - 1);",
            ]
    return head + "\n".join(body) + "\n}\n"


_HALF_NAN = {"float16": (13, 0x7C00, 0x3FF, 0x200), "bfloat16": (16, 0x7F80, 0x7F, 0x40)}
"""Per half type: how far a float's bits shift to its own, its exponent's mask, its
mantissa's, its quiet bit."""


def bitcast_function(src: str, dst: str) -> str:
    """The ``static inline`` C function ``byoc_bitcast_<src>_<dst>``, of two dtypes of
    one width (not to bool but from it): the bits of ``x`` copied into the result. A
    half type's value is a float: its bits are those the float rounds to, a NaN's its
    sign and payload as ``byoc_<half>_to_float`` loaded them (a payload of 0 quiet);
    and the result of one is the float its bits are."""
    arg, result = compute_type(src), compute_type(dst)
    head = f"static inline {result} byoc_bitcast_{src}_{dst}({arg} x) {{\n"
    if src == dst:
        body = ["  return x;"]
    elif src == "bool":
        body = [f"  return ({result})(x ? 1 : 0);"]
    else:
        assert dst != "bool", (src, dst)
        body = []
        bits = "x"
        if is_half(src):
            shift, exponent, mantissa, quiet = _HALF_NAN[src]
            body += [
                "  uint32_t u;",
                "  uint16_t bits;",
                "  memcpy(&u, &x, sizeof u);",
                "  if ((u & 0x7fffffffu) > 0x7f800000u) { /* NaN: its sign and payload, as loaded */",
                f"    const uint32_t payload = (u >> {shift}) & 0x{mantissa:x}u;",
                f"    bits = (uint16_t)(((u >> 16) & 0x8000u) | 0x{exponent:x}u | (payload ? payload : 0x{quiet:x}u));",
                "  } else {",
                f"    bits = byoc_float_to_{src}(x).bits;",
                "  }",
            ]
            bits = "bits"
        if is_half(dst):
            body += [
                f"  byoc_{dst} h;",
                f"  memcpy(&h.bits, &{bits}, sizeof h.bits);",
                f"  return byoc_{dst}_to_float(h);",
            ]
        else:
            body += [f"  {result} r;", f"  memcpy(&r, &{bits}, sizeof r);", "  return r;"]
    return head + "\n".join(body) + "\n}\n"


def input_args(inputs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The input placeholders of an op's C expression, from each input's C value (in
    its compute type: a local, or an element read through :func:`load`) and dtype:
    ``${x<j>}`` the value, ``${x<j>_dtype}`` the dtype's name."""
    args = {}
    for j, (text, dtype) in enumerate(inputs):
        args[f"x{j}"] = text
        args[f"x{j}_dtype"] = dtype
    return args


def saturate_function(dtype: str) -> str:
    """``byoc_saturate_<dtype>(v)``: the integral double ``v`` saturated to the integer
    ``dtype``'s range, NaN to its low end (quantize_linear's rule)."""
    info = np.iinfo(dtype)
    t = compute_type(dtype)
    return (
        f"static inline {t} byoc_saturate_{dtype}(double v) {{\n"
        f"  return v >= {info.max} ? {info.max} : (v >= {info.min} ? ({t})v : {info.min});\n"
        "}\n"
    )


def helper_function(helper: str, dtype: str) -> str:
    """The ``static inline`` C function ``byoc_<helper>_<dtype>`` of the mod and
    bit_shift ops (the catalog's rules): an integer divisor of 0 gives 0 (and -1 gives 0,
    where C's INT_MIN % -1 would trap); a shift count below 0 or of the width or more
    gives 0, or -1 for a negative value shifted right; a signed right shift is
    arithmetic, a signed left shift wraps."""
    t = compute_type(dtype)
    if helper == "saturate":
        return saturate_function(dtype)
    head = f"static inline {t} byoc_{helper}_{dtype}({t} a, {t} b) {{\n"
    signed = not is_float(dtype) and not dtype.startswith("u")
    if helper in ("mod", "fmod"):
        if is_float(dtype):
            body = [f"  {t} r = ({t})fmod(a, b);"]
            if helper == "mod":
                body.append("  if (r != 0 && (r < 0) != (b < 0)) r += b;")
            body.append("  return r;")
        else:
            body = ["  if (b == 0) return 0;"]
            if signed:
                body += ["  if (b == -1) return 0;"]
            body.append(f"  {'const ' if helper == 'fmod' or not signed else ''}{t} r = ({t})(a % b);")
            if helper == "mod" and signed:
                body.append(f"  if (r != 0 && (r < 0) != (b < 0)) r = ({t})(r + b);")
            body.append("  return r;")
        return head + "\n".join(body) + "\n}\n"
    bits = _BITS[dtype]
    unsigned = f"uint{bits}_t"
    wide = "uint64_t" if bits == 64 else "uint32_t"
    out_of_range = f"b < 0 || b >= {bits}" if signed else f"b >= {bits}"
    if helper == "shift_LEFT":
        body = [
            f"  if ({out_of_range}) return 0;",
            f"  const {unsigned} u = ({unsigned})(({wide})({unsigned})a << b);",
        ]
        if signed:
            body.append(f"  return u <= INT{bits}_MAX ? ({t})u : ({t})(-({t})(UINT{bits}_MAX - u) - 1);")
        else:
            body.append("  return u;")
    elif signed:  # arithmetic: a negative a shifts its complement, which is not negative
        body = [
            f"  if ({out_of_range}) return a < 0 ? -1 : 0;",
            f"  return a < 0 ? ({t})~(({t})~a >> b) : ({t})(a >> b);",
        ]
    else:
        body = [f"  if ({out_of_range}) return 0;", f"  return ({t})(a >> b);"]
    return head + "\n".join(body) + "\n}\n"


# ---------------------------------------------------------------------- literals


def half_bits(values: Sequence[int | float] | np.ndarray, dtype: str) -> list[int]:
    """The bit patterns of ``values`` rounded to the half type ``dtype`` (as numpy rounds)."""
    array = np.asarray(values, dtype=np.float64).reshape(-1).astype(dtype)
    return [int(b) for b in array.view(np.uint16).tolist()]


def literals(values: Sequence[int | float] | np.ndarray, dtype: str) -> list[str] | None:
    """C initialisers of ``values`` for the new storage types, or None for the others
    (see :func:`byoc.generator.c.text.c_literals`): a half type's bit pattern in braces
    (``{0x3c00}``), a bool 0 or 1, an unsigned 32 or 64 bit integer with the ``u``
    suffix (a decimal literal above INT64_MAX has no signed type)."""
    if is_half(dtype):
        return [f"{{0x{b:04x}}}" for b in half_bits(values, dtype)]
    if dtype == "bool":
        return ["1" if v else "0" for v in np.asarray(values, dtype=bool).reshape(-1).tolist()]
    if dtype in ("uint32", "uint64"):
        return [f"{int(v)}u" for v in np.asarray(values, dtype=dtype).reshape(-1).tolist()]
    return None


def half_note(values: Sequence[int | float] | np.ndarray, dtype: str, limit: int = 8) -> str:
    """The values of a half-type constant as decimals, for its comment: ``values 1, 0.5``
    (the first ``limit``, then ``...``)."""
    array = np.asarray(values, dtype=np.float64).reshape(-1).astype(dtype).astype(np.float64)
    shown = [_short(float(v)) for v in array[:limit]]
    return "values " + ", ".join(shown) + (", ..." if array.size > limit else "")


def _short(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:g}" if float(f"{x:g}") == x else repr(x)


def storage_type(dtype: str) -> str:
    """``dtype``'s C storage type (:data:`byoc.ir.C_TYPES`)."""
    return C_TYPES[dtype]
