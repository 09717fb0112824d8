"""Build time of real models: ``byoc run MODEL.onnx --backend fused``, cold and warm.

The models are written as ``.onnx`` files into a scratch folder: light ResNet-50 (ONNX's
light model, its ConstantOfShape weights made seeded random initializers: 25.6 million
weights) and BERT-base (the zoo's builder, ``examples/zoo``: 12 layers, hidden 768,
sequence 128, seeded random weights). Each repeat makes a fresh, empty
``$BYOC_CACHE_DIR`` and runs the model *cold* (everything parsed, generated and
compiled), measures the cache, then runs it *warm* (the same file, the same cache), each
in a fresh process. The stage times are the ones ``byoc run`` prints; the *build* is
every stage before the run (parse, partition, generate, compile, load).

Targets, on a quiet machine:

* cold: the compile stage at most 10 s for each model;
* warm: the build under 1 s for each model (the libraries come from the cache);
* the cache after the cold ResNet-50 run holds at most 1.2x the size of its library
  (which holds the weights): no second copy of the library nor of the weights.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from .toolchain import REPO, byoc_command, parse_stages

BUILD_STAGES = ("parse", "partition", "generate", "compile", "load")
COLD_COMPILE_S = 10.0
WARM_BUILD_S = 1.0
CACHE_RATIO = 1.2


def missing() -> str | None:
    """Why the models cannot be written here (onnx, an optional dependency, is not
    installed), or None: the suite then says so instead of failing."""
    import importlib.util

    if importlib.util.find_spec("onnx") is None:
        return "onnx is not installed (pip install 'byoc-codegen[onnx]')"
    return None


def write_models(folder: Path) -> dict[str, tuple[Path, Path | None]]:
    """The models' ``.onnx`` files in ``folder``, by name, each with the ``.npz`` of its
    inputs when random ones would not do (BERT's token ids index its vocabulary)."""
    import numpy as np
    import onnx

    from .network_workloads import _randomise, zoo_transformers

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"
    resnet = onnx.load(light)
    _randomise(resnet, np.random.default_rng(0))
    paths = {"light_resnet50": folder / "light_resnet50.onnx", "bert_base": folder / "bert_base.onnx"}
    onnx.save(resnet, paths["light_resnet50"])
    inputs = folder / "bert_base_inputs.npz"
    zoo = zoo_transformers()
    bert, feeds = zoo.bert(False, zoo.BERT_BASE)
    onnx.save(bert, paths["bert_base"])
    np.savez(inputs, **{i.name: x for i, x in zip(bert.graph.input, feeds)})
    return {"light_resnet50": (paths["light_resnet50"], None), "bert_base": (paths["bert_base"], inputs)}


def run_once(
    model: Path, cache: Path, inputs: Path | None = None, pycache: Path | None = None
) -> dict[str, Any]:
    """One whole-process ``byoc run`` of ``model`` on fused, with ``cache`` (and the
    inputs of the ``.npz`` ``inputs``, else random ones). Python's bytecode is kept in
    ``pycache`` whatever the caller's environment says, as the toolchain suite keeps it:
    a cold run writes it, a warm one reads it."""
    env = {**os.environ, "BYOC_CACHE_DIR": str(cache)}
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    start = time.perf_counter()
    given = ["--inputs", str(inputs)] if inputs is not None else []
    proc = subprocess.run(
        [*byoc_command(), "run", str(model), "--backend", "fused", "-q", *given],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    stages = parse_stages(proc.stdout)
    result: dict[str, Any] = {
        "wall_s": time.perf_counter() - start,
        "stages": stages,
        "build_s": sum(stages.get(s, 0.0) for s in BUILD_STAGES),
    }
    if proc.returncode != 0:
        result["error"] = f"exit status {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}"
    return result


def cache_sizes(cache: Path) -> dict[str, int]:
    """The bytes of the cache's build entries, and of the largest library among them."""
    from byoc.runtime.cache_store import entries

    builds = [e for e in entries(cache) if e.kind == "build"]
    libraries = [p.stat().st_size for e in builds for p in e.path.glob("lib*.so")]
    return {"build_bytes": sum(e.size for e in builds), "library_bytes": max(libraries, default=0)}


def measure(repeats: int, log) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="byoc-bench-models-"))
    out: dict[str, Any] = {}
    try:
        models = write_models(scratch)
        for name, (path, inputs) in models.items():
            runs: dict[str, list[dict[str, Any]]] = {"cold": [], "warm": []}
            sizes: list[dict[str, int]] = []
            for k in range(repeats):
                log(f"[toolchain] {name}.onnx on fused: cold and warm run {k + 1} of {repeats}")
                cache = scratch / f"cache-{name}-{k}"
                runs["cold"].append(run_once(path, cache, inputs, scratch / "pycache"))
                sizes.append(cache_sizes(cache))
                runs["warm"].append(run_once(path, cache, inputs, scratch / "pycache"))
                shutil.rmtree(cache, ignore_errors=True)
            out[name] = {
                mode: {
                    "build_median_s": statistics.median(r["build_s"] for r in items),
                    "wall_median_s": statistics.median(r["wall_s"] for r in items),
                    "stages_median_s": {
                        s: statistics.median(r["stages"].get(s, 0.0) for r in items) for s in BUILD_STAGES
                    },
                    "errors": [r["error"] for r in items if "error" in r],
                }
                for mode, items in runs.items()
            }
            out[name]["cache"] = sizes[-1]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def targets(models: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets of the module docstring, each with its value and whether it is met."""
    found: list[dict[str, Any]] = []
    for name, r in models.items():
        ok = not r["cold"]["errors"] and not r["warm"]["errors"]
        cold, warm = r["cold"]["stages_median_s"]["compile"], r["warm"]["build_median_s"]
        found.append(
            {
                "target": f"`byoc run {name}.onnx --backend fused`, cold cache: compile stage at most "
                f"{COLD_COMPILE_S:.0f} s",
                "value": cold,
                "limit": COLD_COMPILE_S,
                "met": ok and cold <= COLD_COMPILE_S,
            }
        )
        found.append(
            {
                "target": f"`byoc run {name}.onnx --backend fused`, warm cache: build under {WARM_BUILD_S:.0f} s",
                "value": warm,
                "limit": WARM_BUILD_S,
                "met": ok and warm < WARM_BUILD_S,
            }
        )
    sizes = models.get("light_resnet50", {}).get("cache")
    if sizes and sizes["library_bytes"]:
        ratio = sizes["build_bytes"] / sizes["library_bytes"]
        found.append(
            {
                "target": f"one light ResNet-50 build stores at most {CACHE_RATIO}x its library",
                "value": ratio,
                "text": f"{ratio:.2f}x ({sizes['build_bytes'] / 1e6:.0f} MB for a "
                f"{sizes['library_bytes'] / 1e6:.0f} MB library)",
                "limit": CACHE_RATIO,
                "met": ratio <= CACHE_RATIO,
            }
        )
    return found


def markdown(models: dict[str, Any]) -> str:
    lines = [
        "| model on fused | cache | build (median) | parse | generate | compile | wall time |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in models.items():
        for mode in ("cold", "warm"):
            m = r[mode]
            stages = m["stages_median_s"]
            lines.append(
                f"| `{name}.onnx` | {mode} | {m['build_median_s']:.2f} s | {stages['parse']:.2f} s | "
                f"{stages['generate']:.2f} s | {stages['compile']:.2f} s | {m['wall_median_s']:.2f} s |"
            )
            for e in m["errors"][:1]:
                lines.append(f"| | | error: {e.splitlines()[0]} | | | | |")
    return "\n".join(lines)
