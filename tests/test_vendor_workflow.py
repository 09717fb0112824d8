"""A vendor's NPU backend out of tree, end to end (issue: the vendor's workflow).

A stand-in SDK is built by the test: a C library with a device to open, a conv2d that
refuses more than 64 output channels with a message of its own, and a hard-swish unit.
Its backend spec sits beside it (``sdk/spec/npu.yaml``, naming the SDK's directories
relative to itself) with an op catalog (``sdk/spec/ops.yaml``) whose own op imports
from the vendor's ONNX domain. A small CNN in ONNX then runs over ``npu,fused``:

- the device opens once per loaded module (module state), for two offloaded functions;
- a conv of 5x5 weights, which the spec's shape condition refuses, goes to ``fused``,
  and ``--explain`` says why;
- a bias added per channel (broadcast) runs on the NPU's add, a macro that takes
  broadcast inputs through their strides;
- the SDK's own message reaches the Python error and ``byoc run``'s output;
- every output matches byoc's numpy reference.
"""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest
from conftest import run_cli
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc.errors import RuntimeFailure
from byoc.spec import ENV_VAR

DOMAIN = "com.example.npu"

HEADER = """\
#ifndef NPU_H
#define NPU_H
/* The stand-in NPU SDK. */
int npu_open(void);         /* a device handle (>= 0); counts the opens */
int npu_open_count(void);
const char* npu_last_error(void);
/* One image, stride 1, no padding: x [C,H,W], w [M,C,KH,KW] -> out [M,H-KH+1,W-KW+1],
   then relu when relu != 0. Returns -1 (npu_last_error says why) above 64 channels out. */
int npu_conv2d(int device, const float* x, const float* w, float* out,
               int C, int H, int W, int M, int KH, int KW, int relu);
/* x * clamp(alpha * x + beta, 0, 1) */
void npu_hard_swish(int device, const float* x, float* out, long n, float alpha, float beta);
#endif
"""

SOURCE = """\
#include <stdio.h>
#include "npu.h"
static int opens = 0;
static char message[128];
int npu_open(void) { return opens++; }
int npu_open_count(void) { return opens; }
const char* npu_last_error(void) { return message; }
int npu_conv2d(int device, const float* x, const float* w, float* out,
               int C, int H, int W, int M, int KH, int KW, int relu) {
  (void)device;
  if (M > 64) {
    snprintf(message, sizeof message, "%d output channels exceed the NPU's 64", M);
    return -1;
  }
  int OH = H - KH + 1, OW = W - KW + 1;
  for (int m = 0; m < M; ++m)
    for (int i = 0; i < OH; ++i)
      for (int j = 0; j < OW; ++j) {
        float v = 0;
        for (int c = 0; c < C; ++c)
          for (int p = 0; p < KH; ++p)
            for (int q = 0; q < KW; ++q)
              v += x[(c * H + i + p) * W + j + q] * w[((m * C + c) * KH + p) * KW + q];
        out[(m * OH + i) * OW + j] = relu && !(v > 0) ? 0 : v;
      }
  return 0;
}
void npu_hard_swish(int device, const float* x, float* out, long n, float alpha, float beta) {
  (void)device;
  for (long k = 0; k < n; ++k) {
    float g = alpha * x[k] + beta;
    out[k] = x[k] * (g < 0 ? 0 : g > 1 ? 1 : g);
  }
}
"""

