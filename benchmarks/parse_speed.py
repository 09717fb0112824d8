"""Parse throughput of both front ends, and how it grows with the input size.

Each measurement runs in a fresh Python process (so one run's heap does not slow
the next), generates its text, and times ``byoc.parse`` from text to validated IR.
Sizes are measured in interleaved rounds; a time is the median over the rounds and
growth the median of the within-round ratios. The generated texts keep the same
bytes per line at every size (see workloads.ID_BASE). Targets: ExampleJSON >= 100k
lines/s and DSL >= 50k lines/s at 100k lines; growth time(10x lines) <= 11x.

A DSL constant of a million literal float32 values (``const float32[N] [...]``, each
written as the printer writes it) is parsed and printed too, in elements per second:
targets >= 500k elements/s parsed (the number list is one token, read by split and
float(); word by word it was about 80k/s) and printed >= 8.6M elements/s: ten times the
printer of commit a4e4f8c, which wrote each value with numpy's str and Python's repr
(860k elements/s, 1.16 us a value, on the project's 2-core AMD EPYC; median of five
fresh processes). byoc/float_text.py writes the whole array with numpy instead, at
about 17M elements/s there.
"""

from __future__ import annotations

import statistics
from functools import partial

from .timing import child_numbers, child_seconds, growth_main, growth_steps, size_rounds
from .workloads import dsl_text, examplejson_text

TARGETS = {"examplejson": 100_000, "graph": 50_000}
CONSTANT_ELEMENTS = 1_000_000
CONSTANT_TARGET = 500_000
"""Elements per second parsed in a large literal constant."""
CONSTANT_PRINT_TARGET = 8_600_000
"""Elements per second printed in a large literal constant (10x the printer of a4e4f8c)."""
GENERATORS = {"examplejson": examplejson_text, "graph": dsl_text}

_CHILD = """
import gc, sys, time
from benchmarks.workloads import {gen}
import byoc.api as api
catalog = api.load_catalog()
text = {gen}({lines})
api.parse({small}, "{lang}", catalog=catalog)  # builds the Lark parser once
gc.collect()
t = time.perf_counter()
program = api.parse(text, "{lang}", catalog=catalog)
print(time.perf_counter() - t)
"""


_FLOOR = """
import gc, sys, time
from byoc.errors import Location
from byoc.ir import Node, TensorType
n = {lines}
t0 = TensorType((10, 10), "float32")
gc.disable()
t = time.perf_counter()
types, nodes = {{}}, []
for i in range(n):
    name = "v" + str(i)
    inputs = ("v" + str(i - 1), "v" + str(i // 2))
    tuple(map(types.get, inputs))
    types[name] = t0
    nodes.append(Node((name,), "add", inputs, (t0,), (), None, Location("f", i, 3)))
print(time.perf_counter() - t)
"""
"""The floor: only allocating one IR node per line and looking up its inputs, with no
parsing at all. Its growth shows what CPython's memory hierarchy alone costs."""


_CONSTANT = """
import gc, time
import numpy as np
import byoc.api as api
from byoc.grammar.graph_printer import number_texts
n = ELEMENTS
values = np.random.default_rng(0).standard_normal(n).astype(np.float32)
head = "graph main(x: float32[%d]) {\\n  k = const float32[%d] [" % (n, n)
text = head + ", ".join(number_texts(values)) + "]\\n  return add(x, k)\\n}\\n"
api.parse("graph main(x: float32[2]) { k = const float32[2] [1, 2]\\n return add(x, k) }", "graph")
gc.collect()
t = time.perf_counter()
program = api.parse(text, "graph")
parsed = time.perf_counter() - t
t = time.perf_counter()
api.print_program(program, "graph")
printed = time.perf_counter() - t
assert np.array_equal(program.functions[0].constants[0].array, values)
print(parsed, printed)
"""
"""A float32 constant of ELEMENTS literal values parsed, then printed (both timed)."""


def time_constant(elements: int) -> tuple[float, float]:
    parsed, printed = child_numbers(_CONSTANT.replace("ELEMENTS", str(elements)))
    return parsed, printed


def time_floor(lines: int) -> float:
    return child_seconds(_FLOOR.format(lines=lines))


def time_once(lang: str, lines: int) -> float:
    gen = GENERATORS[lang].__name__
    code = _CHILD.format(gen=gen, lines=lines, lang=lang, small=f"{gen}(20)")
    return child_seconds(code)


