"""Kernel speed: every byoc backend against numpy, numexpr, TVM and the memory-bandwidth
bound, all measured in one run.

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
that cannot express a workload is listed as not applicable, with the reason.
Compiled backends are timed through ``module.prepare(symbol, *arrays)`` (the kernel
timing) and through ``module.get_function(symbol)`` (the checked, normal path);
interpreters through ``get_function``. Peers: numpy eager (the plain expression),
numpy with ``out=`` into preallocated buffers, numexpr and TVM relax (llvm) when
importable, and the bandwidth bound: ``np.copyto`` over two arrays that together
hold as many bytes as the kernel reads and writes, on one thread and split over
every core; the faster of the two is the bound.

Every system's output is checked against numpy's before it is timed. Figures are
medians over interleaved, rotating rounds (see benchmarks/timing.py).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import peers
from .timing import Bench, fmt_ratio, fmt_time, machine, measure
from .workloads import (
    CHAIN_OPS,
    bias_relu_text,
    chain_expression,
    chain_text,
    guide_subgraph_text,
    whole_graph_text,
)

FUSED = "fused"
"""The backend the issue's speed targets are about (it may not exist yet)."""
DEFAULT_JSON = "benchmarks/results/kernels.json"
TARGETS = (  # issue 7, on FUSED's prepared call: (workload, metric, op, limit, text)
    ("subgraph_4096", "x_bound", "<=", 1.10, "fused on 4096x4096: at most 1.10x the bandwidth bound"),
    ("subgraph_4096", "vs_numpy", ">=", 1.4, "fused on 4096x4096: at least 1.4x faster than numpy eager"),
    ("subgraph_4096", "vs_numexpr", ">", 1.0, "fused on 4096x4096: faster than numexpr"),
    ("chain64", "vs_numpy", ">=", 5.0, "fused on the 64-op chain: at least 5x faster than numpy eager"),
    ("subgraph_10", "vs_numpy", ">", 1.0, "prepared fused call at 10x10: faster than numpy eager"),
)


@dataclass
class Workload:
    key: str
    title: str
    shape: str
    text: Callable[[str], str]  # backend -> DSL text with one explicit region
    inputs: dict[str, np.ndarray]
    numpy_eager: str  # the plain numpy expression over the inputs
    numpy_out: str | None  # the same with out= into the preallocated output `o`
    numexpr: str | None
    bandwidth: bool  # whether the bandwidth bound applies (large, memory-bound)
    whole_graph: bool = False
    skip_numexpr: str = ""
    expected_nbytes: int = 0

    def expected(self) -> np.ndarray:
        return np.asarray(eval(self.numpy_eager, {"np": np}, dict(self.inputs)))

    @property
    def bytes_moved(self) -> int:
        """Bytes a single fused pass reads (every input once) and writes (the output)."""
        return sum(a.nbytes for a in self.inputs.values()) + self.expected_nbytes


@dataclass
class System:
    name: str
    group: str  # byoc | ffi | peer | bound
    bench: Bench
    output: Callable[[], np.ndarray] | None = None  # one run, returning the result
    backend: str | None = None
    path: str = ""
    info: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------ workloads


