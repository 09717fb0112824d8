"""The peers byoc is measured against: numexpr and Apache TVM (relax, built for llvm).

Both are optional (`pip install -e '.[peers]'`); a peer that cannot be imported is
reported as skipped, with the reason, and never fails the suite. The TVM program of
a workload is translated from the very byoc IR the byoc backends compile, so every
system computes the same graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from byoc.ir import Function


def numexpr_module() -> tuple[Any, str | None]:
    """(numexpr, None), or (None, why it cannot be used)."""
    try:
        import numexpr
    except ImportError as exc:
        return None, f"numexpr is not installed ({exc.name}); pip install -e '.[peers]'"
    return numexpr, None


def tvm_module() -> tuple[Any, str | None]:
    """(tvm, None), or (None, why it cannot be used)."""
    try:
        import tvm
        from tvm import relax  # noqa: F401
    except ImportError as exc:
        return None, f"apache-tvm is not installed ({exc.name}); pip install -e '.[peers]'"
    except Exception as exc:  # a broken install: report, never fail the suite
        return None, f"apache-tvm does not import: {type(exc).__name__}: {exc}"
    return tvm, None


def versions() -> dict[str, str | None]:
    ne, _ = numexpr_module()
    tvm, _ = tvm_module()
    return {
        "numexpr": getattr(ne, "__version__", None),
        "numexpr_threads": getattr(ne, "nthreads", None) if ne else None,
        "tvm": getattr(tvm, "__version__", None),
    }


_RELAX_BINARY = {
    "add": "add",
    "subtract": "subtract",
    "multiply": "multiply",
    "divide": "divide",
    "maximum": "maximum",
    "minimum": "minimum",
}


def tvm_build(fn: Function) -> Any:
    """``fn`` (byoc IR; regions inlined) as a relax program built for llvm with TVM's
    default pipeline, on a relax VirtualMachine: returns its ``main`` function, which
    takes tvm tensors and returns a new tensor (or a tuple)."""
    tvm, reason = tvm_module()
    if tvm is None:
        raise RuntimeError(reason)
    from tvm import relax

    tensor_type = getattr(relax, "TensorStructInfo", None) or relax.TensorType  # renamed in TVM 0.27
    bb = relax.BlockBuilder()
    params = [relax.Var(p.name, tensor_type(list(p.type.shape), p.type.dtype)) for p in fn.params]
    if fn.constants:
        raise NotImplementedError("constants are not translated to relax")
    with bb.function("main", params):
        with bb.dataflow():
            env = {p.name: v for p, v in zip(fn.params, params)}
            outputs = _emit(bb, relax, fn, env)
            result = outputs[0] if len(outputs) == 1 else relax.Tuple(outputs)
            out = bb.emit_output(result)
        bb.emit_func_output(out)
    compile_ = getattr(tvm, "compile", None) or relax.build
    executable = compile_(bb.get(), target="llvm")
    vm = relax.VirtualMachine(executable, tvm.cpu())
    return vm["main"]


def _emit(bb: Any, relax: Any, fn: Function, env: dict[str, Any]) -> list[Any]:
    for node in fn.nodes:
        args = [env[name] for name in node.inputs]
        if node.callee is not None:  # a region: inline it, in its own scope
            inner = {p.name: a for p, a in zip(node.callee.params, args)}
            if node.callee.constants:
                raise NotImplementedError("constants are not translated to relax")
            values = _emit(bb, relax, node.callee, inner)
        elif node.op in _RELAX_BINARY:
            values = [bb.emit(getattr(relax.op, _RELAX_BINARY[node.op])(*args))]
        elif node.op == "relu":
            values = [bb.emit(relax.op.nn.relu(*args))]
        elif node.op == "negative":
            values = [bb.emit(relax.op.negative(*args))]
        elif node.op == "concatenate":
            values = [bb.emit(relax.op.concat(args, axis=int(dict(node.attrs).get("axis", 0))))]
        else:
            raise NotImplementedError(f"op {node.op} is not translated to relax")
        env.update(zip(node.outputs, values))
    return [env[name] for name in fn.outputs]


def tvm_tensors(arrays: Mapping[str, np.ndarray], names: list[str]) -> list[Any]:
    tvm, _ = tvm_module()
    make = getattr(tvm.runtime, "tensor", None) or tvm.nd.array  # tvm.nd.array before TVM 0.27
    return [make(arrays[name]) for name in names]
