"""Timing check, not a unit test: one ResNet-50 forward pass through byoc.reference_kernels only.

ResNet-50 v1.5 (stride on the 3x3 convolution of a bottleneck) at 224x224, batch 1, float64, random
He-initialised weights and random batch-norm statistics: conv+bn+relu stem, 3x3/2 max pool, 3+4+6+3
bottleneck blocks with residual adds, global average pool, dense to 1000 classes. Prints every run's
time, the median, and where the time of the median run went. Target: median under 30 s on the 2-core
machine; exit status 1 when it is missed.

    python -m benchmarks.reference_resnet50 [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

import numpy as np

from byoc.reference_kernels import by_name

KERNELS = by_name()
TARGET_SECONDS = 30.0
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, first stride)
EXPANSION = 4


class Timed:
    """Calls kernels by name and adds up the seconds spent in each."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def __call__(self, name: str, *args, **attrs):
        start = time.perf_counter()
        out = KERNELS[name](*args, **attrs)
        self.seconds[name] += time.perf_counter() - start
        return out


def conv_unit(
    rng: np.random.Generator, cin: int, cout: int, kernel: int, stride: int, gamma: float = 1.0
) -> dict:
    """Weights of conv (no bias) + batch norm with scales around ``gamma``; 'same' padding."""
    std = np.sqrt(2.0 / (cin * kernel * kernel))
    return {
        "w": rng.standard_normal((cout, cin, kernel, kernel)) * std,
        "bn": (
            rng.uniform(0.5, 1.5, cout) * gamma,
            rng.normal(0.0, 0.1, cout),
            rng.normal(0.0, 0.1, cout),
            rng.uniform(0.5, 1.5, cout),
        ),
        "strides": [stride, stride],
        "pads": [kernel // 2] * 4,
    }


def build(rng: np.random.Generator) -> dict:
    blocks = []
    cin = 64
    for width, count, first_stride in STAGES:
        for i in range(count):
            stride = first_stride if i == 0 else 1
            block = {
                "reduce": conv_unit(rng, cin, width, 1, 1),
                "spatial": conv_unit(rng, width, width, 3, stride),
                "expand": conv_unit(rng, width, width * EXPANSION, 1, 1, gamma=0.2),  # keeps the sums bounded
            }
            if i == 0:
                block["shortcut"] = conv_unit(rng, cin, width * EXPANSION, 1, stride)
            blocks.append(block)
            cin = width * EXPANSION
    return {
        "stem": conv_unit(rng, 3, 64, 7, 2),
        "blocks": blocks,
        "fc": (rng.standard_normal((1000, cin)) * np.sqrt(1.0 / cin), rng.normal(0.0, 0.01, 1000)),
    }


def conv_bn(run: Timed, x: np.ndarray, unit: dict, *, relu: bool) -> np.ndarray:
    y = run("conv", x, unit["w"], strides=unit["strides"], pads=unit["pads"])
    y = run("batch_norm", y, *unit["bn"], epsilon=1e-5)
    return run("relu", y) if relu else y


def forward(run: Timed, model: dict, image: np.ndarray) -> np.ndarray:
    x = conv_bn(run, image, model["stem"], relu=True)
    x = run("max_pool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for block in model["blocks"]:
        y = conv_bn(run, x, block["reduce"], relu=True)
        y = conv_bn(run, y, block["spatial"], relu=True)
        y = conv_bn(run, y, block["expand"], relu=False)
        shortcut = conv_bn(run, x, block["shortcut"], relu=False) if "shortcut" in block else x
        x = run("relu", y + shortcut)
    x = run("flatten", run("global_avg_pool", x), axis=1)
    weight, bias = model["fc"]
    return run("dense", x, weight) + bias


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(50)
    model = build(rng)
    image = rng.standard_normal((1, 3, 224, 224))
    times, breakdowns, logits = [], [], None
    for i in range(args.runs):
        run = Timed()
        start = time.perf_counter()
        logits = forward(run, model, image)
        times.append(time.perf_counter() - start)
        breakdowns.append(dict(run.seconds))
        print(f"run {i + 1}: {times[-1]:.3f} s")
    assert logits is not None and logits.shape == (1, 1000) and np.isfinite(logits).all()
    median = statistics.median(times)
    print(
        f"median of {args.runs}: {median:.3f} s (target < {TARGET_SECONDS:.0f} s); logits[0, :3] = {logits[0, :3]}"
    )
    seconds = breakdowns[times.index(sorted(times)[(len(times) - 1) // 2])]
    for name, spent in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"  {name:16s} {spent:7.3f} s")
    return 0 if median < TARGET_SECONDS else 1


if __name__ == "__main__":
    raise SystemExit(main())
