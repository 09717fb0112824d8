"""Who runs each kernel workload: byoc backends (prepared and checked calls, raw
tvm_ffi) and peers (numpy, numexpr, TVM, ONNX Runtime). The memory bound is in
memory_bound.py."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from . import peers
from .kernel_workloads import System, Workload, describe_error, first_line
from .timing import Bench

# -------------------------------------------------------------------------- systems


def backend_names() -> tuple[list[str], str | None]:
    """Every backend on the spec search path (sorted), or why they cannot be listed."""
    import byoc.api as api

    try:
        return [spec.name for spec in api.list_backends()], None
    except Exception as exc:  # a spec being edited by someone else must not stop the suite
        return [], describe_error(exc)


def byoc_systems(
    w: Workload, label: str, backend: str, options: dict[str, str], catalog: Any
) -> tuple[list[System], str | None]:
    """The systems of one byoc backend for ``w``, or ([], why it cannot express ``w``).

    Only a GraphError (the spec has no such op, dtype, rank or broadcast) means "not
    expressible"; any other error, a failed build above all, propagates: a byoc
    backend is never optional."""
    import byoc.api as api
    from byoc.building import build
    from byoc.errors import GraphError

    try:
        program = api.parse(w.text(backend), "graph", catalog=catalog)
        model = build(program, options=options or None, catalog=catalog)
    except GraphError as exc:
        return [], first_line(exc)
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


def peer_systems(w: Workload, skipped: dict[str, str], failed: dict[str, str]) -> list[System]:
    """numpy (always), then numexpr, TVM and ONNX Runtime where installed. A peer that
    is not installed goes to ``skipped``; one that fails to build goes to ``failed``."""
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
    fn = None
    for name, make, (_, why) in (
        ("TVM", _tvm_systems, peers.tvm_module()),
        ("ONNX Runtime", _ort_systems, peers.ort_module()),
    ):
        if why is not None:
            skipped[name] = why
            continue
        import byoc.api as api

        fn = fn or api.parse(w.text("json"), "graph").functions[0]
        try:
            systems += make(w, fn, expected)
        except Exception as exc:  # installed, but cannot build this workload: a failure
            failed[name] = f"build failed: {describe_error(exc)}"
    return systems


def _tvm_systems(w: Workload, fn: Any, expected: np.ndarray) -> list[System]:
    names = [p.name for p in fn.params]
    tensors = peers.tvm_tensors(w.inputs, names)
    args = [f"a{i}" for i in range(len(tensors))]
    systems = []
    for config, tuned in (("default", False), ("tuned", True)):
        main = peers.tvm_build(fn, tuned)
        systems.append(
            System(
                f"TVM relax ({config})",
                "peer",
                Bench(f"f({', '.join(args)})", {"f": main, **dict(zip(args, tensors))}),
                lambda main=main: main(*tensors).numpy(),
                path=f"tvm_{config}",
            )
        )
    return systems


def _ort_systems(w: Workload, fn: Any, expected: np.ndarray) -> list[System]:
    systems = []
    for threads in sorted({1, os.cpu_count() or 1}):
        out = np.empty_like(expected)
        run = peers.ort_runner(fn, w.inputs, out, threads)

        def result(run=run, out=out) -> np.ndarray:
            run()
            return out.copy()

        systems.append(
            System(
                f"ONNX Runtime ({threads} thread{'s' * (threads > 1)}, IO binding)",
                "peer",
                Bench.of(run),
                result,
                path=f"ort_{threads}",
            )
        )
    return systems
