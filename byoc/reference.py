"""The numpy reference evaluator: run a Function on numpy inputs with the op
catalog's reference expressions. It is the oracle every backend is checked against.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .catalog import Catalog, evaluate_outputs
from .errors import UsageError
from .ir import CALL_OP, Function


def evaluate(fn: Function, inputs: Mapping[str, np.ndarray], catalog: Catalog) -> tuple[np.ndarray, ...]:
    """Evaluate ``fn``; ``inputs`` maps every parameter name to an array of its type."""
    env: dict[str, np.ndarray] = {}
    for p in fn.params:
        if p.name not in inputs:
            raise UsageError(f"missing input {p.name!r} for function {fn.name}", hint=f"expected {p.type}")
        value = np.asarray(inputs[p.name])
        if value.shape != p.type.shape or value.dtype != np.dtype(p.type.dtype):
            raise UsageError(
                f"input {p.name!r} is {value.dtype}{list(value.shape)}, expected {p.type}",
            )
        env[p.name] = value
    for c in fn.constants:
        env[c.name] = c.array
    # NaN and infinities are IEEE results, as in the generated C, not warnings.
    with np.errstate(all="ignore"):
        for node in fn.nodes:
            args = [env[name] for name in node.inputs]
            if node.op == CALL_OP:
                assert node.callee is not None
                results = evaluate(node.callee, dict(zip(node.inputs, args)), catalog)
            else:
                results = evaluate_outputs(catalog[node.op], args, node.attrs, node.types)
            env.update(zip(node.outputs, results))
    return tuple(env[name] for name in fn.outputs)