def make_workloads(tiny: bool, chain_shape: tuple[int, int] | None = None) -> list[Workload]:
    rng = np.random.default_rng(0)

    def arrays(shape: tuple[int, ...], names: str) -> dict[str, np.ndarray]:
        return {n: rng.uniform(-1, 1, shape).astype(np.float32) for n in names.split()}

    big = (64, 64) if tiny else (4096, 4096)
    chain = chain_shape or ((32, 32) if tiny else (1024, 1024))
    rows, cols = (64, 32) if tiny else (4096, 1024)
    subgraph = "(((x + w0) - w1) * w2)"
    subgraph_out = "np.add(x, w0, out=o); np.subtract(o, w1, out=o); np.multiply(o, w2, out=o)"

    def shape_str(shape: tuple[int, ...]) -> str:
        return "float32[" + ", ".join(map(str, shape)) + "]"

    chain_inputs = arrays(chain, "x a b")
    chain_inputs["c"] = rng.uniform(0.5, 0.99, chain).astype(np.float32)
    ops = {"add": "np.add", "multiply": "np.multiply", "subtract": "np.subtract"}
    chain_out = []
    for i in range(64):
        op, operand = CHAIN_OPS[i % len(CHAIN_OPS)]
        chain_out.append(f"{ops[op]}({'x' if i == 0 else 'o'}, {operand}, out=o)")
    whole = "np.concatenate(((((x + w0) - w1) * w2), (((x + w3) - w4) * w5), ((x + w6) - w7)), axis=0)"
    whole_out = (
        "np.add(x, w0, out=o0); np.subtract(o0, w1, out=o0); np.multiply(o0, w2, out=o0); "
        "np.add(x, w3, out=o1); np.subtract(o1, w4, out=o1); np.multiply(o1, w5, out=o1); "
        "np.add(x, w6, out=o2); np.subtract(o2, w7, out=o2)"
    )
    result = [
        Workload(
            "subgraph_10",
            "guide subgraph ((x+w0)-w1)*w2: call overhead",
            shape_str((10, 10)),
            lambda b: guide_subgraph_text(b, (10, 10)),
            arrays((10, 10), "x w0 w1 w2"),
            subgraph,
            subgraph_out,
            subgraph,
            bandwidth=False,
        ),
        Workload(
            "subgraph_4096",
            f"guide subgraph ((x+w0)-w1)*w2 at {big[0]}x{big[1]}: bandwidth",
            shape_str(big),
            lambda b: guide_subgraph_text(b, big),
            arrays(big, "x w0 w1 w2"),
            subgraph,
            subgraph_out,
            subgraph,
            bandwidth=True,
        ),
        Workload(
            "chain64",
            f"64-op elementwise chain over {chain[0] * chain[1]:,} elements",
            shape_str(chain),
            lambda b: chain_text(b, chain, 64),
            chain_inputs,
            chain_expression(64),
            "; ".join(chain_out),
            chain_expression(64),
            bandwidth=True,
        ),
        Workload(
            "bias_relu",
            f"broadcasting bias-add-relu: relu(x[{rows}, {cols}] + bias[{cols}])",
            f"float32[{rows}, {cols}] + float32[{cols}]",
            lambda b: bias_relu_text(b, rows, cols),
            {**arrays((rows, cols), "x"), **arrays((cols,), "bias")},
            "np.maximum(x + bias, 0)",
            "np.add(x, bias, out=o); np.maximum(o, 0, out=o)",
            "where(x + bias > 0, x + bias, 0)",
            bandwidth=True,
        ),
        Workload(
            "whole_graph",
            "guide whole graph (2 regions + host ops + concatenate)",
            shape_str((10, 10)) + " x9 -> [30, 10]",
            whole_graph_text,
            arrays((10, 10), "x w0 w1 w2 w3 w4 w5 w6 w7"),
            whole,
            whole_out,
            None,
            bandwidth=False,
            whole_graph=True,
            skip_numexpr="numexpr has no concatenate",
        ),
    ]
    for w in result:
        w.expected_nbytes = w.expected().nbytes
    return result


# -------------------------------------------------------------------------- systems


def backend_names() -> tuple[list[str], str | None]:
    """Every backend on the spec search path (sorted), or why they cannot be listed."""
    import byoc.api as api

    try:
        return [spec.name for spec in api.list_backends()], None
    except Exception as exc:  # a spec being edited by someone else must not stop the suite
        return [], f"{type(exc).__name__}: {_first_line(exc)}"