SPEC = """\
version: 1
name: npu
kind: c_source
dtypes: [float32]
ranks: [1, 2, 3, 4]
compile: {compiler: cc, language: c, std: c99, flags: [-O1, -Wall, -Wextra, -Werror]}
requires:
  npu:
    headers: [npu.h]
    libraries: [npu]
    install: build the stand-in SDK (tests/test_vendor_workflow.py)
    from:
      dirs: {include: [../include], lib: [../lib]}   # relative to this file
prelude: |
  #include <npu.h>
  #define NPU_ITEMS(...) __VA_ARGS__
module_state: |
  int device;
module_init: |
  state->device = npu_open();
macros:
  NPU_CONV2D:
    inputs: 2
    status: true
    params:
      p_ID_: "${symbol}"
      p_DEVICE_: "${module_state}"
      p_C_: "${in0_dim1}"
      p_H_: "${in0_dim2}"
      p_W_: "${in0_dim3}"
      p_M_: "${in1_dim0}"
      p_KH_: "${in1_dim2}"
      p_KW_: "${in1_dim3}"
      p_RELU_: "${relu}"
    body: |
      static int p_ID_(const float* x, const float* w, float* out) {
        if (npu_conv2d((p_DEVICE_)->device, x, w, out, p_C_, p_H_, p_W_, p_M_, p_KH_, p_KW_, p_RELU_) != 0) {
          return byoc_error("%s", npu_last_error());
        }
        return 0;
      }
  NPU_ADD:
    doc: a + b, each read through its strides along the result's axes (numpy broadcasting)
    inputs: 2
    broadcast: true
    params: {p_ID_: "${symbol}", p_RANK_: "${rank}", p_SIZE_: "${size}", p_SHAPE_: "${shape}",
             p_SA_: "${in0_strides}", p_SB_: "${in1_strides}"}
    body: |
      static void p_ID_(const float* a, const float* b, float* out) {
        static const int64_t shape[] = {NPU_ITEMS p_SHAPE_}, sa[] = {NPU_ITEMS p_SA_}, sb[] = {NPU_ITEMS p_SB_};
        int64_t index[p_RANK_] = {0}, ia = 0, ib = 0;
        for (int64_t k = 0; k < p_SIZE_; ++k) {
          out[k] = a[ia] + b[ib];
          for (int j = p_RANK_ - 1; j >= 0; --j) {
            ia += sa[j]; ib += sb[j];
            if (++index[j] < shape[j]) break;
            ia -= sa[j] * shape[j]; ib -= sb[j] * shape[j]; index[j] = 0;
          }
        }
      }
  NPU_HARD_SWISH:
    inputs: 1
    params: {p_ID_: "${symbol}", p_DEVICE_: "${module_state}", p_N_: "${size}", p_A_: "${alpha}", p_B_: "${beta}"}
    body: |
      static void p_ID_(const float* x, float* out) {
        npu_hard_swish((p_DEVICE_)->device, x, out, p_N_, (float)(p_A_), (float)(p_B_));
      }
ops:
  conv:
    macros: {4: NPU_CONV2D}
    vars: {relu: "0"}
    when: ["in0.shape[0] == 1", "in1.shape[2] <= 3", "in1.shape[3] <= 3", "groups == 1",
           "strides == [1, 1]", "pads == [0, 0, 0, 0]", "dilations == [1, 1]"]
  hard_swish:
    macros: {default: NPU_HARD_SWISH}
  add:
    macros: {default: NPU_ADD}
patterns:
  conv_relu:
    inputs: [x, w]
    match: |
      return relu(conv(x, w))
    when: ["x.shape[0] == 1", "w.shape[2] <= 3", "w.shape[3] <= 3", "conv.groups == 1",
           "conv.strides == [1, 1]", "conv.pads == [0, 0, 0, 0]", "conv.dilations == [1, 1]"]
    macros: {4: NPU_CONV2D}
    vars: {relu: "1"}
"""

OPS = f"""\
version: 1
ops:
  hard_swish:
    doc: x * clamp(alpha * x + beta, 0, 1), the NPU's activation unit.
    inputs: 1
    shape: elementwise
    dtypes: [float32, float64]
    attrs:
      alpha: {{type: float, default: 0.16666666666666666}}
      beta: {{type: float, default: 0.5}}
    numpy: multiply(x0, minimum(maximum(add(multiply(alpha, x0), beta), 0), 1))
    c: "${{x0}} * fmin(fmax(${{alpha}} * ${{x0}} + ${{beta}}, 0), 1)"
    onnx:
      domain: {DOMAIN}
      type: HardSwish
      opsets: [1, null]
      attrs: {{alpha: [alpha, 0.16666666666666666], beta: [beta, 0.5]}}
"""


