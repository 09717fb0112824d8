"""`python -m benchmarks [SUITE ...] [--quick]`: run byoc's benchmarks.

With no suite named, every suite runs, then a summary of every target. `--quick` is
a short smoke run (fewer repeats). Options other than `--quick` belong to one suite:
`python -m benchmarks kernels --help`.

Benchmarks measure; unit tests never time anything. Each suite prints a markdown
table and writes JSON under benchmarks/results/ (kernels also a PNG chart when
matplotlib is installed); a full run also writes benchmarks/results/summary.json.
Exit status 1 when a measured target is missed or a system fails to build, to run or
to compute the right result (a peer that is not installed is skipped).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from . import (
    codegen_speed,
    compile_time,
    kernel_report,
    kernels,
    network_report,
    networks,
    parse_speed,
    toolchain,
)

SUITES = {
    "kernels": kernels.main,
    "networks": networks.main,
    "toolchain": toolchain.main,
    "parse": parse_speed.main,
    "codegen": codegen_speed.main,
    "compile": compile_time.main,
}
RESULTS = {
    "kernels": kernels.DEFAULT_JSON,
    "networks": networks.DEFAULT_JSON,
    "toolchain": toolchain.DEFAULT_JSON,
    "parse": "benchmarks/results/parse_speed.json",
    "codegen": "benchmarks/results/codegen_speed.json",
    "compile": compile_time.DEFAULT_JSON,
}
COMMON = ("--quick",)


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        print("suites: " + ", ".join(SUITES))
        return 0
    names = [a for a in argv if a in SUITES] or list(SUITES)
    rest = [a for a in argv if a not in SUITES]
    if len(names) > 1 and any(a not in COMMON for a in rest):
        print(
            f"options other than {', '.join(COMMON)} belong to one suite, e.g. "
            "`python -m benchmarks kernels --tiny`",
            file=sys.stderr,
        )
        return 2
    status = 0
    start = time.perf_counter()
    for name in names:
        print(f"## {name}\n", flush=True)
        status |= SUITES[name](rest)
        print(flush=True)
    if len(names) > 1:
        print(summary(names, time.perf_counter() - start))
    return status


def summary(names: list[str], elapsed: float) -> str:
    """Every target of the suites just run, from the JSON they wrote."""
    rows: list[tuple[str, str, str, str]] = []
    for name in names:
        path = Path(RESULTS[name])
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        if name == "networks":
            for t in data.get("targets", []):
                rows.append((name, t["target"], network_report.target_value(t), network_report.status(t)))
            for f in data.get("failures", []):
                rows.append((name, f"{f['system']} on {f['workload']} is measured", f["error"], "FAILED"))
        elif name in ("kernels", "toolchain", "compile"):
            for t in data.get("targets", []):
                if name == "kernels":
                    value = kernel_report.target_value(t)
                elif name == "toolchain":
                    value = t.get("text", f"{t['value']:.3f} s")
                else:
                    value = f"growth {t['value']:.1f}x per step"
                state = kernel_report.status(t) if name == "kernels" else ("met" if t["met"] else "MISSED")
                rows.append((name, t["target"], value, state))
            for f in data.get("failures", []):
                rows.append((name, f"{f['system']} on {f['workload']} is measured", f["error"], "FAILED"))
        elif name == "parse":
            for lang, r in data["languages"].items():
                last = list(r["sizes"])[-1]
                rows.append(
                    (
                        name,
                        f"{lang} >= {r['target_lines_per_s']:,} lines/s at {int(last):,} lines, growth <= "
                        f"{r['growth_limit']:.0f}x",
                        f"{r['sizes'][last]['lines_per_s']:,.0f} lines/s, growth {r['growth']:.2f}x",
                        "met" if r["meets_target"] else "MISSED",
                    )
                )
        elif name == "codegen":
            at = str(data.get("target_at_nodes", next(iter(data["sizes"]))))
            rows.append(
                (
                    name,
                    f"c_source codegen >= {data['target_nodes_per_s']:,} nodes/s at {int(at):,} nodes, "
                    f"growth <= {data['growth_limit']:.0f}x",
                    f"{data['sizes'][at]['nodes_per_s']:,.0f} nodes/s, growth {data['growth']:.2f}x",
                    "met" if data["meets_target"] else "MISSED",
                )
            )
    out = Path("benchmarks/results/summary.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "suites": names,
                "elapsed_s": elapsed,
                "targets": [dict(zip(("suite", "target", "measured", "status"), r)) for r in rows],
            },
            indent=2,
        )
        + "\n"
    )
    lines = ["## summary", "", "| suite | target | measured | status |", "| --- | --- | --- | --- |"]
    lines += [f"| {s} | {t} | {v} | {st} |" for s, t, v, st in rows]
    lines.append(f"\nall suites in {elapsed:.0f} s; wrote {out}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