def byoc_systems(
    w: Workload, label: str, backend: str, options: dict[str, str], catalog: Any
) -> tuple[list[System], str | None]:
    """The systems of one byoc backend for ``w``, or ([], why it does not apply)."""
    import byoc.api as api
    from byoc.building import build

    try:
        program = api.parse(w.text(backend), "graph", catalog=catalog)
        model = build(program, options=options or None, catalog=catalog)
    except Exception as exc:  # ByocError when it cannot express w; anything else is reported too
        return [], _first_line(exc)
    inputs = w.inputs
    if w.whole_graph:
        ex = model.executor()
        for name, value in inputs.items():
            ex.set_input(name, value)

        def via_executor() -> np.ndarray:
            ex.run()
            return ex.get_output(0)

        return [
            System(
                f"{label} model(**inputs)",
                "byoc",
                Bench("model(**inputs)", {"model": model, "inputs": inputs}),
                lambda: model(**inputs)[0],
                backend,
                "model",
            ),
            System(f"{label} executor.run()", "byoc", Bench.of(ex.run), via_executor, backend, "executor"),
        ], None
    call = next(n for n in program.functions[0].nodes if n.callee is not None)
    args = [inputs[name] for name in call.inputs]  # a region's inputs come in first-use order
    modules = [m for m in model.modules if m.symbols()]
    if len(modules) != 1 or len(modules[0].symbols()) != 1:
        return [], f"expected one module with one function, got {modules}"
    module, symbol = modules[0], modules[0].symbols()[0]
    out_type = module.signature(symbol).outputs[0]
    systems = []
    names = [f"a{i}" for i in range(len(args) + 1)]
    stmt = f"f({', '.join(names)})"
    info = {"label": label, "module_kind": module.kind, "symbol": symbol}
    if hasattr(module, "prepare"):
        out_p = np.empty(out_type.shape, out_type.dtype)
        prepared = module.prepare(symbol, *args, out_p)

        def run_prepared() -> np.ndarray:
            prepared()
            return out_p.copy()

        systems.append(
            System(f"{label} prepared", "byoc", Bench.of(prepared), run_prepared, backend, "prepared", info)
        )
    fn = module.get_function(symbol)
    out_g = np.empty(out_type.shape, out_type.dtype)

    def run_function() -> np.ndarray:
        fn(*args, out_g)
        return out_g.copy()

    systems.append(
        System(
            f"{label} get_function",
            "byoc",
            Bench(stmt, {"f": fn, **dict(zip(names, [*args, out_g]))}),
            run_function,
            backend,
            "get_function",
            info,
        )
    )
    if w.key == "subgraph_10" and hasattr(module, "path"):
        systems += raw_ffi_systems(label, backend, module, symbol, args, out_type)
    return systems, None


def raw_ffi_systems(label, backend, module, symbol, args, out_type) -> list[System]:
    """The same library function called through tvm_ffi directly (no byoc wrapper)."""
    import tvm_ffi

    raw = tvm_ffi.load_module(str(module.path))[symbol]
    out = np.empty(out_type.shape, out_type.dtype)
    arrays = [*args, out]
    tensors = [tvm_ffi.from_dlpack(a) for a in arrays]
    names = [f"a{i}" for i in range(len(arrays))]
    stmt = f"f({', '.join(names)})"
    return [
        System(
            f"{label} raw tvm_ffi (prebuilt tensors)",
            "ffi",
            Bench(stmt, {"f": raw, **dict(zip(names, tensors))}),
            None,
            backend,
            "raw_tensors",
            {"label": label},
        ),
        System(
            f"{label} raw tvm_ffi (numpy arrays)",
            "ffi",
            Bench(stmt, {"f": raw, **dict(zip(names, arrays))}),
            None,
            backend,
            "raw_numpy",
            {"label": label},
        ),
    ]


def nop_system(n_args: int) -> System | None:
    """tvm_ffi's own call cost: its registered no-op, on ``n_args`` prebuilt tensors."""
    import tvm_ffi

    try:
        nop = tvm_ffi.get_global_func("testing.nop")
    except Exception:
        return None
    tensors = [tvm_ffi.from_dlpack(np.zeros((10, 10), np.float32)) for _ in range(n_args)]
    names = [f"a{i}" for i in range(n_args)]
    return System(
        f"tvm_ffi testing.nop ({n_args} tensors)",
        "ffi",
        Bench(f"f({', '.join(names)})", {"f": nop, **dict(zip(names, tensors))}),
        path="nop",
    )


