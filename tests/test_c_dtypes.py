"""The C support text of the dtypes (generator/c/dtypes.py), compiled and run.

- the float16 conversions (both the ``_Float16`` one and the bit-manipulation fallback,
  forced by ``-DBYOC_NO_FLOAT16``) against numpy on every float16 bit pattern and on
  floats around every rounding boundary; bfloat16's against ml_dtypes;
- every ``byoc_cast_<from>_<to>`` of the 13 dtypes against the catalog's cast rule,
  written here independently with numpy (to bool ``x != 0``; float to integer NaN -> 0,
  truncated and saturated; integer to integer modulo 2**bits; to a float type rounded
  to nearest, float64 to bfloat16 through float32);
- every ``byoc_bitcast_<from>_<to>`` of two dtypes of one width against numpy's
  ``view``, on every 8 and 16 bit pattern and on random 32 and 64 bit ones: the same
  bits, but that a signaling float16 NaN may load quiet (``_Float16``), and a NaN
  result of a half type is one of its sign (its payload the store's);
- the support text compiles warning-free as C99 and as C++17 (-Wall -Wextra -Werror).
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest
from compile_util import compile_library

from byoc.generator.c import dtypes as c_dtypes
from byoc.ir import C_TYPES, DTYPES, is_float, is_half

BFLOAT16 = np.dtype("bfloat16")


def _np(dtype: str) -> np.dtype:
    return np.dtype(dtype)


def _kernel(src: str, dst: str) -> str:
    """``void cast_<src>_<dst>(const S* in, D* out, int64_t n)``: load, cast, store."""
    value = c_dtypes.load("in[k]", src)
    cast = f"byoc_cast_{src}_{dst}({value})"
    return (
        f"void cast_{src}_{dst}(const {C_TYPES[src]}* in, {C_TYPES[dst]}* out, int64_t n) {{\n"
        f"  for (int64_t k = 0; k < n; ++k) out[k] = {c_dtypes.store(cast, dst)};\n"
        "}\n"
    )


def _bitcast_kernel(src: str, dst: str) -> str:
    """``void bitcast_<src>_<dst>(const S* in, D* out, int64_t n)``: load, bitcast, store."""
    value = c_dtypes.load("in[k]", src)
    call = f"byoc_bitcast_{src}_{dst}({value})"
    return (
        f"void bitcast_{src}_{dst}(const {C_TYPES[src]}* in, {C_TYPES[dst]}* out, int64_t n) {{\n"
        f"  for (int64_t k = 0; k < n; ++k) out[k] = {c_dtypes.store(call, dst)};\n"
        "}\n"
    )


BITCAST_PAIRS = [
    (a, b)
    for a in DTYPES
    for b in DTYPES
    if np.dtype(a).itemsize == np.dtype(b).itemsize and (b != "bool" or a == "bool")
]
"""The dtype pairs the bitcast op takes: one width, nothing but bool as bool."""


CONVERSIONS = """\
void f16_to_float(const byoc_float16* in, float* out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = byoc_float16_to_float(in[k]);
}
void float_to_f16(const float* in, byoc_float16* out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = byoc_float_to_float16(in[k]);
}
void bf16_to_float(const byoc_bfloat16* in, float* out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = byoc_bfloat16_to_float(in[k]);
}
void float_to_bf16(const float* in, byoc_bfloat16* out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = byoc_float_to_bfloat16(in[k]);
}
"""


def _source(pairs, *, cplusplus: bool = False, bitcasts=BITCAST_PAIRS) -> str:
    kernels = "".join(_kernel(a, b) for a, b in pairs) + "".join(_bitcast_kernel(a, b) for a, b in bitcasts)
    support = c_dtypes.support_text(DTYPES, kernels, cplusplus=cplusplus)
    head = (
        "#include <stdint.h>\n#include <string.h>\n"
        if not cplusplus
        else "#include <cstdint>\n#include <cstring>\n"
    )
    body = CONVERSIONS + kernels
    if cplusplus:
        body = 'extern "C" {\n' + body + "}\n"
    return head + support + "\n" + body


def _library(tmp: Path, source: str, name: str, flags=()) -> ctypes.CDLL:
    path = tmp / f"{name}.c"
    path.write_text(source)
    target = tmp / f"lib{name}.so"
    cmd = [
        "gcc",
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-O2",
        *flags,
        "-shared",
        "-fPIC",
        "-o",
        str(target),
        str(path),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return ctypes.CDLL(str(target))


def _call(lib: ctypes.CDLL, name: str, x: np.ndarray, out_dtype) -> np.ndarray:
    x = np.ascontiguousarray(x)
    out = np.zeros(x.shape, dtype=out_dtype)
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn(x.ctypes.data, out.ctypes.data, x.size)
    return out


ALL_PAIRS = [(a, b) for a in DTYPES for b in DTYPES]


@pytest.fixture(scope="module", params=["float16", "fallback"])
def lib(request, tmp_path_factory) -> ctypes.CDLL:
    flags = ("-DBYOC_NO_FLOAT16",) if request.param == "fallback" else ()
    return _library(tmp_path_factory.mktemp(request.param), _source(ALL_PAIRS), "casts", flags)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal values, NaN where NaN (any payload), signed zeros told apart."""
    with np.errstate(invalid="ignore"):
        g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), np.flatnonzero(np.isnan(g) != np.isnan(w))[:10]
    keep = ~np.isnan(w)
    bad = np.flatnonzero((g[keep] != w[keep]) | (np.signbit(g[keep]) != np.signbit(w[keep])))
    assert bad.size == 0, list(zip(g[keep][bad][:5], w[keep][bad][:5]))


