"""The peers byoc is measured against: numexpr, Apache TVM (relax) and ONNX Runtime.

All are optional (`pip install -e '.[peers]'`); a peer that is not installed is
reported as "not installed", with the reason, and the ratios against it are skipped.
One that is installed but fails to build or computes a wrong result is a failure of
the suite, but for a deviation the peer's own documentation gives for this CPU
(:func:`ort_int8_caveat`): that result is shown with its caveat and timed. The TVM
and ONNX programs of a workload are translated from the very byoc IR the byoc
backends compile, so every system computes the same graph.

Each peer runs at its best reasonable configuration, and at its default where that
differs:

* TVM: ``default`` is ``tvm.compile(mod, target="llvm")`` with the default relax
  pipeline; ``tuned`` targets the host CPU (``mcpu``) with ``num-cores`` set and
  gives every fused kernel the schedule a competent user writes for elementwise
  code: producers inlined, the loops fused, the outer loop parallel and the inner
  eight lanes vectorised.
* ONNX Runtime: an ``InferenceSession`` over an ONNX model made with
  ``onnx.helper``, run with IO binding on the caller's arrays (inputs and a
  preallocated output), with 1 intra-op thread and with one per core, its idle
  threads sleeping instead of spinning.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from byoc.ir import Function
from byoc.runtime.cpu import cpu_flags

INSTALL = "pip install -e '.[peers]'"
ONNX_OPSET = 17
ONNX_IR_VERSION = 8
TUNED_SPLIT = (16, 8)  # inner loop: 16 vectors of 8 float32 lanes per parallel task step


def numexpr_module() -> tuple[Any, str | None]:
    """(numexpr, None), or (None, why it cannot be used)."""
    try:
        import numexpr
    except ImportError as exc:
        return None, f"numexpr is not installed ({exc.name}); {INSTALL}"
    return numexpr, None


def tvm_module() -> tuple[Any, str | None]:
    """(tvm, None), or (None, why it cannot be used)."""
    try:
        import tvm
        from tvm import relax  # noqa: F401
    except ImportError as exc:
        return None, f"apache-tvm is not installed ({exc.name}); {INSTALL}"
    except Exception as exc:  # a broken install is reported like a missing one
        return None, f"apache-tvm does not import: {type(exc).__name__}: {exc}"
    return tvm, None


INT8_OPS = frozenset(
    {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger"}
)
"""The ONNX ops of an int8 model, which ONNX Runtime may run on its integer kernels."""

VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


def int8_saturation_caveat(library: str) -> str | None:
    """Why ``library``'s uint8-by-int8 kernels may clip a sum on this CPU, or None: on
    an x86 CPU with AVX2 but without VNNI they multiply with ``vpmaddubsw``, which adds
    each pair of products into a saturating int16 (oneDNN's and ONNX Runtime's
    documentation say so). With VNNI, ``vpdpbusd`` sums into int32, exactly."""
    flags = cpu_flags()
    if "avx2" not in flags or flags & VNNI_FLAGS:
        return None
    return f"{library}'s u8s8 kernels saturate int16 pair sums on this x86 CPU without VNNI"


def ort_int8_caveat(model: Any) -> str | None:
    """Why ONNX Runtime's result for the ONNX ``model`` may differ from ONNX's
    arithmetic on this CPU, or None. On an x86 CPU without VNNI, ONNX Runtime's
    uint8-by-int8 kernels multiply with AVX2's ``vpmaddubsw``, which adds each pair
    of products into a saturating int16, so a large sum is clipped (ONNX Runtime's
    quantization documentation says so and suggests ``reduce_range``); its QDQ
    graphs run on those kernels at its default optimisation level. Measured on an AMD
    EPYC with AVX2 only: the tiny conv3x3 int8 workload off by 46 in the uint8
    result, the QDQ CNN by one step of its output's scale."""
    if not any(node.op_type in INT8_OPS for node in model.graph.node):
        return None
    return int8_saturation_caveat("ONNX Runtime")


