"""A vendor's NPU backend out of tree, end to end: spec/README.md's worked example
"an NPU SDK, end to end", whose npu.yaml, ops.yaml and commands this file runs.

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
import re
import shlex
import subprocess

import numpy as np
import pytest
from conftest import run_cli
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc.errors import RuntimeFailure
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS

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

README = SHIPPED_BACKENDS.parent / "README.md"
MARKER = "<!-- the blocks below are run by tests/test_vendor_workflow.py -->"


def readme_blocks() -> tuple[str, str, list[str]]:
    """spec/README.md's worked example: npu.yaml, ops.yaml and its commands."""
    text = README.read_text(encoding="utf-8")
    text = text[text.index(MARKER) :]
    spec, ops = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)[:2]
    commands = re.findall(r"```sh\n(.*?)```", text, flags=re.S)[0].splitlines()
    return spec, ops, commands


SPEC, OPS, COMMANDS = readme_blocks()
assert f"domain: {DOMAIN}" in OPS  # the model below writes its HardSwish in that domain


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


def test_the_readme_commands_run_as_it_says(sdk, tmp_path, capsys, monkeypatch):
    """spec/README.md's commands, run where the SDK and the model are: the explanation,
    a profiled run that matches the reference, and a sweep that passes."""
    (sdk.parent / "cnn.onnx").write_bytes(cnn())
    monkeypatch.chdir(sdk.parent)
    explain, run, sweep = (shlex.split(c)[1:] for c in COMMANDS)
    rc, out, err = run_cli(capsys, *explain)
    assert rc == 0, err
    assert "npu: when: in1.shape[2] <= 3 is false (in1.shape[2] = 5)" in out
    rc, out, err = run_cli(capsys, *run)
    assert rc == 0 and "every output matches" in out, out + err
    assert "kernel" in out and "region" in out  # the profile table
    rc, out, err = run_cli(capsys, *sweep)
    assert rc == 0, out + err
    result = re.search(r"^result: ([0-9]+) passed, 0 failed", out, flags=re.M)
    assert result is not None and int(result.group(1)) > 0, out
    assert re.search(r"^  hard_swish +float32 .* 0 +0$", out, flags=re.M), out  # the own op, swept
