"""The networks benchmark suite runs end to end at tiny sizes, checks every system's
result before timing it, and fails on a wrong one.

Smoke tests only: nothing about speed is asserted (benchmarks measure; tests never
time anything).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from dnnl_support import int8_refusal
from libraries import missing_library

pytestmark = pytest.mark.network

REPO = Path(__file__).resolve().parents[1]
MATMULS = ("matmul_attention", "matmul_linear")
TRANSFORMERS = ("bert_base", "gpt2_small", "llama_style")
WORKLOADS = {
    "conv3x3",
    "dense",
    "dense_10",
    "basic_block",
    "conv3x3_int8",
    "cnn_qdq",
    "tiny_cnn",
    *MATMULS,
    "attention",
    *TRANSFORMERS,
}


def test_networks_suite_quick_tiny_checks_every_system(tmp_path):
    from benchmarks.network_report import TARGETS

    out = tmp_path / "networks.json"
    env = {**os.environ, "BYOC_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "benchmarks", "networks", "--quick", "--tiny", "--rounds", "2"]
    proc = subprocess.run(
        [*command, "--json", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "### network targets" in proc.stdout
    data = json.loads(out.read_text())
    assert data["suite"] == "networks" and data["mode"] == {"quick": True, "tiny": True}
    assert set(data["workloads"]) == WORKLOADS
    # every target is recorded, and on tiny sizes none is evaluated
    assert [t["target"] for t in data["targets"]] == [t[-1] for t in TARGETS]
    assert all(t["met"] is None and "tiny" in t["note"] for t in data["targets"])
    assert data["failures"] == []
    for key, w in data["workloads"].items():
        assert w["failed"] == {}, key
        timed = {name: r for name, r in w["systems"].items() if r["group"] != "peak"}
        # every timed system's output was compared with the numpy reference, and matched,
        # but for a library whose documentation says it differs on this CPU (int8 without
        # VNNI): never one of byoc's
        excused = {name for name, r in timed.items() if r.get("caveat")}
        assert all(
            timed[name]["group"] != "byoc" and "without VNNI" in timed[name]["caveat"] for name in excused
        )
        assert timed and all(r["correct"] is True for name, r in timed.items() if name not in excused), key
        assert all(r["median_s"] > 0 for r in w["systems"].values())
        # every byoc backend choice is measured or says why it cannot express the workload
        measured = {r["backend"] for r in timed.values() if r["group"] == "byoc"}
        assert measured and all(
            r["path"] in ("prepared", "executor") for r in timed.values() if r["group"] == "byoc"
        )
        assert measured.isdisjoint(w["not_applicable"])
    conv = data["workloads"]["conv3x3"]
    assert {r["threads"] for r in conv["systems"].values() if r["group"] == "peak"} == {1, 2}
    assert conv["peak_flop_per_s"] > 0 and conv["systems"]["byoc fused prepared"]["x_peak"] > 0
    # fused with its dot products in double is a system of its own, built with the option
    assert conv["systems"]["byoc fused[float32_dots=false] prepared"]["x_peak"] > 0
    dense = data["workloads"]["dense_10"]
    assert "numpy" in {r["path"] for r in dense["systems"].values()}
    # a library backend and its direct harness run where the library is installed, and
    # are skipped with the install hint where it is not
    if missing_library("dnnl"):
        assert "pip install 'byoc-codegen[dnnl]'" in conv["skipped"]["byoc dnnl"]
    else:
        assert {"dnnl_plain", "dnnl_any"} <= {r["path"] for r in conv["systems"].values()}
        assert "dnnl_plain" in {r["path"] for r in dense["systems"].values()}
        # the int8 conv: byoc's int8 kernel and oneDNN's int8 convolution called directly,
        # both within one quantum of byoc's reference; no fraction of float32's peak
        # (where oneDNN's int8 sums saturate, without VNNI, the dnnl backend takes no int8
        # and says so)
        q8 = data["workloads"]["conv3x3_int8"]
        assert {"prepared", "dnnl_any"} <= {r["path"] for r in q8["systems"].values()}
        if int8_refusal():
            assert "dnnl does not compute uint8 on this machine" in q8["skipped"]["byoc dnnl"]
        else:
            assert "byoc dnnl prepared" in q8["systems"]
        assert all(r["x_peak"] is None for r in q8["systems"].values())
    if missing_library("cblas"):
        assert "pip install 'byoc-codegen[blas]'" in conv["skipped"]["byoc cblas"]
    else:
        assert "cblas" in conv["not_applicable"]  # cblas has no conv
        assert "sgemm" in {r["path"] for r in dense["systems"].values()}
        assert dense["systems"]["byoc cblas prepared"]["overhead_sgemm_s"] is not None
    for key in MATMULS:
        _check_matmul_rows(data, key)
    # the transformers run end to end (at tiny sizes, on fused alone: see
    # TINY_TRANSFORMER) against ONNX Runtime; untuned TVM only with --tvm-networks
    for key in TRANSFORMERS:
        w = data["workloads"][key]
        byoc_rows = {r["backend"] for r in w["systems"].values() if r["group"] == "byoc"}
        assert byoc_rows == {"fused"}, key
        assert "TVM" in w["not_run"] or not data["peers"]["tvm"], key
        assert "(tiny sizes)" in w["title"], key
    # attention alone runs on every --backend choice, against ONNX Runtime
    attention = data["workloads"]["attention"]
    byoc_rows = {r["backend"] for r in attention["systems"].values() if r["group"] == "byoc"}
    available = {",".join(b) for b in (("dnnl", "fused"), ("cblas", "fused")) if not missing_library(b[0])}
    assert byoc_rows == {"fused", *available}
    assert not data["peers"]["onnxruntime"] or any(
        r["path"] == "ort_2" for r in attention["systems"].values()
    )


def _check_matmul_rows(data: dict, key: str) -> None:
    """A matmul workload has a row for every system that is available here (the byoc
    --backend choices, each one kernel on its library; the libraries called directly;
    numpy; ONNX Runtime and TVM when installed) and none other, besides the peak's."""
    w = data["workloads"][key]
    rows = {name: r for name, r in w["systems"].items() if r["group"] != "peak"}
    expected = {"byoc fused prepared", "byoc fused[float32_dots=false] prepared", "numpy matmul (out=)"}
    for library, direct in (
        ("dnnl", "oneDNN direct (matmul, row-major)"),
        ("cblas", "OpenBLAS cblas_sgemm direct"),
    ):
        if missing_library(library):
            assert "pip install" in w["skipped"][f"byoc {library},fused"], key
        else:
            expected |= {f"byoc {library},fused prepared", direct}
            assert rows[f"byoc {library},fused prepared"]["symbol"].startswith(f"{library}_"), key
    if data["peers"]["onnxruntime"]:
        threads = sorted({1, os.cpu_count() or 1})
        expected |= {f"ONNX Runtime ({n} thread{'s' * (n > 1)}, IO binding)" for n in threads}
    if data["peers"]["tvm"]:
        expected |= {"TVM relax (default)", "TVM relax (target-tuned)"}
    assert set(rows) == expected, key
    assert rows["byoc fused prepared"]["symbol"].startswith("fused_"), key
    assert rows["byoc fused[float32_dots=false] prepared"]["backend"] == "fused[float32_dots=false]", key
    assert w["flops"] > 0 and all(r["gflop_per_s"] > 0 for r in rows.values()), key