def peer_systems(w: Workload, skipped: dict[str, str]) -> list[System]:
    inputs = w.inputs
    expected = w.expected()
    systems = [
        System(
            "numpy eager",
            "peer",
            Bench(w.numpy_eager, {"np": np, **inputs}),
            lambda: np.asarray(eval(w.numpy_eager, {"np": np}, dict(inputs))),
            path="numpy",
        )
    ]
    if w.numpy_out:
        o = np.empty_like(expected)
        ns = {"np": np, **inputs, "o": o}
        if w.whole_graph:
            rows = expected.shape[0] // 3
            ns.update(o0=o[:rows], o1=o[rows : 2 * rows], o2=o[2 * rows :])

        def numpy_out() -> np.ndarray:
            exec(w.numpy_out, dict(ns))
            return o.copy()

        systems.append(
            System("numpy out= (preallocated)", "peer", Bench(w.numpy_out, ns), numpy_out, path="numpy_out")
        )
    ne, reason = peers.numexpr_module()
    if w.numexpr is None:
        skipped["numexpr"] = w.skip_numexpr
    elif ne is None:
        skipped["numexpr"] = reason
    else:
        o_ne = np.empty_like(expected)
        ne_ns = {"ne": ne, "expr": w.numexpr, "d": dict(inputs), "o": o_ne}

        def run_ne() -> np.ndarray:
            ne.evaluate(w.numexpr, local_dict=dict(inputs), out=o_ne)
            return o_ne.copy()

        systems.append(
            System(
                "numexpr",
                "peer",
                Bench("ne.evaluate(expr, local_dict=d, out=o)", ne_ns),
                run_ne,
                path="numexpr",
            )
        )
    tvm, reason = peers.tvm_module()
    if tvm is None:
        skipped["TVM relax llvm"] = reason
    else:
        import byoc.api as api

        try:
            fn = api.parse(w.text("json"), "graph").functions[0]
            main = peers.tvm_build(fn)
            names = [p.name for p in fn.params]
            tensors = peers.tvm_tensors(inputs, names)
            args = [f"a{i}" for i in range(len(tensors))]
            systems.append(
                System(
                    "TVM relax llvm",
                    "peer",
                    Bench(f"f({', '.join(args)})", {"f": main, **dict(zip(args, tensors))}),
                    lambda: main(*tensors).numpy(),
                    path="tvm",
                    info={"tvm": tvm.__version__},
                )
            )
        except Exception as exc:
            skipped["TVM relax llvm"] = f"build failed: {type(exc).__name__}: {_first_line(exc)}"
    return systems


def bound_systems(w: Workload) -> list[System]:
    """np.copyto over two arrays holding, together, the bytes the kernel moves: on one
    thread, and split over every core (Python threads; numpy copies without the GIL).
    The faster of the two is the bound."""
    n = max(w.bytes_moved // 8, 1)
    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    size = _mb(2 * n * 4)
    systems = [
        System(
            f"bandwidth bound: copy of {size}, 1 thread",
            "bound",
            Bench("np.copyto(dst, src)", {"np": np, "src": src, "dst": dst}),
            path="bound",
            info={"copy_bytes_moved": 2 * n * 4, "threads": 1},
        )
    ]
    threads = os.cpu_count() or 1
    if threads > 1:
        pool = ThreadPoolExecutor(threads, thread_name_prefix="bench-copy")
        chunks = list(zip(np.array_split(dst, threads), np.array_split(src, threads)))

        def copy_all() -> None:
            for future in [pool.submit(np.copyto, d, s) for d, s in chunks]:
                future.result()

        systems.append(
            System(
                f"bandwidth bound: copy of {size}, {threads} threads",
                "bound",
                Bench.of(copy_all),
                path="bound_threads",
                info={"copy_bytes_moved": 2 * n * 4, "threads": threads},
            )
        )
    return systems


# -------------------------------------------------------------------------- running


def run_workload(w, variants, catalog, rounds, min_batch_s, log) -> dict[str, Any]:
    log(f"[kernels] {w.key}: building")
    systems: list[System] = []
    not_applicable: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for label, backend, options in variants:
        try:
            found, reason = byoc_systems(w, label, backend, options, catalog)
        except Exception as exc:  # built, but could not be bound or called: report it
            found, reason = [], f"{type(exc).__name__}: {_first_line(exc)}"
        systems += found
        if reason:
            not_applicable[label] = reason
    if w.key == "subgraph_10":
        nop = nop_system(len(w.inputs) + 1)
        if nop:
            systems.append(nop)
    systems += peer_systems(w, skipped)
    if w.bandwidth:
        systems += bound_systems(w)
    expected = w.expected()
    checks: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    for s in systems:
        if s.output is None:
            continue
        try:
            got = np.asarray(s.output())
        except Exception as exc:  # a system that cannot run is reported, not timed
            failed[s.name] = f"{type(exc).__name__}: {_first_line(exc)}"
            continue
        ok = got.shape == expected.shape and got.dtype == expected.dtype
        err = (
            float(np.max(np.abs(got.astype(np.float64) - expected))) if got.shape == expected.shape else None
        )
        scale = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
        ok = ok and err is not None and err <= 1e-4 * scale
        checks[s.name] = {"correct": bool(ok), "max_abs_error": err}
    systems = [s for s in systems if s.name not in failed]
    not_applicable.update({f"{name} (failed to run)": why for name, why in failed.items()})
    log(f"[kernels] {w.key}: timing {len(systems)} systems x {rounds} rounds")
    stats = measure({s.name: s.bench for s in systems}, rounds, min_batch_s)
    numpy_t = stats["numpy eager"]["median_s"]
    bounds = [stats[s.name]["median_s"] for s in systems if s.group == "bound"]
    bound_t = min(bounds) if bounds else None
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
        "bound_s": bound_t,
        "bound_gb_per_s": w.bytes_moved / bound_t / 1e9 if bound_t else None,
        "systems": rows,
        "not_applicable": not_applicable,
        "skipped": skipped,
    }


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