def test_float16_to_float_on_every_bit_pattern(lib):
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    _same_bits(_call(lib, "f16_to_float", halves, np.float32), halves.astype(np.float32))


def test_float_to_float16_rounds_to_nearest_even(lib):
    # every float16 value, the midpoints between neighbours and one float ulp either
    # side of them (ties to even, and the boundaries to infinity and subnormals), and
    # random floats of every magnitude
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = np.sort(halves[np.isfinite(halves)].astype(np.float64))
    mids = ((finite[1:] + finite[:-1]) / 2).astype(np.float32)
    near = np.concatenate(
        [np.nextafter(mids, np.float32(-np.inf)), mids, np.nextafter(mids, np.float32(np.inf))]
    )
    rng = np.random.default_rng(0)
    random = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    extra = np.array(
        [65504, 65519.99, 65520, 1e9, -1e9, np.inf, -np.inf, np.nan, -0.0, 2**-25, 2**-24], np.float32
    )
    floats = np.concatenate([finite.astype(np.float32), near, random, extra])
    got = _call(lib, "float_to_f16", floats, np.uint16).view(np.float16)
    with np.errstate(over="ignore"):
        _same_bits(got, floats.astype(np.float16))


def test_bfloat16_conversions_match_ml_dtypes(lib):
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(BFLOAT16)
    _same_bits(_call(lib, "bf16_to_float", every, np.float32), every.astype(np.float32))
    rng = np.random.default_rng(1)
    floats = rng.integers(0, 2**32, size=300_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    ties = (np.arange(65536, dtype=np.uint32) << 16 | 0x8000).view(np.float32)  # exact midpoints
    floats = np.concatenate([floats, ties, np.array([np.inf, -np.inf, np.nan, 3.4028235e38], np.float32)])
    got = _call(lib, "float_to_bf16", floats, np.uint16).view(BFLOAT16)
    with np.errstate(invalid="ignore", over="ignore"):
        _same_bits(got, floats.astype(BFLOAT16))


# ---------------------------------------------------------------------- casts


def _samples(dtype: str) -> np.ndarray:
    """Values of ``dtype`` that exercise a cast: its extremes, zeros, fractions, NaN."""
    if dtype == "bool":
        return np.array([False, True, True, False])
    if not is_float(dtype):
        info = np.iinfo(dtype)
        values = [info.min, info.max, 0, 1, -1, 127, -128, 128, 255, 256, -129, 32767, 65535, 65536, -32769]
        values += [
            2**31 - 1,
            2**31,
            -(2**31),
            2**32 - 1,
            2**32 + 5,
            2**63 - 1,
            -(2**63),
            2**64 - 1,
            12345,
            -98765,
        ]
        return np.array([v for v in values if info.min <= v <= info.max], dtype=np.object_).astype(dtype)
    values = [0.0, -0.0, 0.5, -0.5, 1.7, -1.7, 2.5, -2.5, 127.9, -128.9, 200.0, 255.5, 256.0, -129.0, 1e4]
    values += [65504.0, -65504.0, 3e9, -3e9, 1e19, -1e19, 1e30, np.inf, -np.inf, np.nan, 0.1, 1 / 3, 2.0**-20]
    values += [1 + 2.0**-11, 1 + 2.0**-11 + 2.0**-40, -1 - 2.0**-11 - 2.0**-40]  # float16 double rounding
    with np.errstate(over="ignore", invalid="ignore"):
        return np.array(values, dtype=np.float64).astype(_np(dtype))


def _expected(x: np.ndarray, dst: str) -> np.ndarray:
    """The catalog's cast rule, in numpy."""
    src = str(x.dtype)
    if dst == "bool":
        return (x != 0) | (np.isnan(x) if is_float(src) else False)
    if src == "bool":
        return x.astype(np.uint8).astype(_np(dst))
    if is_float(dst):
        if src == "float64" and dst == "bfloat16":
            return x.astype(np.float32).astype(BFLOAT16)
        with np.errstate(over="ignore"):
            return x.astype(_np(dst))
    if is_float(src):
        info = np.iinfo(dst)
        f = x.astype(np.float64)
        out = np.zeros(x.shape, dtype=dst)
        for k, v in enumerate(f):
            if np.isnan(v):
                out[k] = 0
            elif np.isinf(v):
                out[k] = info.max if v > 0 else info.min
            else:
                out[k] = max(int(info.min), min(int(info.max), int(np.trunc(v))))
        return out
    bits = np.iinfo(dst).bits
    wrapped = [int(v) % (1 << bits) for v in x.tolist()]
    if np.iinfo(dst).min < 0:
        wrapped = [v - (1 << bits) if v >= 1 << (bits - 1) else v for v in wrapped]
    return np.array(wrapped, dtype=np.object_).astype(dst)


@pytest.mark.parametrize("src", DTYPES)
def test_every_cast_follows_the_rule(lib, src):
    x = _samples(src)
    for dst in DTYPES:
        storage = np.uint16 if is_half(dst) else _np(dst)
        got = _call(lib, f"cast_{src}_{dst}", x, storage)
        if is_half(dst):
            got = got.view(_np(dst))
        want = _expected(x, dst)
        if is_float(dst):
            _same_bits(got, want)
        else:
            assert got.tolist() == want.tolist(), (src, dst, x.tolist(), got.tolist(), want.tolist())


def _bit_patterns(dtype: str) -> np.ndarray:
    """Every bit pattern of an 8 or 16 bit ``dtype`` (bool: 0 and 1); of a wider one the
    cast samples and random patterns (NaNs of every kind among them)."""
    if dtype == "bool":
        return np.array([False, True])
    width = np.dtype(dtype).itemsize
    unsigned = np.dtype(f"u{width}")
    if width <= 2:
        return np.arange(2 ** (8 * width), dtype=np.uint32).astype(unsigned).view(dtype)
    rng = np.random.default_rng(width)
    random = rng.integers(0, 2**64, size=20_000, dtype=np.uint64)
    nans = np.array([0x7F800001, 0x7FC00000, 0xFFBFFFFF, 0x7FF0000000000001, 0xFFF8000000000001], np.uint64)
    bits = np.concatenate([random, nans]).astype(unsigned)
    return np.concatenate([_samples(dtype), bits.view(dtype)])


@pytest.mark.parametrize(("src", "dst"), BITCAST_PAIRS, ids=[f"{a}-{b}" for a, b in BITCAST_PAIRS])
def test_every_bitcast_keeps_the_bits(lib, src, dst):
    x = _bit_patterns(src)
    storage = np.uint16 if is_half(dst) else _np(dst)
    got = _call(lib, f"bitcast_{src}_{dst}", x, storage).view(_np(dst))
    want = x.view(_np(dst))
    bits = np.dtype(f"u{x.dtype.itemsize}")
    g = got.view(bits)
    same = np.zeros(x.shape, bool)
    candidates = [want.view(bits)]
    if src == "float16":  # _Float16's load quietens a signaling NaN
        candidates.append(np.where(np.isnan(x), want.view(bits) | 0x200, want.view(bits)))
    for w in candidates:
        same |= g == w
        if is_half(dst):  # a NaN result: one of its sign
            nan = np.isnan(w.view(dst).astype(np.float32))
            same |= nan & np.isnan(got.astype(np.float32)) & (g >> 15 == w >> 15)
    assert same.all(), (src, dst, x[~same][:5], got[~same][:5], want[~same][:5])


def test_support_text_compiles_as_cxx(tmp_path):
    source = _source(ALL_PAIRS, cplusplus=True)
    compile_library({"casts.cc": source}, "casts.cc", tmp_path, cplusplus=True, link=False)


def test_support_text_only_for_what_a_module_uses():
    assert c_dtypes.support_text(["float32", "int32", "float64", "int8", "uint8", "int64"]) == ""
    text = c_dtypes.support_text(["bool", "float32"])
    assert "#include <stdbool.h>" in text and "byoc_float16" not in text and "byoc_bfloat16" not in text
    assert "stdbool" not in c_dtypes.support_text(["bool"], cplusplus=True)
    text = c_dtypes.support_text(["float32"], "t = byoc_cast_float32_int8(x);")
    assert "byoc_cast_float32_int8(float x)" in text and "byoc_cast_int8" not in text
    assert "typedef struct" not in text
    text = c_dtypes.support_text(["float32", "uint32"], "t = byoc_bitcast_float32_uint32(x);")
    assert "byoc_bitcast_float32_uint32(float x)" in text and "memcpy(&r, &x, sizeof r)" in text
    assert "byoc_cast_" not in text and "typedef struct" not in text
