"""C source code generation throughput, and how it grows with the graph.

Each measurement runs in a fresh process: parse a graph whose one @ccompiler region
holds N ops (not timed), then time lowering plus the c_source generator. Target
(issue 4): >= 50k nodes/s at 10k nodes; growth time(10x nodes) <= 11x.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

TARGET = 50_000

_CHILD = """
import gc, time
from benchmarks.workloads import region_text
import byoc.api as api
from byoc.generator.pipeline import generate
catalog = api.load_catalog()
program = api.parse(region_text({nodes}), "graph", catalog=catalog)
generate(api.parse(region_text(8), "graph", catalog=catalog), catalog, api.load_backend)  # warm up
gc.collect()
t = time.perf_counter()
lowered, artifacts = generate(program, catalog, api.load_backend)
print(time.perf_counter() - t)
"""


def time_once(nodes: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(nodes=nodes)], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


def run(sizes: tuple[int, ...], repeats: int) -> dict:
    rows = {}
    for n in sizes:
        t = statistics.median(time_once(n) for _ in range(repeats))
        rows[n] = {"median_s": t, "nodes_per_s": n / t}
    growth = rows[sizes[-1]]["median_s"] / rows[sizes[0]]["median_s"]
    return {
        "unit": "nodes per second (median)",
        "repeats": repeats,
        "sizes": rows,
        "growth": growth,
        "growth_limit": 1.1 * sizes[-1] / sizes[0],
        "target_nodes_per_s": TARGET,
        "meets_target": rows[sizes[0]]["nodes_per_s"] >= TARGET and growth <= 1.1 * sizes[-1] / sizes[0],
    }


def markdown(r: dict) -> str:
    lines = ["| c_source codegen | nodes | median time | nodes/s |", "| --- | ---: | ---: | ---: |"]
    for n, row in r["sizes"].items():
        lines.append(
            f"| lower + generate | {n:,} | {row['median_s'] * 1000:.0f} ms | {row['nodes_per_s']:,.0f} |"
        )
    lines.append(
        f"\ntarget >= {r['target_nodes_per_s']:,} nodes/s at the smallest size; growth {r['growth']:.2f}x "
        f"(limit {r['growth_limit']:.0f}x)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse
    from pathlib import Path

    ap = argparse.ArgumentParser(prog="python -m benchmarks codegen", description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--json", default="benchmarks/results/codegen_speed.json")
    args = ap.parse_args(argv)
    results = run(tuple(args.sizes), args.repeats)
    print(markdown(results))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0 if results["meets_target"] else 1
