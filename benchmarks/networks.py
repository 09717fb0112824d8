"""Network speed: conv2d, dense, matmul and whole networks on byoc's library and C
backends against the libraries called directly, numpy, ONNX Runtime and TVM, and
against the machine's peak FLOP rate, all measured in one run.

Workloads (float32, batch 1):

* ``conv3x3``: conv2d 3x3, 64 -> 64 channels, 56x56, pads 1, + bias + relu (ResNet's
  first stage).
* ``dense``: x (1024, 1024) @ w (1024, 1024).T, no bias.
* ``dense_10``: the same at 10x10: the prepared call's overhead over the library's.
* ``basic_block``: examples/resnet_basic_block.graph at 64 channels, 56x56.
* ``conv3x3_int8``: the conv3x3 quantised, in ONNX's QDQ form (uint8 activations in
  and out, int8 weights per output channel, the int32 bias), as an int8 kernel.
* ``cnn_qdq``: examples/quantized/cnn_qdq.onnx (quantize_static's QDQ CNN) end to end.
* ``light_resnet50``, ``light_squeezenet``: the onnx wheel's light models end to end,
  their constant weights made seeded random (see network_workloads.py).
* ``matmul_attention``: matmul of a (12, 128, 64) by b (12, 64, 128), attention's
  Q @ K^T per head, both operands activations.
* ``matmul_linear``: matmul of a (1, 128, 768) by b (768, 3072), a transformer FFN's
  first product, b its weights.
* ``bert_base``, ``gpt2_small``, ``llama_style``: whole transformers at those models'
  shapes (batch 1, sequence 128), built by examples/zoo/zoo_transformers.py with
  seeded random weights (--tiny: one small layer, on ``fused`` only).

Systems: every byoc backend alone through its prepared call (one kernel), or the
--backend choices ``dnnl,fused``, ``cblas,fused`` and ``fused`` (the rest on the host)
through the graph executor (a network) or through the prepared call of the one kernel
they make (a matmul); oneDNN called directly from C (plain nchw/oihw, and format_any
with per-call reorders and weights reordered once; the inner product; the matmul
primitive, row-major); OpenBLAS's sgemm called directly (for a matmul one per batch,
or one over all rows when b is 2-D); numpy (matmul; im2col + matmul for conv); ONNX
Runtime (1 and 2 threads, IO binding); TVM relax, default and target-tuned. The peak
is an FMA microbenchmark on the widest vectors the CPU has (AVX-512, else AVX2), on 1
and 2 threads, timed with the conv, dense and matmul workloads (its fastest sample:
the best rate the machine attained in this run; float32's, so the int8 conv has no
fraction of it).

Every output is checked against byoc's numpy reference before anything is timed; a
byoc backend or an installed peer that fails to build, to run or to compute the right
result fails the suite (exit 1), as does a missed target. Figures are medians over
interleaved rounds in a seeded random order (benchmarks/timing.py); compare ratios, not
times.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import network_native as native
from . import peers
from .kernel_workloads import System, describe_error, machine_lacks, missing_library, split_choice
from .kernels import check_outputs
from .network_report import evaluate_targets, failures, markdown, ratios
from .network_systems import byoc_systems, numpy_system, ort_systems, tvm_systems
from .network_workloads import DEFAULT_JSON, LARGE_NETWORKS, Workload, make_workloads
from .timing import machine, measure, write_results

PEAK_THREADS = (1, 2)
SLOW_S = 0.25
"""A system whose call after the checked one takes longer is slow: timed in SLOW_ROUNDS
rounds of its own (interleaved among the slow ones), without an untimed call before
each sample. Until 2026-12-02 the checked call itself decided, and it includes one-time
work: GPT-2 on dnnl,fused (about 180 ms a call) was timed as slow, ONNX Runtime's
2-thread session (the same) as fast, with an untimed call before each of its samples."""
SLOW_ROUNDS = 7
"""(1 with --quick) 3 until 2026-12-02: a whole transformer's samples spread by a
seventh on the shared machine (GPT-2 on dnnl,fused: 191-222 ms in one run), and the
median of three moved its ratio to ONNX Runtime between 0.91x and 1.17x from run to
run; seven rounds cost about 30 s in a full run."""
MIN_BATCH_S = 0.01
"""A sample is a batch of calls lasting at least this long (a conv3x3: about 7 to 20
calls), so that it measures the steady state rather than the moments after the system
timed before it (2 ms until 2026-11-26: 2 to 6 calls)."""
PEER_BUDGET_S = 3.0
"""A peer whose checked call takes longer is not timed at all (listed under "not
run", with that call's time): untuned TVM on a 1024^3 dense takes about 11 s."""
TIMED_PER_CALL = ("median_s", "p25_s", "p75_s", "min_s")


def harnesses() -> dict[str, Any]:
    """Each C harness compiled: name -> CDLL, or a (status, why) pair when it is not
    installed (skipped) or does not build (a failure)."""
    out: dict[str, Any] = {}
    for name in ("fma_peak", *native.LIBRARIES):
        try:
            out[name] = native.compile_harness(name)
        except native.NotInstalled as exc:
            out[name] = ("skipped", str(exc))
        except Exception as exc:  # a harness that does not compile fails the suite
            out[name] = ("failed", describe_error(exc))
    return out


def native_systems(w: Workload, libs: dict[str, Any], skipped: dict, failed: dict) -> list[System]:
    gemm = ("fma_peak", "dnnl_direct", "blas_direct")
    # the FMA peak is float32's: an int8 conv (VNNI) is not measured against it
    wanted = {"conv": ("fma_peak", "dnnl_direct"), "conv_q8": ("dnnl_direct",), "dense": gemm, "matmul": gemm}
    systems: list[System] = []
    for name in wanted.get(w.kind, ()):
        if name == "fma_peak" and w.key == "dense_10":
            continue
        lib = libs[name]
        if isinstance(lib, tuple):
            (skipped if lib[0] == "skipped" else failed)[name] = lib[1]
            continue
        try:
            if name == "fma_peak":
                systems += native.peak_systems(lib, PEAK_THREADS)
            elif name == "dnnl_direct":
                systems += native.dnnl_systems(lib, w.kind, w.inputs, {**w.attrs, "flops": w.flops})
            else:
                systems.append(native.sgemm_system(lib, w.kind, w.inputs, {"flops": w.flops}))
        except Exception as exc:  # installed but cannot run this workload: a failure
            failed[name] = describe_error(exc)
    return systems


def peer_systems(w: Workload, tvm_networks: bool, skipped: dict, failed: dict, not_run: dict) -> list[System]:
    systems: list[System] = []
    found = numpy_system(w)
    if found:
        systems.append(found)
    for name, make, (_, why) in (
        ("ONNX Runtime", ort_systems, peers.ort_module()),
        ("TVM", tvm_systems, peers.tvm_module()),
    ):
        if why is not None:
            skipped[name] = why
        elif name == "TVM" and w.key in LARGE_NETWORKS and not tvm_networks:
            not_run[name] = "untuned TVM takes seconds per whole-network call; --tvm-networks runs it"
        else:
            try:
                systems += make(w)
            except Exception as exc:  # installed, but cannot build this workload: a failure
                failed[name] = f"build failed: {describe_error(exc)}"
    return systems


def run_workload(w: Workload, catalog, libs, rounds, quick, min_batch_s, tvm_networks, log) -> dict[str, Any]:
    log(f"[networks] {w.key}: building")
    systems: list[System] = []
    not_applicable: dict[str, str] = {}
    skipped: dict[str, str] = {}
    failed: dict[str, str] = {}
    not_run: dict[str, str] = {}
    variants = (False, True) if w.constant_program is not None else (False,)
    for backends, constant in ((b, c) for b in w.backends for c in variants):
        names, _, label = split_choice(backends)
        why = missing_library(names) or (machine_lacks(names[0], w.program) if len(names) == 1 else None)
        if why:
            skipped[f"byoc {label}"] = why
            continue
        try:
            found, reason = byoc_systems(w, backends, catalog, constant)
        except Exception as exc:  # a failed build, or built but not callable: a failure
            found, reason = [], None
            failed[f"byoc {label}" + (", constant weights" if constant else "")] = describe_error(exc)
        systems += found
        if reason:
            not_applicable[label + (", constant weights" if constant else "")] = reason
    systems += native_systems(w, libs, skipped, failed)
    systems += peer_systems(w, tvm_networks, skipped, failed, not_run)
    log(f"[networks] {w.key}: checking {len(systems)} systems")
    checks, took = {}, {}
    for s in systems:
        start = time.perf_counter()
        checks.update(check_outputs([s], w.expected, failed))
        took[s.name] = time.perf_counter() - start
    for s in systems:
        if s.group == "peer" and took[s.name] > PEER_BUDGET_S and s.name not in failed:
            not_run[s.name] = (
                f"checked, but one call took {took[s.name]:.1f} s (over the {PEER_BUDGET_S:.0f} s budget)"
            )
    systems = [s for s in systems if s.name not in failed and s.name not in not_run]
    # slow or not by a second call: the checked call also pays for one-time work (a
    # library's primitives made and its weights packed on first use)
    again = {s.name: s.bench.timer().timeit(1) for s in systems}
    slow = [s for s in systems if again[s.name] > SLOW_S]
    fast = [s for s in systems if s not in slow]
    slow_rounds = 1 if quick else SLOW_ROUNDS
    log(f"[networks] {w.key}: timing {len(fast)} systems x {rounds} rounds, {len(slow)} slow x {slow_rounds}")
    stats = measure({s.name: s.bench for s in fast}, rounds, min_batch_s)
    stats.update(measure({s.name: s.bench for s in slow}, min(rounds, slow_rounds), min_batch_s, warm=False))
    rows = {}
    for s in systems:
        per_call = s.info.get("per_call", 1)
        st = {k: (v / per_call if k in TIMED_PER_CALL else v) for k, v in stats[s.name].items()}
        check = checks.get(s.name, {"correct": None, "max_abs_error": None})
        rows[s.name] = {"group": s.group, "backend": s.backend, "path": s.path, **st, **check, **s.info}
    result = {
        "title": w.title,
        "kind": w.kind,
        "flops": w.flops,
        "systems": rows,
        "not_applicable": not_applicable,
        "skipped": skipped,
        "failed": failed,
        "not_run": not_run,
    }
    result.update(ratios(result))
    return result


def run(
    quick: bool = False,
    tiny: bool = False,
    rounds: int | None = None,
    only: list[str] | None = None,
    tvm_networks: bool = False,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> dict[str, Any]:
    import byoc.api as api

    catalog = api.load_catalog()
    rounds = rounds or (3 if quick else 11)
    min_batch_s = 0.001 if quick else MIN_BATCH_S
    results: dict[str, Any] = {
        "suite": "networks",
        "mode": {"quick": quick, "tiny": tiny},
        "rounds": rounds,
        "min_batch_s": min_batch_s,
        "machine": machine(),
        "peers": peers.versions(),
        "workloads": {},
    }
    libs = harnesses()
    with tempfile.TemporaryDirectory(prefix="byoc-networks-") as workdir:
        for w in make_workloads(tiny, Path(workdir)):
            if only and w.key not in only:
                continue
            results["workloads"][w.key] = run_workload(
                w, catalog, libs, rounds, quick, min_batch_s, tvm_networks, log
            )
    # a probe sample slowed by a busy core must not lower one workload's peak: every
    # fraction of peak is taken against the best rate of the whole run
    run_peak = max((w["peak_flop_per_s"] or 0.0 for w in results["workloads"].values()), default=0.0)
    for w in results["workloads"].values():
        w.update(ratios(w, (run_peak or None) if w["kind"] != "conv_q8" else None))
    results["targets"] = evaluate_targets(results, tiny)
    results["failures"] = failures(results)
    return results


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks networks", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds instead of 11 (a smoke run)")
    ap.add_argument(
        "--tiny", action="store_true", help="tiny sizes and tiny_cnn.onnx for the networks (tests)"
    )
    ap.add_argument("--rounds", type=int, help="rounds per workload (default 11, --quick 3)")
    ap.add_argument("--workload", action="append", help="run only this workload (repeatable)")
    ap.add_argument(
        "--tvm-networks",
        action="store_true",
        help="also run untuned TVM on the light networks and the transformers",
    )
    ap.add_argument("--json", default=DEFAULT_JSON, help=f"where to write the JSON (default {DEFAULT_JSON})")
    args = ap.parse_args(argv)
    results = run(args.quick, args.tiny, args.rounds, args.workload, args.tvm_networks)
    print(markdown(results))
    write_results(results, args.json)
    return 1 if results["failures"] or any(t["met"] is False for t in results["targets"]) else 0
