"""How far a backend's output may lie from the numpy reference's, in steps of a
quantization.

``quantize_linear`` rounds a float to an integer. The float comes from sums whose
order ONNX leaves to the implementation: an int8 kernel sums the codes exactly in
int32, the reference sums dequantized float32 values, so where the value lies near a
tie the two round to neighbouring integers. Such an output may lie one step from the
reference, and a ``dequantize_linear`` of it one scale. Each op says what a step of
its inputs makes of its result (its shape rule's ``step``); an op without one, or a
value no quantization reached, must match as its dtype demands.
"""

from __future__ import annotations

from .catalog import Catalog
from .ir import Function


def output_steps(fn: Function, catalog: Catalog, param_steps: tuple[float, ...] | None = None) -> list[float]:
    """The step each output of ``fn`` may lie from the reference (0.0: none), given
    those of its parameters (default: none)."""
    steps = dict(zip((p.name for p in fn.params), param_steps or (0.0,) * len(fn.params)))
    constants = {c.name: c.array for c in fn.constants}
    steps.update((name, 0.0) for name in constants)
    for node in fn.nodes:
        given = tuple(steps[name] for name in node.inputs)
        if node.callee is not None:
            found = output_steps(node.callee, catalog, given)
        else:
            rule = catalog[node.op].rule
            step = rule.step((*(constants.get(name) for name in node.inputs),), given) if rule.step else 0.0
            found = [step] * len(node.outputs)
        steps.update(zip(node.outputs, found))
    return [steps[name] for name in fn.outputs]
