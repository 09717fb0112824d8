"""Who runs each kernel workload: byoc backends (prepared and checked calls, raw
tvm_ffi), peers (numpy, numexpr, TVM) and the bandwidth bound."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from . import peers
from .kernel_workloads import System, Workload, describe_error, first_line, megabytes
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
    """The systems of one byoc backend for ``w``, or ([], why it does not apply)."""
    import byoc.api as api
    from byoc.building import build

    try:
        program = api.parse(w.text(backend), "graph", catalog=catalog)
        model = build(program, options=options or None, catalog=catalog)
    except Exception as exc:  # ByocError when it cannot express w; anything else is reported too
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
            skipped["TVM relax llvm"] = f"build failed: {describe_error(exc)}"
    return systems


def bound_systems(w: Workload) -> list[System]:
    """np.copyto over two arrays holding, together, the bytes the kernel moves: on one
    thread, and split over every core (Python threads; numpy copies without the GIL).
    The faster of the two is the bound."""
    n = max(w.bytes_moved // 8, 1)
    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    size = megabytes(2 * n * 4)
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
