"""Who runs each networks workload: byoc (a backend's prepared call for one kernel, the
graph executor for a network) and the peers (numpy, ONNX Runtime, TVM). The native
floors and the peak are in network_native.py."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from . import peers
from .kernel_workloads import System, first_line, split_choice
from .network_workloads import Workload
from .timing import Bench


def byoc_systems(
    w: Workload, backends: tuple[str, ...], catalog: Any, constant: bool = False
) -> tuple[list[System], str | None]:
    """byoc on ``backends`` (a --backend choice, with build options: :func:`split_choice`)
    for ``w`` (with ``constant``, its graph whose weights are constants,
    ``w.constant_program``), or ([], why it cannot express ``w``).

    A kernel workload must go whole to the backend (one region, nothing on the host)
    and is timed through ``module.prepare``; a network is partitioned over
    ``backends`` (the rest on the host, as ``byoc run --backend`` does) and timed
    through its graph executor's ``run()``. A failed build propagates: a byoc backend
    is never optional."""
    import byoc.api as api
    from byoc.building import build, offload
    from byoc.errors import GraphError, UsageError

    names, options, label = split_choice(backends)
    suffix = ", constant weights" if constant else ""
    loader = api.backend_loader(None, catalog)
    try:
        program = offload(w.constant_program if constant else w.program, "graph", names, loader, catalog)
    except (GraphError, UsageError) as exc:  # UsageError: nothing is offloaded
        return [], first_line(exc)
    fn = program.functions[0]
    if w.kind != "network":
        host = [n.op for n in fn.nodes if n.callee is None]
        if host or len(fn.nodes) != 1:
            return [], f"not all on the backend: {', '.join(host) or 'several regions'} left over"
    model = build(program, options=options or None, catalog=catalog)
    if w.kind == "network":
        ex = model.executor()
        for name, value in (w.onnx_inputs if constant else w.inputs).items():  # constants are no inputs
            ex.set_input(name, value)

        def via_executor() -> np.ndarray:
            ex.run()
            return ex.get_output(0).copy()

        info = {"label": label, "regions": sum(1 for n in fn.nodes if n.callee is not None)}
        return [
            System(
                f"byoc {label} executor.run(){suffix}",
                "byoc",
                Bench.of(ex.run),
                via_executor,
                label,
                "executor",
                info,
            )
        ], None
    call = fn.nodes[0]
    (module,) = [m for m in model.modules if m.symbols()]
    (symbol,) = module.symbols()
    out_type = module.signature(symbol).outputs[0]
    out = np.empty(out_type.shape, out_type.dtype)
    prepared = module.prepare(symbol, *(w.inputs[name] for name in call.inputs), out)

    def run_prepared() -> np.ndarray:
        prepared()
        return out.copy()

    info = {"label": label, "symbol": symbol}
    name = f"byoc {label} prepared{suffix}"
    return [System(name, "byoc", Bench.of(prepared), run_prepared, label, "prepared", info)], None


# -------------------------------------------------------------------------- peers


def numpy_system(w: Workload) -> System | None:
    """numpy: matmul into a preallocated output for dense (x @ w.T) and matmul (a @ b),
    im2col + matmul for conv; none for an int8 conv (numpy has no int8 product that
    accumulates in int32 at speed)."""
    if w.kind == "conv":
        x, wt, b = w.inputs["x"], w.inputs["w"], w.inputs["b"]
        return System(
            "numpy im2col + matmul",
            "peer",
            Bench.of(lambda: conv_im2col(x, wt, b)),
            lambda: conv_im2col(x, wt, b),
            path="numpy",
        )
    if w.kind not in ("dense", "matmul"):
        return None
    a, b = (w.inputs["x"], w.inputs["w"].T) if w.kind == "dense" else (w.inputs["a"], w.inputs["b"])
    o = np.empty(w.expected.shape, np.float32)
    ns = {"np": np, "a": a, "b": b, "o": o}

    def product() -> np.ndarray:
        np.matmul(a, b, out=o)
        return o.copy()

    return System("numpy matmul (out=)", "peer", Bench("np.matmul(a, b, out=o)", ns), product, path="numpy")


def conv_im2col(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """relu(conv2d(x, w, pads 1, stride 1) + b) as numpy does it: the padded input's
    KH*KW shifted windows stacked (im2col), one matmul with the weights, bias, relu."""
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))  # n c h w kh kw
    cols = cols.transpose(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, h * wd)
    out = np.matmul(w.reshape(m, -1), cols).reshape(n, m, h, wd)
    out += b[None, :, None, None]
    return np.maximum(out, 0, out=out)


def ort_systems(w: Workload) -> list[System]:
    """ONNX Runtime on 1 thread and on every core, IO binding on preallocated arrays,
    its threads not spinning when idle."""
    ort, _ = peers.ort_module()
    caveat = peers.ort_int8_caveat(w.onnx_model)
    systems = []
    for threads in sorted({1, os.cpu_count() or 1}):
        session = ort.InferenceSession(
            w.onnx_model.SerializeToString(),
            peers.ort_options(ort, threads),
            providers=["CPUExecutionProvider"],
        )
        out = np.empty(w.expected.shape, w.expected.dtype)
        binding = session.io_binding()
        for name, a in w.onnx_inputs.items():
            binding.bind_input(name, "cpu", 0, a.dtype, list(a.shape), a.ctypes.data)
        binding.bind_output(
            session.get_outputs()[0].name, "cpu", 0, out.dtype, list(out.shape), out.ctypes.data
        )

        def run(session=session, binding=binding) -> None:
            session.run_with_iobinding(binding)

        def result(run=run, out=out) -> np.ndarray:
            run()
            return out.copy()

        name = f"ONNX Runtime ({threads} thread{'s' * (threads > 1)}, IO binding)"
        systems.append(
            System(
                name,
                "peer",
                Bench.of(run),
                result,
                path=f"ort_{threads}",
                info={"threads": threads, **({"caveat": caveat} if caveat else {})},
            )
        )
    return systems


def tvm_systems(w: Workload) -> list[System]:
    """TVM relax from the ONNX model: ``default`` (target llvm) and ``target-tuned``
    (llvm for this CPU, every core; no schedule search: see docs/performance.md)."""
    tvm, _ = peers.tvm_module()
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    mod = from_onnx(w.onnx_model)
    tensors = [tvm.runtime.tensor(a) for a in w.onnx_inputs.values()]
    systems = []
    for config, target in (
        ("default", tvm.target.Target("llvm")),
        ("target-tuned", peers.tvm_host_target(tvm)),
    ):
        main = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())["main"]

        def result(main=main) -> np.ndarray:
            out = main(*tensors)
            return (out[0] if isinstance(out, tvm.ir.Array) else out).numpy()

        systems.append(
            System(
                f"TVM relax ({config})",
                "peer",
                Bench("f(*a)", {"f": main, "a": tensors}),
                result,
                path=f"tvm_{config}",
            )
        )
    return systems
