"""byoc's own transposes in the dnnl prelude (spec/backends/dnnl.yaml), which do a
packed convolution's reorders between nchw and nhwc in place of oneDNN's reorder
primitive. The generated modules only ever run the tile side this machine has (16 with
AVX-512, 8 with AVX2), so this compiles the prelude with a small entry point and runs
each side the machine can, on matrices with and without whole tiles, against numpy.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from libraries import missing_library

from byoc.api import load_backend
from byoc.runtime.build import build_spec_module

if missing_library("dnnl"):
    pytest.skip(missing_library("dnnl"), allow_module_level=True)

ENTRY = """
/* out = in transposed by {images, rows, cols, side, pixels_are_rows}; the side this
   machine moves tiles of (0: none), or -1 when it cannot move tiles of `side`. */
int byoc_test_transpose(const float* in, float* out, int64_t images, int64_t rows, int64_t cols, int64_t side,
                        int64_t pixels_are_rows) {
  const int64_t t[5] = {images, rows, cols, side, pixels_are_rows};
  if (dnnl_byoc_tile_width() < side) return -1;
  dnnl_byoc_transpose(in, out, t);
  return dnnl_byoc_tile_width();
}
"""


@pytest.fixture(scope="module")
def transpose():
    spec = load_backend("dnnl")
    sources = {"transpose.c": spec.templates["prelude"] + ENTRY}
    library = build_spec_module(spec, sources, "transpose.c", spec.template_values())
    fn = ctypes.CDLL(str(library)).byoc_test_transpose
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * 5
    return fn


# (images, rows, cols): whole tiles of both sides; rows and cols past the last whole
# tile; one of 64x56x56's images; enough elements for the threads to share them
SHAPES = [(1, 16, 16), (2, 32, 48), (1, 19, 37), (3, 8, 9), (1, 64, 3136), (2, 3136, 64), (1, 49, 2048)]


@pytest.mark.parametrize("side", [8, 16])
@pytest.mark.parametrize("pixels_are_rows", [0, 1])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_transposes_every_image(transpose, side, pixels_are_rows, shape, rng):
    if side > min(shape[1:]):
        pytest.skip("the packed convolutions leave matrices thinner than a tile to oneDNN")
    x = rng.standard_normal(shape).astype(np.float32)
    out = np.full((shape[0], shape[2], shape[1]), np.nan, np.float32)
    got = transpose(x.ctypes.data, out.ctypes.data, *shape, side, pixels_are_rows)
    if got == -1:
        pytest.skip(f"this machine moves no tiles of {side}")
    assert got >= side
    np.testing.assert_array_equal(out, x.transpose(0, 2, 1))