@pytest.mark.parametrize(
    "a_shape, b_shape", [((3, 4, 5), (5, 6)), ((4, 5), (2, 5, 6)), ((2, 3, 4, 5), (1, 1, 5, 6))]
)
def test_direct_matmul_harnesses_compute_numpys_matmul(a_shape, b_shape, tmp_path, monkeypatch):
    """The oneDNN and sgemm harnesses broadcast batch dims as numpy does (b 2-D: one
    sgemm over all rows; a 2-D: its rows reused for every batch)."""
    from benchmarks import network_native as native

    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(1)
    arrays = {
        "a": rng.uniform(-1, 1, a_shape).astype(np.float32),
        "b": rng.uniform(-1, 1, b_shape).astype(np.float32),
    }
    expected = np.matmul(arrays["a"], arrays["b"])
    attrs = {"flops": 1, "out_shape": expected.shape}
    systems = []
    if missing_library("dnnl") is None:
        systems += native.dnnl_systems(native.compile_harness("dnnl_direct"), "matmul", arrays, attrs)
    if missing_library("cblas") is None:
        systems.append(native.sgemm_system(native.compile_harness("blas_direct"), "matmul", arrays, attrs))
    if not systems:
        pytest.skip("neither oneDNN nor OpenBLAS is installed")
    for s in systems:
        np.testing.assert_allclose(s.output(), expected, rtol=1e-5, atol=1e-5, err_msg=s.name)