@pytest.fixture
def sdk(tmp_path, monkeypatch):
    """``tmp_path/sdk``: include/npu.h, lib/libnpu.so and spec/{npu,ops}.yaml."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    root = tmp_path / "sdk"
    for sub in ("include", "lib", "spec", "src"):
        (root / sub).mkdir(parents=True)
    (root / "include" / "npu.h").write_text(HEADER)
    (root / "src" / "npu.c").write_text(SOURCE)
    subprocess.run(
        [
            "cc",
            "-O1",
            "-shared",
            "-fPIC",
            "-I",
            root / "include",
            root / "src" / "npu.c",
            "-o",
            root / "lib" / "libnpu.so",
        ],
        check=True,
        capture_output=True,
    )
    (root / "spec" / "npu.yaml").write_text(SPEC)
    (root / "spec" / "ops.yaml").write_text(OPS)
    return root


def cnn(channels_out: int = 8) -> bytes:
    """x -> conv 3x3 + relu (npu) -> conv 5x5 (fused: refused by the spec's condition)
    -> the vendor's HardSwish (npu) -> conv 3x3 with ``channels_out`` channels and a
    bias per channel added by broadcasting (npu)."""
    rng = np.random.default_rng(11)

    def weights(name, *shape):
        return numpy_helper.from_array(rng.uniform(-0.3, 0.3, shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"]),
        helper.make_node("HardSwish", ["c2"], ["h"], domain=DOMAIN, alpha=0.2),
        helper.make_node("Conv", ["h", "w3"], ["c3"]),
        helper.make_node("Add", ["c3", "b3"], ["y"]),  # a bias per channel, broadcast
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels_out, 2, 2])],
        [
            weights("w1", 8, 4, 3, 3),
            weights("w2", 8, 8, 5, 5),
            weights("w3", channels_out, 8, 3, 3),
            weights("b3", 1, channels_out, 1, 1),
        ],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def test_a_cnn_runs_on_the_vendor_npu_as_its_spec_says(sdk, tmp_path, capsys):
    model_path = tmp_path / "cnn.onnx"
    model_path.write_bytes(cnn())
    spec_path = [str(sdk / "spec")]

    rc, out, err = run_cli(
        capsys, "partition", model_path, "--backend", "npu,fused", "--spec-path", sdk / "spec", "--explain"
    )
    assert rc == 0, err
    lines = out.splitlines()
    five = next(k for k, line in enumerate(lines) if line.startswith("  c2 = conv"))
    assert lines[five].endswith("-> fused")
    assert lines[five + 1].strip() == "npu: when: in1.shape[2] <= 3 is false (in1.shape[2] = 5)"
    assert any(
        line.startswith("  r1 = conv, relu") and line.endswith("-> npu (pattern conv_relu)") for line in lines
    )
    assert any(line.startswith("  h = hard_swish") and line.endswith("-> npu") for line in lines)
    assert any(line.startswith("  y = add") and line.endswith("-> npu") for line in lines)  # broadcast

    program = byoc.parse_file(model_path, spec_path=spec_path)
    model = byoc.build(program, backends=["npu", "fused"], spec_path=spec_path)
    npu = next(m for m in model.manifest.modules if m.backend == "npu")
    assert len(npu.functions) == 2  # the npu runs two regions, on either side of fused's conv
    x = np.random.default_rng(3).uniform(-1, 1, (1, 4, 12, 12)).astype(np.float32)
    (got,) = model(x=x)
    (want,) = byoc.evaluate(program.functions[0], {"x": x}, spec_path=spec_path)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    (again,) = model(x=x)
    np.testing.assert_array_equal(again, got)
    assert (
        ctypes.CDLL(str(sdk / "lib" / "libnpu.so")).npu_open_count() == 1
    )  # one open, two functions, two calls


def test_the_sdks_message_reaches_python_and_the_command_line(sdk, tmp_path, capsys):
    model_path = tmp_path / "wide.onnx"
    model_path.write_bytes(cnn(channels_out=96))
    spec_path = [str(sdk / "spec")]
    model = byoc.build(
        byoc.parse_file(model_path, spec_path=spec_path), backends=["npu", "fused"], spec_path=spec_path
    )
    x = np.zeros((1, 4, 12, 12), np.float32)
    with pytest.raises(RuntimeFailure) as info:
        model(x=x)
    assert "it says: 96 output channels exceed the NPU's 64" in str(info.value)
    rc, out, err = run_cli(capsys, "run", model_path, "--backend", "npu,fused", "--spec-path", sdk / "spec")
    assert rc != 0 and "96 output channels exceed the NPU's 64" in out + err and "Traceback" not in err