# -------------------------------------------------------------------------- targets


def evaluate_targets(results: dict[str, Any], tiny: bool) -> list[dict[str, Any]]:
    """The issue's kernel targets, each measured, with met True/False (None: not measurable)."""
    wl = results["workloads"]
    targets = []
    label = FUSED
    for key, metric, op, limit, text in TARGETS:
        t = {
            "target": text,
            "workload": key,
            "system": f"{label} prepared",
            "metric": metric,
            "op": op,
            "limit": limit,
        }
        t.update(value=None, met=None, note="")
        workload = wl.get(key)
        row = workload["systems"].get(f"{label} prepared") if workload else None
        if tiny:
            t["note"] = "not evaluated on --tiny sizes"
        elif workload is None:
            t["note"] = "workload not run"
        elif row is None:
            reason = workload["not_applicable"].get(label)
            t["note"] = f"{label}: {reason}" if reason else f"no backend named {label!r} was found"
        elif row["correct"] is False:
            t["note"] = "wrong result"
        else:
            value = None
            if metric == "x_bound":
                value = row["x_bound"]
            elif metric == "vs_numpy":
                value = row["speedup_vs_numpy"]
            elif metric == "vs_numexpr":
                ne = workload["systems"].get("numexpr")
                value = ne["median_s"] / row["median_s"] if ne else None
                if ne is None:
                    t["note"] = workload["skipped"].get("numexpr", "numexpr not measured")
            if value is not None:
                t["value"] = value
                t["met"] = bool(
                    value <= limit if op == "<=" else value >= limit if op == ">=" else value > limit
                )
        targets.append(t)
    return targets


def _target_value(t: dict[str, Any]) -> str:
    if t["value"] is None:
        return "-"
    if t["metric"] == "x_bound":
        return f"{t['value']:.2f}x the bound"
    other = "numexpr" if t["metric"] == "vs_numexpr" else "numpy eager"
    return f"{t['value']:.2f}x faster than {other}"


def status(t: dict[str, Any]) -> str:
    if t["met"] is None:
        return f"n/a ({t['note']})" if t["note"] else "n/a"
    return "met" if t["met"] else "MISSED"


# ------------------------------------------------------------------------- printing