def ort_module() -> tuple[Any, str | None]:
    """(onnxruntime, None), or (None, why it cannot be used); needs onnx to make models."""
    try:
        import onnx  # noqa: F401
        import onnxruntime
    except ImportError as exc:
        return None, f"{exc.name} is not installed; {INSTALL}"
    return onnxruntime, None


def versions() -> dict[str, Any]:
    ne, _ = numexpr_module()
    tvm, _ = tvm_module()
    ort, _ = ort_module()
    return {
        "numexpr": getattr(ne, "__version__", None),
        "numexpr_threads": getattr(ne, "nthreads", None) if ne else None,
        "tvm": getattr(tvm, "__version__", None),
        "onnxruntime": getattr(ort, "__version__", None),
    }


# --------------------------------------------------------------- IR translation


def translate(fn: Function, env: dict[str, Any], emit: Callable[[str, list[Any], dict], Any]) -> list[Any]:
    """Walk ``fn`` (regions inlined, each in its own scope), calling
    ``emit(op, args, attrs)`` for every op node; returns the values of its outputs."""
    if fn.constants:
        raise NotImplementedError("constants are not translated for the peers")
    for node in fn.nodes:
        args = [env[name] for name in node.inputs]
        if node.callee is not None:
            values = translate(node.callee, dict(zip((p.name for p in node.callee.params), args)), emit)
        else:
            values = [emit(node.op, args, dict(node.attrs))]
        env.update(zip(node.outputs, values))
    return [env[name] for name in fn.outputs]


# ------------------------------------------------------------------------- TVM

_RELAX_OPS = {
    "add": "add",
    "subtract": "subtract",
    "multiply": "multiply",
    "divide": "divide",
    "maximum": "maximum",
    "minimum": "minimum",
    "negative": "negative",
    "relu": "nn.relu",
}


def tvm_build(fn: Function, tuned: bool) -> Any:
    """``fn`` as a relax program on a VirtualMachine (see the module doc for
    ``tuned``): returns its ``main``, which takes tvm tensors and returns a new one."""
    tvm, reason = tvm_module()
    if tvm is None:
        raise RuntimeError(reason)
    from tvm import relax

    tensor_type = getattr(relax, "TensorStructInfo", None) or relax.TensorType  # renamed in TVM 0.27
    bb = relax.BlockBuilder()
    params = [relax.Var(p.name, tensor_type(list(p.type.shape), p.type.dtype)) for p in fn.params]

    def emit(op: str, args: list[Any], attrs: dict) -> Any:
        if op == "concatenate":
            return bb.emit(relax.op.concat(args, axis=int(attrs.get("axis", 0))))
        if op not in _RELAX_OPS:
            raise NotImplementedError(f"op {op} is not translated to relax")
        make = relax.op
        for part in _RELAX_OPS[op].split("."):
            make = getattr(make, part)
        return bb.emit(make(*args))

    with bb.function("main", params):
        with bb.dataflow():
            outputs = translate(fn, {p.name: v for p, v in zip(fn.params, params)}, emit)
            out = bb.emit_output(outputs[0] if len(outputs) == 1 else relax.Tuple(outputs))
        bb.emit_func_output(out)
    if tuned:
        executable = _tvm_tuned(tvm, relax, bb.get())
    else:
        compile_ = getattr(tvm, "compile", None) or relax.build
        executable = compile_(bb.get(), target="llvm")
    return relax.VirtualMachine(executable, tvm.cpu())["main"]


