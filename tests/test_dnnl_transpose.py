"""byoc's own transposes in the dnnl support code (spec/backends/dnnl/dnnl_support.c), which do a
packed convolution's and an int8 kernel's reorders between nchw and nhwc in place of
oneDNN's reorder primitive. The generated modules only ever run the tiles this machine
has (float32: 16x16 with AVX-512, 8x8 with AVX2; bytes: 16x64 with AVX-512BW, 16x16
with SSE2), so this compiles the support code with a small entry point and runs each tile
the machine can, on matrices with and without whole tiles, against numpy.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from dnnl_support import support_source, without_support
from libraries import missing_library

from byoc.api import load_backend
from byoc.runtime.build import build_spec_module

if missing_library("dnnl"):
    pytest.skip(missing_library("dnnl"), allow_module_level=True)

ENTRY = """
/* out = in transposed by {images, rows, cols, side, pixels_are_rows, bytes, columns}
   (elements of `bytes` bytes, tiles of side x columns); the side this machine moves
   tiles of (0: none), or -1 when it cannot move tiles of side x columns. */
int byoc_test_transpose(const void* in, void* out, int64_t images, int64_t rows, int64_t cols, int64_t side,
                        int64_t pixels_are_rows, int64_t bytes, int64_t columns) {
  const int64_t t[7] = {images, rows, cols, side, pixels_are_rows, bytes, columns};
  const int64_t widest = bytes == 1 && columns > side ? dnnl_byoc_tile_columns(1) : dnnl_byoc_tile_width((size_t)bytes);
  if (dnnl_byoc_tile_width((size_t)bytes) < side || widest < columns) return -1;
  dnnl_byoc_transpose(in, out, t);
  return dnnl_byoc_tile_width((size_t)bytes);
}
"""


@pytest.fixture(scope="module")
def transpose():
    spec = load_backend("dnnl")
    sources = {"transpose.c": support_source(spec) + ENTRY, **{f.name: f.text for f in spec.support}}
    library = build_spec_module(without_support(spec), sources, "transpose.c", spec.template_values())
    fn = ctypes.CDLL(str(library)).byoc_test_transpose
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * 7
    return fn


# (images, rows, cols): whole tiles of both sides; rows and cols past the last whole
# tile; one of 64x56x56's images; enough elements for the threads to share them; a
# wide tile of bytes, then 16-column ones, then 4 columns one by one
SHAPES = [
    (1, 16, 16),
    (2, 32, 48),
    (1, 19, 37),
    (3, 8, 9),
    (1, 64, 3136),
    (2, 3136, 64),
    (1, 49, 2048),
    (1, 20, 100),
]


TILES = {
    "float32-8": (np.float32, 8, 8),
    "float32-16": (np.float32, 16, 16),
    "uint8-16": (np.uint8, 16, 16),
    "uint8-16x64": (np.uint8, 16, 64),
}
"""Element type, tile rows and tile columns."""


@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("pixels_are_rows", [0, 1])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_transposes_every_image(transpose, tile, pixels_are_rows, shape, rng):
    dtype, side, columns = TILES[tile]
    if side > min(shape[1:]) or columns > shape[2]:
        pytest.skip("byoc leaves matrices thinner than a tile to oneDNN")
    if dtype == np.float32:
        x = rng.standard_normal(shape).astype(dtype)
        out = np.full((shape[0], shape[2], shape[1]), np.nan, dtype)
    else:
        x = rng.integers(0, 255, shape).astype(dtype)  # 255: never a value, so an unwritten element shows
        out = np.full((shape[0], shape[2], shape[1]), 255, dtype)
    got = transpose(x.ctypes.data, out.ctypes.data, *shape, side, pixels_are_rows, x.itemsize, columns)
    if got == -1:
        pytest.skip(f"this machine moves no {tile} tiles")
    assert got >= side
    np.testing.assert_array_equal(out, x.transpose(0, 2, 1))
