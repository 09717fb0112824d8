"""Toolchain latency: ``byoc run`` as whole-process wall time, cold and warm.

Each repeat makes a fresh, empty ``$BYOC_CACHE_DIR`` and runs the command twice:
*cold* (everything is generated and compiled) and then *warm* (the same cache: the
compiled libraries, parsed specs and parser tables are reused). The wall time covers
the whole process, interpreter start-up and imports included; the stage times (parse,
generate, compile, load, run) are the ones ``byoc run`` prints. The operating
system's file cache is warm in both cases: "cold" means byoc's own cache only.

Python's bytecode is kept in a private ``$PYTHONPYCACHEPREFIX`` that an untimed first
run fills, whatever the caller's environment says, so the numbers do not depend on
whether the shell sets ``PYTHONDONTWRITEBYTECODE``. Some environments do set it, and
an editable install then compiles byoc's modules in every process: the target
command is also timed warm that way (*warm, no bytecode*: ``PYTHONDONTWRITEBYTECODE=1``
and the bytecode of everything but byoc's own modules, which are compiled from source
in every process), reported but not a target.

Commands: ``byoc run examples/guide_whole_graph.graph`` (the target: under 1.0 s
cold and under 0.4 s warm), then ``byoc run examples/guide_plain_graph.graph
--backend B`` for every backend found that offloads part of that graph, for
comparison (a backend that maps none of its ops is listed as not compared). Then the
build time of real models, light ResNet-50 and BERT-base on ``fused``, cold and warm,
and the cache one build leaves (:mod:`benchmarks.model_builds`; ``--no-models`` skips
them).
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .timing import fmt_time, machine, summarise, write_results

REPO = Path(__file__).resolve().parents[1]
TARGET_COMMAND = ["run", "examples/guide_whole_graph.graph"]
PLAIN_GRAPH = "examples/guide_plain_graph.graph"
TARGETS = {"cold": 1.0, "warm": 0.4}
NO_BYTECODE = "warm, no bytecode"
DEFAULT_JSON = "benchmarks/results/toolchain.json"
_UNITS = {"ms": 1e-3, "s": 1.0}


def byoc_command() -> list[str]:
    """The installed ``byoc`` console script next to this Python, else ``python -m byoc``."""
    script = Path(sys.executable).with_name("byoc")
    return [str(script)] if script.exists() else [sys.executable, "-m", "byoc"]


def parse_stages(stdout: str) -> dict[str, float]:
    """``stages: parse 26.1 ms · generate 14.0 ms · ...`` -> {stage: seconds}."""
    match = re.search(r"^stages: (.*)$", stdout, re.M)
    stages: dict[str, float] = {}
    if match:
        for part in match.group(1).split(" · "):
            m = re.fullmatch(r"\s*(\w+) ([\d.]+) (ms|s)\s*", part)
            if m:
                stages[m.group(1)] = float(m.group(2)) * _UNITS[m.group(3)]
    return stages


def time_command(args: list[str], cache: Path, pycache: Path, write_bytecode: bool = True) -> dict[str, Any]:
    env = {**os.environ, "BYOC_CACHE_DIR": str(cache), "PYTHONPYCACHEPREFIX": str(pycache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    start = time.perf_counter()
    proc = subprocess.run(byoc_command() + args, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    result: dict[str, Any] = {"wall_s": wall, "stages": parse_stages(proc.stdout)}
    if proc.returncode != 0:
        result["error"] = f"exit status {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}"
    return result


def measure_command(args: list[str], repeats: int, no_bytecode: bool = False) -> dict[str, Any]:
    modes = ["cold", "warm"] + ([NO_BYTECODE] if no_bytecode else [])
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    bench = Path(tempfile.mkdtemp(prefix="byoc-bench-"))
    pycache, byoc_uncompiled = bench / "pycache", bench / "pycache-without-byoc"
    try:
        time_command(args, bench / "warm-up", pycache)  # untimed: fills the bytecode cache
        # the same bytecode minus byoc's own modules (the prefix mirrors absolute paths)
        shutil.copytree(pycache, byoc_uncompiled)
        shutil.rmtree(byoc_uncompiled / REPO.resolve().relative_to(REPO.resolve().anchor), ignore_errors=True)
        for k in range(repeats):
            cache = bench / f"cache-{k}"
            runs["cold"].append(time_command(args, cache, pycache))
            runs["warm"].append(time_command(args, cache, pycache))
            if no_bytecode:
                runs[NO_BYTECODE].append(time_command(args, cache, byoc_uncompiled, write_bytecode=False))
            shutil.rmtree(cache, ignore_errors=True)
    finally:
        shutil.rmtree(bench, ignore_errors=True)
    out: dict[str, Any] = {"command": "byoc " + " ".join(args), "repeats": repeats}
    for mode, items in runs.items():
        errors = [r["error"] for r in items if "error" in r]
        stage_names = list(dict.fromkeys(k for r in items for k in r["stages"]))
        out[mode] = {
            **summarise([r["wall_s"] for r in items]),
            "stages_median_s": {
                k: statistics.median(r["stages"][k] for r in items if k in r["stages"]) for k in stage_names
            },
            "errors": errors,
        }
    return out


def run(
    quick: bool = False, repeats: int | None = None, per_backend: bool = True, log=None, models: bool = True
) -> dict[str, Any]:
    import byoc.api as api

    from . import model_builds

    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    repeats = repeats or (2 if quick else 9)
    commands = [TARGET_COMMAND]
    skipped: dict[str, str] = {}
    if per_backend:
        try:
            names = [spec.name for spec in api.list_backends()]
        except Exception:  # a spec being edited elsewhere must not stop the suite
            names = []
        skipped = _not_compared(names)
        commands += [["run", PLAIN_GRAPH, "--backend", n] for n in names if n not in skipped]
    results: dict[str, Any] = {
        "suite": "toolchain",
        "mode": {"quick": quick},
        "machine": machine(),
        "commands": [],
        "not_compared": skipped if per_backend else {},
    }
    for i, args in enumerate(commands):
        n = repeats if i == 0 else max(1, (repeats + 1) // 2)
        log(f"[toolchain] byoc {' '.join(args)}: {n} cold + {n} warm runs")
        results["commands"].append(measure_command(args, n, no_bytecode=i == 0))
    main = results["commands"][0]
    results["targets"] = [
        {
            "target": f"`byoc run examples/guide_whole_graph.graph`, {mode} cache: under {limit} s wall time",
            "value": main[mode]["median_s"],
            "limit": limit,
            "met": (not main[mode]["errors"]) and main[mode]["median_s"] < limit,
        }
        for mode, limit in TARGETS.items()
    ]
    if models and model_builds.missing() is None:
        results["models"] = model_builds.measure(1 if quick else 3, log)
        results["targets"] += model_builds.targets(results["models"])
    elif models:
        results["models_not_measured"] = model_builds.missing()
    return results


def _not_compared(backends: Sequence[str]) -> dict[str, str]:
    """The backends for which ``byoc run PLAIN_GRAPH --backend B`` would fail, offloading
    nothing (dnnl maps none of its elementwise ops), each with why; the others take
    part of the graph and so take part in the comparison."""
    import byoc.api as api
    from byoc.building import offload
    from byoc.errors import UsageError

    catalog = api.load_catalog()
    program = api.parse((REPO / PLAIN_GRAPH).read_text(), "graph", file=PLAIN_GRAPH)
    ops = ", ".join(sorted({n.op for fn in program.functions for n in fn.nodes}))
    left_out = {}
    for backend in backends:
        try:
            offload(program, "graph", (backend,), api.backend_loader(None, catalog), catalog)
        except UsageError:
            left_out[backend] = f"it maps none of {ops}"
    return left_out


def markdown(results: dict[str, Any]) -> str:
    stages = ("parse", "generate", "compile", "load", "run")
    lines = [
        "| command | cache | wall time (median) | IQR | " + " | ".join(stages) + " | target |",
        "| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in stages) + " | --- |",
    ]
    for i, c in enumerate(results["commands"]):
        for mode in ("cold", "warm", NO_BYTECODE):
            if mode not in c:
                continue
            r = c[mode]
            target = ""
            if mode in TARGETS and i == 0:
                ok = r["median_s"] < TARGETS[mode] and not r["errors"]
                target = f"< {TARGETS[mode]} s: {'met' if ok else 'MISSED'}"
            cells = " | ".join(_ms(r["stages_median_s"].get(s)) for s in stages)
            lines.append(
                f"| `{c['command']}` | {mode} | {fmt_time(r['median_s'])} | "
                f"{fmt_time(r['p25_s'])}-{fmt_time(r['p75_s'])} | {cells} | {target} |"
            )
            for e in r["errors"][:1]:
                lines.append(f"| | | error: {e.splitlines()[0]} | | | | | | | |")
    for backend, why in results.get("not_compared", {}).items():
        lines.append(f"\nnot compared: `--backend {backend}` ({why})")
    lines.append(f"\n{results['commands'][0]['repeats']} cold + warm pairs for the first command; medians")
    if results.get("models_not_measured"):
        lines.append(f"\nmodel builds not measured: {results['models_not_measured']}")
    if results.get("models"):
        from .model_builds import markdown as model_table

        lines += ["", model_table(results["models"])]
        for target in results["targets"][len(TARGETS) :]:
            value = target.get("text", f"{target['value']:.2f} s")
            lines.append(f"- {target['target']}: {value}, {'met' if target['met'] else 'MISSED'}")
    return "\n".join(lines)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks toolchain", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 repeats instead of 9 (a smoke run)")
    ap.add_argument("--repeats", type=int, help="cold+warm pairs for the target command (default 9)")
    ap.add_argument("--no-backends", action="store_true", help="only the target command")
    ap.add_argument(
        "--no-models", action="store_true", help="skip the builds of light ResNet-50 and BERT-base on fused"
    )
    ap.add_argument("--json", default=DEFAULT_JSON)
    args = ap.parse_args(argv)
    results = run(args.quick, args.repeats, not args.no_backends, models=not args.no_models)
    print(markdown(results))
    write_results(results, args.json)
    return 0 if all(t["met"] for t in results["targets"]) else 1
