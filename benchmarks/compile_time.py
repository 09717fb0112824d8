"""Compile time of large regions: whole-process ``byoc run`` of one region of N ops.

For every C-family backend found (kinds ``c_source``, ``c_fused`` and ``engine``),
each measurement writes a graph whose one explicit region holds N elementwise ops
(``benchmarks.workloads.region_text``), then runs ``byoc run`` on it in a fresh
process with a fresh, empty ``$BYOC_CACHE_DIR``: parse, generate, compile, load, run
and check, all cold. Sizes are 100, 1,000 and 10,000 ops, measured in interleaved
rounds; a measurement that exceeds the timeout (default 300 s) is recorded as such
and that size is not tried again for that backend.

Target: compile time stays near-linear. Wall time grows at most 12x per 10x ops on
every step, for every backend, with no timeout or failure. The stage times that
``byoc run`` prints show where the time goes (gcc's share is ``compile``).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .timing import fmt_time, machine, write_results
from .toolchain import byoc_command, parse_stages
from .workloads import REGION_OPS, region_text

GROWTH_LIMIT = 12.0
"""Most wall-time growth allowed per 10x ops (scaled for other size ratios)."""
C_KINDS = ("c_source", "c_fused", "engine")
DEFAULT_JSON = "benchmarks/results/compile_time.json"


def c_backends() -> tuple[list[str], dict[str, str]]:
    """The backends on the spec path whose generated code is compiled and that map every
    op of the regions, and, for the other compiled ones, why they cannot express them."""
    import byoc.api as api

    backends: list[str] = []
    not_expressible: dict[str, str] = {}
    for spec in api.list_backends():
        if spec.kind.name not in C_KINDS:
            continue
        missing = [op for op in REGION_OPS if op not in spec.ops]
        if missing:
            not_expressible[spec.name] = f"no op {', '.join(missing)}"
        else:
            backends.append(spec.name)
    return backends, not_expressible


def time_once(backend: str, nodes: int, timeout: float) -> dict[str, Any]:
    """One cold, whole-process ``byoc run`` of a ``nodes``-op region of ``backend``."""
    scratch = Path(tempfile.mkdtemp(prefix="byoc-bench-compile-"))
    try:
        graph = scratch / f"region_{nodes}.graph"
        graph.write_text(region_text(nodes, backend))
        env = {**os.environ, "BYOC_CACHE_DIR": str(scratch / "cache")}
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                byoc_command() + ["run", str(graph)], env=env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return {"wall_s": None, "error": f"timed out after {timeout:.0f} s"}
        wall = time.perf_counter() - start
        result: dict[str, Any] = {"wall_s": wall, "stages": parse_stages(proc.stdout)}
        if proc.returncode != 0:
            result["error"] = f"exit status {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}"
        return result
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(
    sizes: tuple[int, ...], repeats: int, timeout: float, backends: list[str], log=None
) -> dict[str, Any]:
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    samples: dict[str, dict[int, list[dict[str, Any]]]] = {b: {n: [] for n in sizes} for b in backends}
    for r in range(repeats):
        for backend in backends:
            for n in sizes:
                done = samples[backend][n]
                if any("error" in s for s in done):  # a timeout or failure is not retried
                    continue
                log(f"[compile] round {r + 1}/{repeats}: {backend}, {n:,} ops")
                done.append(time_once(backend, n, timeout))
    results: dict[str, Any] = {
        "suite": "compile",
        "machine": machine(),
        "repeats": repeats,
        "timeout_s": timeout,
        "growth_limit_per_10x": GROWTH_LIMIT,
        "backends": {},
    }
    for backend in backends:
        rows: dict[str, Any] = {}
        for n in sizes:
            items = samples[backend][n]
            walls = [s["wall_s"] for s in items if "error" not in s]
            stage_names = list(dict.fromkeys(k for s in items for k in s.get("stages", {})))
            rows[str(n)] = {
                "median_s": statistics.median(walls) if walls else None,
                "stages_median_s": {
                    k: statistics.median(s["stages"][k] for s in items if k in s.get("stages", {}))
                    for k in stage_names
                },
                "errors": [s["error"] for s in items if "error" in s],
            }
        steps = []
        for a, b in zip(sizes, sizes[1:]):
            ta, tb = rows[str(a)]["median_s"], rows[str(b)]["median_s"]
            limit = GROWTH_LIMIT ** math.log10(b / a)
            growth = tb / ta if ta and tb else None
            steps.append({"from": a, "to": b, "growth": growth, "limit": limit})
        met = all(s["growth"] is not None and s["growth"] <= s["limit"] for s in steps) and not any(
            row["errors"] for row in rows.values()
        )
        results["backends"][backend] = {"sizes": rows, "growth_steps": steps, "met": met}
    results["targets"] = [
        {
            "target": f"{backend}: whole-process cold `byoc run` grows <= {GROWTH_LIMIT:.0f}x per 10x ops "
            f"({', '.join(f'{n:,}' for n in sizes)} ops)",
            "value": max((s["growth"] or float("inf")) for s in r["growth_steps"])
            if r["growth_steps"]
            else 1.0,
            "met": r["met"],
        }
        for backend, r in results["backends"].items()
    ]
    return results


def markdown(results: dict[str, Any]) -> str:
    stages = ("parse", "generate", "compile")
    lines = [
        "| backend | ops | wall time (median) | " + " | ".join(stages) + " | growth | limit |",
        "| --- | ---: | ---: | " + " | ".join("---:" for _ in stages) + " | ---: | ---: |",
    ]
    for backend, r in results["backends"].items():
        steps = {s["to"]: s for s in r["growth_steps"]}
        for n, row in r["sizes"].items():
            step = steps.get(int(n))
            growth = "" if step is None else ("-" if step["growth"] is None else f"{step['growth']:.1f}x")
            limit = "" if step is None else f"{step['limit']:.0f}x"
            wall = fmt_time(row["median_s"]) if row["median_s"] is not None else row["errors"][0]
            cells = " | ".join(fmt_time(row["stages_median_s"].get(s)) for s in stages)
            lines.append(f"| {backend} | {int(n):,} | {wall} | {cells} | {growth} | {limit} |")
        lines.append(f"| {backend} | | target: {'met' if r['met'] else 'MISSED'} | | | | | |")
    lines.append(f"\n{results['repeats']} interleaved round(s); medians; cold cache, whole process")
    for backend, why in results.get("not_expressible", {}).items():
        lines.append(f"not expressible by {backend} (the regions are {', '.join(REGION_OPS)}): {why}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks compile", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    ap.add_argument(
        "--sizes", type=int, nargs="+", help="op counts (default 100 1000 10000; --quick 100 1000)"
    )
    ap.add_argument("--repeats", type=int, help="interleaved rounds (default 3, --quick 1)")
    ap.add_argument(
        "--timeout", type=float, default=300.0, help="seconds before a run counts as a miss (300)"
    )
    ap.add_argument(
        "--backend", action="append", help="only these backends (repeatable; default every C one)"
    )
    ap.add_argument("--quick", action="store_true", help="a smoke run: one round, 100 and 1,000 ops")
    ap.add_argument("--json", default=DEFAULT_JSON, help=f"where to write the JSON (default {DEFAULT_JSON})")
    args = ap.parse_args(argv)
    sizes = tuple(args.sizes or ([100, 1_000] if args.quick else [100, 1_000, 10_000]))
    backends, not_expressible = (args.backend, {}) if args.backend else c_backends()
    results = run(sizes, args.repeats or (1 if args.quick else 3), args.timeout, backends)
    results["not_expressible"] = not_expressible
    print(markdown(results))
    write_results(results, args.json)
    return 0 if all(t["met"] for t in results["targets"]) else 1
