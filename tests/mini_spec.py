"""The smallest c_source backend spec: one macro, add on 1-D and 2-D float32 tensors.

Tests that need a valid spec to break one thing in (tests/test_spec_malformed.py,
tests/test_accepted_invalid.py, tests/data/bad/fixtures_values.py) start from it; its
macro body is line 18.
"""

C_SOURCE = """\
version: 1
name: mini
kind: c_source
symbol_prefix: mini
dtypes: [float32]
ranks: [1, 2]
compile:
  language: c
  flags: ["-O${opt_level}", -Wall]
options:
  opt_level: {type: int, default: 2}
macros:
  BIN_1D:
    inputs: 2
    params: {p_ID_: "${symbol}", p_OP_: "${operator}", p_N_: "${dim0}"}
    body: |
      static void p_ID_(const float* a, const float* b, float* out) {
        for (int i = 0; i < p_N_; ++i) out[i] = a[i] p_OP_ b[i];
      }
ops:
  add:
    macros: {1: BIN_1D}
    vars: {operator: "+"}
"""