def tvm_host_target(tvm: Any) -> Any:
    """llvm for this CPU (``mcpu``) on every core (``num-cores``)."""
    from tvm.target import codegen

    return tvm.target.Target(
        {"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu(), "num-cores": os.cpu_count() or 1}
    )


def _tvm_tuned(tvm: Any, relax: Any, mod: Any) -> Any:
    """The default CPU pipeline with the elementwise schedule between fusion and lowering."""
    from tvm.relax.backend.cpu_generic import pipeline as cpu
    from tvm.s_tir import Schedule

    target = tvm_host_target(tvm)
    with target:
        mod = tvm.transform.Sequential(cpu.library_dispatch_passes(target) + cpu.legalize_passes(target))(mod)
    for gvar, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            continue
        sch = Schedule(func)
        blocks = sch.get_child_blocks(sch.get_sblock("root"))
        for block in blocks[:-1]:
            sch.compute_inline(block)
        loop = sch.fuse(*sch.get_loops(blocks[-1]))
        outer, inner = sch.split(loop, [None, TUNED_SPLIT[0] * TUNED_SPLIT[1]])
        sch.parallel(outer)
        _, lanes = sch.split(inner, [None, TUNED_SPLIT[1]])
        sch.vectorize(lanes)
        mod[gvar] = sch.mod["main"]
    rest = tvm.transform.Sequential(cpu.dataflow_lower_passes(target) + cpu.finalize_passes(target))
    return tvm.compile(mod, target=target, relax_pipeline=rest)


def tvm_tensors(arrays: Mapping[str, np.ndarray], names: list[str]) -> list[Any]:
    tvm, _ = tvm_module()
    make = getattr(tvm.runtime, "tensor", None) or tvm.nd.array  # tvm.nd.array before TVM 0.27
    return [make(arrays[name]) for name in names]


# ----------------------------------------------------------------- ONNX Runtime

_ONNX_OPS = {
    "add": "Add",
    "subtract": "Sub",
    "multiply": "Mul",
    "divide": "Div",
    "maximum": "Max",
    "minimum": "Min",
    "negative": "Neg",
    "relu": "Relu",
    "concatenate": "Concat",
}


def onnx_model(fn: Function, out_shape: tuple[int, ...]) -> Any:
    """``fn`` as an ONNX model (one graph; regions inlined) with one output of ``out_shape``."""
    import onnx
    from onnx import helper

    nodes: list[Any] = []

    def emit(op: str, args: list[str], attrs: dict) -> str:
        if op not in _ONNX_OPS:
            raise NotImplementedError(f"op {op} is not translated to ONNX")
        name = f"v{len(nodes)}"
        extra = {"axis": int(attrs.get("axis", 0))} if op == "concatenate" else {}
        nodes.append(helper.make_node(_ONNX_OPS[op], args, [name], **extra))
        return name

    outputs = translate(fn, {p.name: p.name for p in fn.params}, emit)
    if len(outputs) != 1:
        raise NotImplementedError("only single-output graphs are translated to ONNX")
    nodes.append(helper.make_node("Identity", outputs, ["out"]))
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(fn.params[0].type.dtype))
    graph = helper.make_graph(
        nodes,
        "main",
        [helper.make_tensor_value_info(p.name, elem, list(p.type.shape)) for p in fn.params],
        [helper.make_tensor_value_info("out", elem, list(out_shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)])
    model.ir_version = ONNX_IR_VERSION
    onnx.checker.check_model(model)
    return model


def ort_options(ort: Any, threads: int) -> Any:
    """ONNX Runtime's session options at its best for one model run after another:
    ``threads`` intra-op threads, sequential, every graph optimisation, and idle
    threads that sleep instead of spinning (a spinning thread takes the core from
    whichever system is timed next: byoc's dnnl dense measured 1.5x oneDNN's own call
    after it, and ONNX Runtime itself was no slower without spinning)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: no warnings about the models
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def ort_runner(
    fn: Function, inputs: Mapping[str, np.ndarray], out: np.ndarray, threads: int
) -> Callable[[], None]:
    """A zero-argument call that runs ``fn`` on ONNX Runtime with ``threads`` intra-op
    threads, reading ``inputs`` and writing ``out`` in place (IO binding)."""
    ort, reason = ort_module()
    if ort is None:
        raise RuntimeError(reason)
    session = ort.InferenceSession(
        onnx_model(fn, out.shape).SerializeToString(),
        ort_options(ort, threads),
        providers=["CPUExecutionProvider"],
    )
    binding = session.io_binding()
    for p in fn.params:
        a = inputs[p.name]
        binding.bind_input(p.name, "cpu", 0, a.dtype, list(a.shape), a.ctypes.data)
    binding.bind_output("out", "cpu", 0, out.dtype, list(out.shape), out.ctypes.data)

    def run() -> None:
        session.run_with_iobinding(binding)

    return run
