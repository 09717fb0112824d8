"""Timing helpers shared by the suites: interleaved rounds, medians, units.

A machine with two noisy cores drifts: a background job that starts halfway would
penalise whichever system happens to be measured then. So every system of a
workload is measured once per *round*, in a new (seeded) random order each round, and
the figure reported is the median over the rounds. The order is shuffled rather than
rotated: in a rotation every system follows the same neighbour in every round, so one
that leaves the machine busy (a library's spinning worker threads) slows the same
system every time, and that system's median carries it. Each sample times a batch of calls
long enough to dwarf the clock's resolution (one call, for anything slower than the
batch length) and divides by the number of calls. Every batch follows one untimed
call of the same system, so that no sample pays for the state the previous system left
behind (its caches, or its threads still holding a core).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import timeit
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Bench:
    """One way to run a workload: a statement timed in a tight ``timeit`` loop."""

    stmt: str
    namespace: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, call: Callable[[], Any]) -> Bench:
        return cls("f()", {"f": call})

    def timer(self) -> timeit.Timer:
        return timeit.Timer(self.stmt, globals=self.namespace)


def calibrate(timer: timeit.Timer, min_batch_s: float) -> int:
    """How many calls make one batch last at least ``min_batch_s`` (at least one call)."""
    number = 1
    while True:
        elapsed = timer.timeit(number)
        if elapsed >= min_batch_s or number >= 1 << 24:
            return number
        # Aim slightly past the limit so that one more step is rarely needed.
        number = max(number * 2, int(number * 1.2 * min_batch_s / max(elapsed, 1e-9)))


ORDER_SEED = 17
"""The seed of the systems' order in each round (the same orders in every run)."""


def measure(
    benches: Mapping[str, Bench], rounds: int, min_batch_s: float, warm: bool = True
) -> dict[str, dict[str, Any]]:
    """Time every bench ``rounds`` times, interleaved, in a new random order each round
    (seeded: the same orders in every run); per-call statistics. Each batch follows
    one untimed call; ``warm=False`` drops it (for calls that take far longer than any
    cache state matters).

    Until 2026-11-26 only batches of at most 4 calls had that call: in the networks
    suite a conv's ONNX Runtime session (4 calls per batch) had it and the ``dnnl``
    conv (6 calls) had not, and the first call after a neighbour took the cold state
    for the whole batch (the ``dnnl`` conv: 634 µs median in the suite, 512-519 µs
    alone)."""
    names = list(benches)
    timers = {name: benches[name].timer() for name in names}
    numbers = {name: calibrate(timers[name], min_batch_s) for name in names}  # also warms up
    samples: dict[str, list[float]] = {name: [] for name in names}
    order = random.Random(ORDER_SEED)
    gc.collect()
    for _ in range(rounds):
        for name in order.sample(names, len(names)):
            timer, number = timers[name], numbers[name]
            if warm:
                timer.timeit(1)  # untimed: start from this system's own state
            samples[name].append(timer.timeit(number) / number)
    return {name: summarise(samples[name], numbers[name]) for name in names}


GROWTH_SLACK = 1.1
"""Linear growth: time may grow at most 1.1x as fast as the input (10x lines -> 11x)."""
GROWTH_ROUNDS = 15
"""Rounds of the parse and codegen suites. A growth ratio divides the 100k size's time
by the 10k size's, both noisy: on the 2-core AMD EPYC of 2026-12-02 the allocation
floor's own growth read 11.01x in one full run and 8.49x in the next. A round costs
seconds, so 15 of them (7 until then) narrow the median at little cost."""


def size_rounds(
    time_once: Callable[[int], float], sizes: tuple[int, ...], rounds: int
) -> dict[int, list[float]]:
    """``time_once(n)`` for every size, ``rounds`` times, interleaved: each round times
    every size once, in turn, so that a load that comes and goes on this shared
    machine hits all sizes alike instead of whichever size was being measured then."""
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            samples[n].append(time_once(n))
    return samples


