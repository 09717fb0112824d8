"""Shared spec text of the c_source broadcasting tests (test_c_source_broadcast*.py):
the vendor backend, whose macros declare ``broadcast: true``, and writing a spec."""

from __future__ import annotations

import re
from pathlib import Path

COMPILE = "compile: {compiler: cc, language: c, std: c99, flags: [-O1, -Wall, -Wextra, -Werror]}"

# VENDOR_ADD walks the result's indices like an odometer and steps each input by its
# strides along the result's axes (0 where it is broadcast), so it serves every rank.
VENDOR = f"""\
version: 1
name: vendor
kind: c_source
dtypes: [float32]
ranks: [1, 2, 3, 4]
{COMPILE}
prelude: |
  #include <stdint.h>
  #define VENDOR_ITEMS(...) __VA_ARGS__
macros:
  VENDOR_ADD:
    doc: out = a + b at every index of out, each input read through its strides
    inputs: 2
    broadcast: true
    params:
      p_ID_: "${{symbol}}"
      p_RANK_: "${{rank}}"
      p_SIZE_: "${{size}}"
      p_SHAPE_: "${{shape}}"
      p_SA_: "${{in0_strides}}"
      p_SB_: "${{in1_strides}}"
    body: |
      static void p_ID_(const float* a, const float* b, float* out) {{
        static const int64_t shape[] = {{VENDOR_ITEMS p_SHAPE_}};
        static const int64_t sa[] = {{VENDOR_ITEMS p_SA_}};
        static const int64_t sb[] = {{VENDOR_ITEMS p_SB_}};
        int64_t index[p_RANK_] = {{0}};
        int64_t ia = 0, ib = 0;
        for (int64_t k = 0; k < p_SIZE_; ++k) {{
          out[k] = a[ia] + b[ib];
          for (int j = p_RANK_ - 1; j >= 0; --j) {{
            ia += sa[j];
            ib += sb[j];
            if (++index[j] < shape[j]) break;
            ia -= sa[j] * shape[j];
            ib -= sb[j] * shape[j];
            index[j] = 0;
          }}
        }}
      }}
  VENDOR_ADD_FLAT:
    doc: out = a + b, element by element (every input of the result's shape)
    inputs: 2
    params: {{p_ID_: "${{symbol}}", p_SIZE_: "${{size}}"}}
    body: |
      static void p_ID_(const float* a, const float* b, float* out) {{
        for (int64_t k = 0; k < p_SIZE_; ++k) out[k] = a[k] + b[k];
      }}
  VENDOR_GEMM:
    doc: x (M, K) times w (N, K) transposed, plus c broadcast to (M, N) (ONNX Gemm)
    inputs: 3
    broadcast: true
    params:
      p_ID_: "${{symbol}}"
      p_M_: "${{in0_dim0}}"
      p_K_: "${{in0_dim1}}"
      p_N_: "${{in1_dim0}}"
      p_CI_: "${{in2_stride0}}"
      p_CJ_: "${{in2_stride1}}"
    body: |
      static void p_ID_(const float* x, const float* w, const float* c, float* out) {{
        for (int64_t i = 0; i < p_M_; ++i)
          for (int64_t j = 0; j < p_N_; ++j) {{
            double v = 0;
            for (int64_t k = 0; k < p_K_; ++k) v += (double)x[i * p_K_ + k] * (double)w[j * p_K_ + k];
            out[i * p_N_ + j] = (float)v + c[i * p_CI_ + j * p_CJ_];
          }}
      }}
ops:
  add: {{macros: {{default: VENDOR_ADD}}}}
patterns:
  gemm:
    inputs: [x, w, c]
    match: |
      return add(dense(x, w), c)
    macros: {{2: VENDOR_GEMM}}
"""


def write_spec(spec_dir: Path, text: str) -> Path:
    name = re.search(r"^name: (\w+)$", text, flags=re.M)
    assert name is not None
    path = spec_dir / f"{name.group(1)}.yaml"
    path.write_text(text, encoding="utf-8")
    return path