def run(sizes: tuple[int, ...] = (1_000, 10_000, 100_000), repeats: int = 5) -> dict:
    """Growth is judged on the last step (e.g. 10k -> 100k lines): time may grow at
    most 1.1x as fast as the line count. Sizes are measured in interleaved rounds,
    and growth is the median of the ratios within a round."""
    results: dict = {"unit": "lines per second (median)", "repeats": repeats, "languages": {}}
    for lang in GENERATORS:
        samples = size_rounds(partial(time_once, lang), sizes, repeats)
        rows = {}
        for n in sizes:
            median = statistics.median(samples[n])
            rows[n] = {
                "median_s": median,
                "lines_per_s": n / median,
                "bytes_per_line": len(GENERATORS[lang](n)) / n,
            }
        steps = growth_steps(sizes, samples)
        growth, limit = steps[-1]["growth"], steps[-1]["limit"]
        results["languages"][lang] = {
            "sizes": rows,
            "growth_steps": steps,
            "growth": growth,
            "growth_limit": limit,
            "target_lines_per_s": TARGETS[lang],
            "meets_target": rows[sizes[-1]]["lines_per_s"] >= TARGETS[lang] and growth <= limit,
        }
    constant = [time_constant(CONSTANT_ELEMENTS) for _ in range(repeats)]
    parse_s = statistics.median(p for p, _ in constant)
    print_s = statistics.median(q for _, q in constant)
    results["constant"] = {
        "elements": CONSTANT_ELEMENTS,
        "parse_median_s": parse_s,
        "parse_elements_per_s": CONSTANT_ELEMENTS / parse_s,
        "print_median_s": print_s,
        "print_elements_per_s": CONSTANT_ELEMENTS / print_s,
        "target_parse_elements_per_s": CONSTANT_TARGET,
        "target_print_elements_per_s": CONSTANT_PRINT_TARGET,
        "meets_target": CONSTANT_ELEMENTS / parse_s >= CONSTANT_TARGET
        and CONSTANT_ELEMENTS / print_s >= CONSTANT_PRINT_TARGET,
    }
    floor = size_rounds(time_floor, sizes, repeats)
    results["ir_floor"] = {
        "sizes": {
            n: {"median_s": statistics.median(t), "lines_per_s": n / statistics.median(t)}
            for n, t in floor.items()
        },
        "growth": growth_steps(sizes, floor)[-1]["growth"],
    }
    return results


def markdown(results: dict) -> str:
    lines = [
        "| language | lines | bytes/line | median time | lines/s | target | growth (10x lines) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for lang, r in results["languages"].items():
        sizes = list(r["sizes"].items())
        steps = {s["to"]: s for s in r.get("growth_steps", [])}
        for i, (n, row) in enumerate(sizes):
            step = steps.get(n) if i else None
            growth = f"{step['growth']:.2f}x (limit {step['limit']:.0f}x)" if step else ""
            target = f">= {r['target_lines_per_s']:,}" if i == len(sizes) - 1 else ""
            lines.append(
                f"| {lang} | {n:,} | {row['bytes_per_line']:.1f} | {row['median_s'] * 1000:.0f} ms | {row['lines_per_s']:,.0f} | {target} | {growth} |"
            )
    c = results.get("constant")
    if c is not None:
        lines.append(
            f"\nA float32 constant of {c['elements']:,} literal values: parsed at "
            f"{c['parse_elements_per_s']:,.0f} elements/s (target >= {c['target_parse_elements_per_s']:,}), "
            f"printed at {c['print_elements_per_s']:,.0f} elements/s "
            f"(target >= {c.get('target_print_elements_per_s', CONSTANT_PRINT_TARGET):,})."
        )
    floor = results["ir_floor"]
    lines.append(
        f"\nIR allocation floor (no parsing; one node per line): growth {floor['growth']:.2f}x over "
        f"the last step, so that much growth comes from CPython's memory hierarchy alone."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return growth_main(
        argv,
        suite="parse",
        description=__doc__,
        unit="line",
        default_json="benchmarks/results/parse_speed.json",
        run=run,
        markdown=markdown,
        met=lambda r: (
            all(lang["meets_target"] for lang in r["languages"].values())
            and r.get("constant", {}).get("meets_target", True)
        ),
    )
