"""C source code generation throughput, and how it grows with the graph.

Each measurement runs in a fresh process: parse a graph whose one @ccompiler region
holds N ops (not timed), then time lowering plus the c_source generator, at 1k, 10k
and 100k nodes. Target: >= 50k nodes/s at 10k nodes; growth time(10x
nodes) <= 11x.
"""

from __future__ import annotations

import statistics

from .timing import child_seconds, growth_main, growth_steps, size_rounds

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
generate(program, catalog, api.load_backend)
print(time.perf_counter() - t)
"""


def time_once(nodes: int) -> float:
    return child_seconds(_CHILD.format(nodes=nodes))


def run(sizes: tuple[int, ...], repeats: int) -> dict:
    """Throughput is judged at 10k nodes (the smallest size when 10k is not run),
    growth on the last step (e.g. 10k -> 100k nodes): at most 1.1x the size growth.
    Sizes are measured in interleaved rounds; growth is the median within-round ratio."""
    samples = size_rounds(time_once, sizes, repeats)
    rows = {}
    for n in sizes:
        t = statistics.median(samples[n])
        rows[n] = {"median_s": t, "nodes_per_s": n / t}
    steps = growth_steps(sizes, samples)
    at = 10_000 if 10_000 in rows else sizes[0]
    growth, limit = steps[-1]["growth"], steps[-1]["limit"]
    return {
        "unit": "nodes per second (median)",
        "repeats": repeats,
        "sizes": rows,
        "growth_steps": steps,
        "growth": growth,
        "growth_limit": limit,
        "target_nodes_per_s": TARGET,
        "target_at_nodes": at,
        "meets_target": rows[at]["nodes_per_s"] >= TARGET and growth <= limit,
    }


def markdown(r: dict) -> str:
    lines = [
        "| c_source codegen | nodes | median time | nodes/s | growth (10x nodes) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    steps = {s["to"]: s for s in r.get("growth_steps", []) if s["to"] != s["from"]}
    for n, row in r["sizes"].items():
        step = steps.get(n)
        growth = f"{step['growth']:.2f}x (limit {step['limit']:.0f}x)" if step else ""
        lines.append(
            f"| lower + generate | {n:,} | {row['median_s'] * 1000:.0f} ms | {row['nodes_per_s']:,.0f} | {growth} |"
        )
    at = r.get("target_at_nodes", next(iter(r["sizes"])))
    lines.append(
        f"\ntarget >= {r['target_nodes_per_s']:,} nodes/s at {at:,} nodes, growth on the last step "
        f"{r['growth']:.2f}x (limit {r['growth_limit']:.0f}x): {'met' if r['meets_target'] else 'MISSED'}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return growth_main(
        argv,
        suite="codegen",
        description=__doc__,
        unit="node",
        default_json="benchmarks/results/codegen_speed.json",
        run=run,
        markdown=markdown,
        met=lambda r: r["meets_target"],
    )