def test_a_wrong_result_fails_the_suite_before_timing(tmp_path, monkeypatch, capsys):
    from benchmarks import network_systems, networks

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    real = network_systems.conv_im2col
    monkeypatch.setattr(network_systems, "conv_im2col", lambda x, w, b: real(x, w, b) * 0.5)
    out = tmp_path / "networks.json"
    argv = ["--tiny", "--rounds", "1", "--workload", "conv3x3", "--json", str(out)]
    assert networks.main(argv) == 1
    data = json.loads(out.read_text())
    (failure,) = data["failures"]
    assert failure["system"] == "numpy im2col + matmul" and "wrong result" in failure["error"]
    conv = data["workloads"]["conv3x3"]
    assert "numpy im2col + matmul" not in conv["systems"]  # not timed
    assert "byoc fused prepared" in conv["systems"]
    assert ("byoc dnnl prepared" in conv["systems"]) == (missing_library("dnnl") is None)
    assert "| conv3x3 | numpy im2col + matmul | wrong result" in capsys.readouterr().out


def _int8_model():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [helper.make_tensor("s", TensorProto.FLOAT, [], [0.5])],
    )
    return onnx, helper.make_model(graph)


@pytest.mark.parametrize(
    "flags, int8, caveat",
    [
        ({"avx2", "fma"}, True, True),  # AVX2 without VNNI: ORT's u8s8 kernels saturate
        ({"avx2", "avx512f", "avx512_vnni"}, True, False),
        ({"avx2", "avx_vnni"}, True, False),
        ({"avx2", "fma"}, False, False),  # a float model: no integer kernels
        (set(), True, False),  # not x86 (or no /proc/cpuinfo)
    ],
)
def test_onnxruntime_int8_caveat_follows_the_cpu_and_the_model(monkeypatch, flags, int8, caveat):
    from benchmarks import peers

    _, model = _int8_model()
    if not int8:
        model.graph.node[0].op_type = "Relu"
    monkeypatch.setattr(peers, "cpu_flags", lambda: frozenset(flags))
    assert (peers.ort_int8_caveat(model) is not None) == caveat


def test_a_peer_with_a_caveat_is_checked_shown_and_timed_but_a_byoc_system_is_not_excused():
    from benchmarks.kernel_workloads import System
    from benchmarks.kernels import check_outputs
    from benchmarks.timing import Bench

    expected = np.arange(6, dtype=np.uint8)
    wrong = expected + 3

    def system(name: str, group: str) -> System:
        return System(name, group, Bench.of(lambda: None), lambda: wrong, info={"caveat": "documented"})

    failed: dict[str, str] = {}
    checks = check_outputs([system("peer", "peer"), system("byoc x", "byoc")], expected, failed)
    assert checks["peer"] == {"correct": False, "max_abs_error": 3.0}
    assert "peer" not in failed  # timed, its check column says why it differs
    assert failed["byoc x"].startswith("wrong result: max abs error 3")


def test_a_backend_choice_may_carry_build_options():
    from benchmarks.kernel_workloads import split_choice

    assert split_choice(("dnnl", "fused")) == (("dnnl", "fused"), {}, "dnnl,fused")
    assert split_choice(("fused", "fused.float32_dots=true")) == (
        ("fused",),
        {"fused.float32_dots": "true"},
        "fused[float32_dots]",
    )
    assert split_choice(("fused", "fused.float32_dots=false"))[2] == "fused[float32_dots=false]"