def markdown(results: dict[str, Any]) -> str:
    out = []
    marks: dict[tuple[str, str], list[str]] = {}
    for t in results["targets"]:
        short = {"x_bound": f"<= {t['limit']:.2f}x bound", "vs_numexpr": "< numexpr"}.get(
            t["metric"], f"{t['op']} {t['limit']:g}x vs numpy"
        )
        marks.setdefault((t["workload"], t["system"]), []).append(f"{short}: {status(t).split(' (')[0]}")
    for key, w in results["workloads"].items():
        head = f"### {key}: {w['title']}\n\n{w['shape']}"
        if w["bound_s"]:
            head += (
                f"; {_mb(w['bytes_moved'])} read + written; bound {fmt_time(w['bound_s'])} "
                f"({w['bound_gb_per_s']:.1f} GB/s)"
            )
        out += [head, ""]
        out.append("| system | median | IQR | speedup vs numpy eager | x bound | check | target |")
        out.append("| --- | ---: | ---: | ---: | ---: | --- | --- |")
        for name, r in w["systems"].items():
            if r["group"] == "ffi":
                continue
            check = {True: "ok", False: "WRONG", None: "-"}[r["correct"]]
            iqr = f"{fmt_time(r['p25_s'])}-{fmt_time(r['p75_s'])}"
            target = "; ".join(marks.get((key, name), []))
            out.append(
                f"| {name} | {fmt_time(r['median_s'])} | {iqr} | {fmt_ratio(r['speedup_vs_numpy'])} | "
                f"{fmt_ratio(r['x_bound'])} | {check} | {target} |"
            )
        notes = [f"{k}: {v}" for k, v in w["not_applicable"].items()]
        if notes:
            out.append("\nnot expressible by: " + "; ".join(notes))
        if w["skipped"]:
            out.append("skipped peers: " + "; ".join(f"{k}: {v}" for k, v in w["skipped"].items()))
        out.append("")
    co = results.get("call_overhead")
    if co and co["backends"]:
        out += ["### prepared-call fast path (guide subgraph, 10x10; median per call)", ""]
        out.append(
            "| backend | prepared() | raw tvm_ffi, prebuilt tensors | raw tvm_ffi, numpy arrays "
            "| get_function(*arrays) | prepared - raw | prepared vs numpy eager |"
        )
        out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for label, b in co["backends"].items():
            out.append(
                f"| {label} | {fmt_time(b['prepared_s'])} | {fmt_time(b['raw_tensors_s'])} | "
                f"{fmt_time(b.get('raw_numpy_s'))} | {fmt_time(b.get('get_function_s'))} | "
                f"{b['prepared_overhead_s'] * 1e9:+.0f} ns | "
                f"{fmt_ratio(co['numpy_eager_s'] / b['prepared_s'])} faster |"
            )
        floor = f"tvm_ffi's own call cost (testing.nop, same argument count): {fmt_time(co['tvm_ffi_nop_s'])}"
        out.append(f"\n{floor}; numpy eager on the same expression: {fmt_time(co['numpy_eager_s'])}\n")
    out += ["### kernel targets", "", "| target | measured | status |", "| --- | --- | --- |"]
    for t in results["targets"]:
        out.append(f"| {t['target']} | {_target_value(t)} | {status(t)} |")
    m = results["machine"]
    p = results["peers"]
    out.append(
        f"\n{m['cpu']}, {m['cores']} cores; {m['compiler']}; numpy {m['numpy']}, "
        f"numexpr {p['numexpr'] or 'absent'} ({p['numexpr_threads'] or '-'} threads), TVM {p['tvm'] or 'absent'}; "
        f"{results['rounds']} rounds, medians"
    )
    return "\n".join(out)


def chart(results: dict[str, Any], path: Path) -> Path | None:
    """A PNG of the medians per workload (log scale), when matplotlib is installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    workloads = list(results["workloads"].items())
    heights = [max(len(w["systems"]), 1) for _, w in workloads]
    fig, axes = plt.subplots(
        len(workloads),
        1,
        figsize=(9, 1.2 * len(workloads) + 0.28 * sum(heights)),
        squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )
    colours = {"byoc": "tab:blue", "peer": "tab:orange", "bound": "tab:grey", "ffi": "tab:green"}
    for ax, (key, w) in zip(axes[:, 0], workloads):
        names = list(w["systems"])
        times = [w["systems"][n]["median_s"] for n in names]
        ax.barh(names, times, color=[colours[w["systems"][n]["group"]] for n in names])
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_title(f"{key}: {w['title']}", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("median seconds per call (log)", fontsize=7)
        if w["bound_s"]:
            ax.axvline(w["bound_s"], color="black", linestyle="--", linewidth=0.8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _mb(n: int) -> str:
    return f"{n / 1e6:.0f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
        "machine": machine(),
        "peers": peers.versions(),
        "backends": names,
        "backends_error": list_error,
        "workloads": {},
    }
    for w in make_workloads(tiny, chain_shape):
        if only and w.key not in only:
            continue
        results["workloads"][w.key] = run_workload(w, variants, catalog, rounds, min_batch_s, log)
    if "subgraph_10" in results["workloads"]:
        results["call_overhead"] = call_overhead(results["workloads"]["subgraph_10"])
    results["targets"] = evaluate_targets(results, tiny)
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
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {out}")
    if not args.no_chart:
        png = chart(results, out.with_suffix(".png"))
        print(f"wrote {png}" if png else "no chart: matplotlib is not installed")
    return 1 if any(t["met"] is False for t in results["targets"]) else 0
