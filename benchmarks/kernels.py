"""Kernel speed: every byoc backend against numpy, numexpr, TVM, ONNX Runtime and the
best attainable memory speed, all measured in one run.

Workloads (float32):

* ``subgraph_10``: the BYOC guide's subgraph ((x + w0) - w1) * w2 at 10x10: call
  overhead. Also the prepared-call fast path against raw tvm_ffi calls.
* ``subgraph_4096``: the same at 4096x4096: memory bandwidth.
* ``chain64``: a chain of 64 elementwise ops over 1M elements (1024x1024).
* ``bias_relu``: relu(x + bias), x [4096, 1024], bias [1024] broadcast.
* ``whole_graph``: the guide's whole graph at 10x10 (two regions, host ops, concat),
  run through ``model(**inputs)`` and through the graph executor's ``run()``.

Systems: every backend that ``byoc.api.list_backends()`` finds (so new ones join by
themselves), each in its own explicit region holding the whole workload; a backend
whose spec cannot express a workload (a GraphError) is listed as not applicable, with
the reason. Compiled backends are timed through ``module.prepare(symbol, *arrays)``
(the kernel timing) and through ``module.get_function(symbol)`` (the checked, normal
path); interpreters through ``get_function``. Peers (benchmarks/peers.py): numpy eager
(the plain expression), numpy with ``out=`` into preallocated buffers, numexpr, TVM
relax (default and tuned) and ONNX Runtime (1 and 2 threads) when installed. The
memory bound (benchmarks/memory_bound.py) is the fastest of a copy and a streaming
triad over the bytes the kernel moves, on 1 and 2 threads.

Every system's output is checked against numpy's before it is timed. A byoc backend
or an installed peer that fails to build, to run or to compute the right result is a
failure: it is listed with its error and the suite exits 1. Figures are medians over
interleaved rounds in a seeded random order (see benchmarks/timing.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from . import memory_bound, peers
from .kernel_report import chart, evaluate_targets, failures, markdown
from .kernel_systems import backend_names, byoc_systems, nop_system, peer_systems
from .kernel_workloads import DEFAULT_JSON, System, describe_error, make_workloads, missing_library
from .timing import machine, measure, write_results

# -------------------------------------------------------------------------- running


def run_workload(w, variants, catalog, rounds, min_batch_s, log, probes) -> dict[str, Any]:
    log(f"[kernels] {w.key}: building")
    systems: list[System] = []
    not_applicable: dict[str, str] = {}
    skipped: dict[str, str] = {}
    failed: dict[str, str] = {}
    for label, backend, options in variants:
        why = missing_library([backend])
        if why:
            skipped[label] = why
            continue
        try:
            found, reason = byoc_systems(w, label, backend, options, catalog)
        except Exception as exc:  # a failed build, or built but not callable: a failure
            found, reason = [], None
            failed[label] = describe_error(exc)
        systems += found
        if reason:
            not_applicable[label] = reason
    if w.key == "subgraph_10":
        nop = nop_system(len(w.inputs) + 1)
        if nop:
            systems.append(nop)
    systems += peer_systems(w, skipped, failed)
    caches = memory_bound.cache_sizes()
    if w.bandwidth:
        systems += memory_bound.bound_systems(w, probes)
    checks = check_outputs(systems, w.expected(), failed)
    systems = [s for s in systems if s.name not in failed]
    log(f"[kernels] {w.key}: timing {len(systems)} systems x {rounds} rounds")
    stats = measure({s.name: s.bench for s in systems}, rounds, min_batch_s)
    numpy_t = stats["numpy eager"]["median_s"]
    bounds = {s.name: stats[s.name]["median_s"] for s in systems if s.group == "bound"}
    bound_name = min(bounds, key=bounds.get) if bounds else None
    bound_t = bounds[bound_name] if bound_name else None
    rows = {}
    for s in systems:
        st = stats[s.name]
        t = st["median_s"]
        rows[s.name] = {
            "group": s.group,
            "backend": s.backend,
            "path": s.path,
            **st,
            "speedup_vs_numpy": numpy_t / t,
            "x_bound": t / bound_t if bound_t else None,
            **checks.get(s.name, {"correct": None, "max_abs_error": None}),
            **s.info,
        }
    return {
        "title": w.title,
        "shape": w.shape,
        "bytes_moved": w.bytes_moved,
        "residency": memory_bound.residency(w.bytes_moved, caches) if w.bandwidth else None,
        "bound_system": bound_name,
        "bound_s": bound_t,
        "bound_gb_per_s": w.bytes_moved / bound_t / 1e9 if bound_t else None,
        "systems": rows,
        "not_applicable": not_applicable,
        "skipped": skipped,
        "failed": failed,
    }


def check_outputs(systems: list[System], expected: np.ndarray, failed: dict[str, str]) -> dict[str, Any]:
    """Run every system that has an output once and compare it with numpy's; a system
    that raises or computes a wrong result goes to ``failed`` and is not timed, unless
    it is not byoc's and its ``info`` gives a ``caveat`` for it (a deviation its own
    documentation states for this CPU): then its check says so and it is timed."""
    checks: dict[str, dict[str, Any]] = {}
    for s in systems:
        if s.output is None:
            continue
        try:
            got = np.asarray(s.output())
        except Exception as exc:  # a system that cannot run is a failure, not timed
            failed[s.name] = describe_error(exc)
            continue
        same_shape = got.shape == expected.shape
        err = float(np.max(np.abs(got.astype(np.float64) - expected))) if same_shape and got.size else None
        scale = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
        # an integer (quantised) result may differ by one step where the system sums or
        # scales floats in another order, which ONNX leaves to the implementation
        limit = 1.0 if np.issubdtype(expected.dtype, np.integer) else 1e-4 * scale
        ok = same_shape and got.dtype == expected.dtype and (err is None or err <= limit)
        checks[s.name] = {"correct": bool(ok), "max_abs_error": err}
        if not ok and s.group != "byoc" and s.info.get("caveat"):
            continue  # shown with its caveat (the report's check column), and timed
        if not ok:
            why = f"max abs error {err:.3g}" if err is not None else f"got {got.dtype}{list(got.shape)}"
            failed[s.name] = f"wrong result: {why}, expected {expected.dtype}{list(expected.shape)}"
    return checks


def call_overhead(result: dict[str, Any]) -> dict[str, Any]:
    """The prepared-call fast path at 10x10, per compiled backend, against raw tvm_ffi."""
    rows = result["systems"]
    nop = next((r["median_s"] for r in rows.values() if r["path"] == "nop"), None)
    out: dict[str, Any] = {"tvm_ffi_nop_s": nop, "numpy_eager_s": rows["numpy eager"]["median_s"]}
    backends: dict[str, Any] = {}
    for r in rows.values():
        if r["path"] in ("prepared", "get_function", "raw_tensors", "raw_numpy"):
            backends.setdefault(r["label"], {})[r["path"] + "_s"] = r["median_s"]
    for label, b in list(backends.items()):
        if "prepared_s" not in b or "raw_tensors_s" not in b:
            del backends[label]
            continue
        b["prepared_overhead_s"] = b["prepared_s"] - b["raw_tensors_s"]
    out["backends"] = backends
    return out


def _variants(extra: list[str]) -> list[tuple[str, str, dict[str, str]]]:
    """(label, backend, options): every listed backend as shipped, then --variant ones."""
    names, _ = backend_names()
    found = [(name, name, {}) for name in names]
    for text in extra:
        backend, _, opts = text.partition(":")
        options = dict(kv.split("=", 1) for kv in opts.split(",") if kv)
        found.append((f"{backend}[{opts}]", backend, options))
    return found


def run(
    quick: bool = False,
    tiny: bool = False,
    rounds: int | None = None,
    only: list[str] | None = None,
    extra_variants: list[str] | None = None,
    chain_shape: tuple[int, int] | None = None,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> dict[str, Any]:
    import byoc.api as api

    catalog = api.load_catalog()
    variants = _variants(extra_variants or [])
    names, list_error = backend_names()
    rounds = rounds or (7 if quick else 31)
    min_batch_s = 0.001 if quick else 0.002
    results: dict[str, Any] = {
        "suite": "kernels",
        "mode": {"quick": quick, "tiny": tiny},
        "rounds": rounds,
        "min_batch_s": min_batch_s,
        "machine": {**machine(), "caches": memory_bound.cache_sizes()},
        "peers": peers.versions(),
        "backends": names,
        "backends_error": list_error,
        "workloads": {},
    }
    probes = memory_bound.harness()
    for w in make_workloads(tiny, chain_shape):
        if only and w.key not in only:
            continue
        results["workloads"][w.key] = run_workload(w, variants, catalog, rounds, min_batch_s, log, probes)
    if "subgraph_10" in results["workloads"]:
        results["call_overhead"] = call_overhead(results["workloads"]["subgraph_10"])
    results["targets"] = evaluate_targets(results, tiny)
    results["failures"] = failures(results)
    return results


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks kernels", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="7 rounds instead of 31 (a smoke run)")
    ap.add_argument("--tiny", action="store_true", help="tiny arrays instead of the workload sizes (tests)")
    ap.add_argument("--rounds", type=int, help="rounds per workload (default 31, --quick 7)")
    ap.add_argument("--workload", action="append", help="run only this workload (repeatable)")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="BACKEND:KEY=VALUE[,KEY=VALUE]",
        help="also time BACKEND built with these options, e.g. ccompiler:opt_level=3 (repeatable)",
    )
    ap.add_argument(
        "--chain-shape",
        type=int,
        nargs=2,
        metavar=("ROWS", "COLS"),
        help="chain64's shape (default 1024 1024)",
    )
    ap.add_argument("--json", default=DEFAULT_JSON, help=f"where to write the JSON (default {DEFAULT_JSON})")
    ap.add_argument("--no-chart", action="store_true", help="do not write the PNG chart")
    args = ap.parse_args(argv)
    chain = tuple(args.chain_shape) if args.chain_shape else None
    results = run(args.quick, args.tiny, args.rounds, args.workload, args.variant, chain_shape=chain)
    print(markdown(results))
    out = write_results(results, args.json)
    if not args.no_chart:
        png = chart(results, out.with_suffix(".png"))
        print(f"wrote {png}" if png else "no chart: matplotlib is not installed")
    return 1 if results["failures"] or any(t["met"] is False for t in results["targets"]) else 0