def child_seconds(code: str) -> float:
    """Run ``code`` in a fresh Python process and return the number it prints (a time
    in seconds): each size of a throughput suite starts from an empty heap."""
    (seconds,) = child_numbers(code)
    return seconds


def child_numbers(code: str) -> list[float]:
    """Run ``code`` in a fresh Python process and return the numbers it prints."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [float(word) for word in out.stdout.split()]


def growth_steps(sizes: tuple[int, ...], samples: dict[int, list[float]]) -> list[dict[str, Any]]:
    """Time growth between consecutive sizes: the median over rounds of the ratio of
    the two times measured in the same round, and its limit (GROWTH_SLACK times the
    size growth)."""
    if len(sizes) < 2:
        return [{"from": sizes[0], "to": sizes[0], "growth": 1.0, "limit": GROWTH_SLACK}]
    return [
        {
            "from": a,
            "to": b,
            "growth": statistics.median(tb / ta for ta, tb in zip(samples[a], samples[b])),
            "limit": GROWTH_SLACK * b / a,
        }
        for a, b in zip(sizes, sizes[1:])
    ]


def summarise(samples: list[float], calls_per_sample: int = 1) -> dict[str, Any]:
    ordered = sorted(samples)
    quartiles = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
    return {
        "median_s": statistics.median(ordered),
        "p25_s": quartiles[0],
        "p75_s": quartiles[2],
        "min_s": ordered[0],
        "samples": len(ordered),
        "calls_per_sample": calls_per_sample,
    }


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}×"


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next((ln.split(":", 1)[1].strip() for ln in handle if ln.startswith("model name")), cpu)
    except OSError:
        pass
    cc = os.environ.get("CC", "cc")
    try:
        banner = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
        compiler = banner.splitlines()[0] if banner else cc
    except (OSError, subprocess.SubprocessError):
        compiler = f"{cc} (not runnable)"
    import numpy

    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "numpy": numpy.__version__,
        "compiler": compiler,
        # set by benchmarks/__init__.py unless the environment does
        "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT"),
        "OPENBLAS_THREAD_TIMEOUT": os.environ.get("OPENBLAS_THREAD_TIMEOUT"),
        # set on some machines to pick OpenBLAS's kernels (numpy's and the cblas backend's)
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
    }


def write_results(results: Mapping[str, Any], path: str | Path) -> Path:
    """Write a suite's results as JSON to ``path`` (making its folder) and say so."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {out}")
    return out


def growth_main(
    argv: list[str] | None,
    *,
    suite: str,
    description: str | None,
    unit: str,
    default_json: str,
    run: Callable[[tuple[int, ...], int], dict],
    markdown: Callable[[dict], str],
    met: Callable[[dict], bool],
) -> int:
    """The command line of a throughput suite timed at 1k, 10k and 100k ``unit``
    (``python -m benchmarks parse`` and ``codegen``); exits 1 when a target is missed."""
    ap = argparse.ArgumentParser(prog=f"python -m benchmarks {suite}", description=description)
    ap.add_argument(
        "--repeats",
        type=int,
        help="rounds (default 15, --quick 2); each round times every size once; medians are reported",
    )
    ap.add_argument(
        "--sizes", type=int, nargs="+", help=f"{unit} counts (default 1000 10000 100000; --quick 1000 10000)"
    )
    ap.add_argument("--quick", action="store_true", help="a smoke run: fewer repeats, no 100k size")
    ap.add_argument(
        "--json", default=default_json, help=f"where to write the JSON results (default {default_json})"
    )
    args = ap.parse_args(argv)
    sizes = args.sizes or ([1_000, 10_000] if args.quick else [1_000, 10_000, 100_000])
    results = run(tuple(sizes), args.repeats or (2 if args.quick else GROWTH_ROUNDS))
    print(markdown(results))
    write_results(results, args.json)
    return 0 if met(results) else 1
