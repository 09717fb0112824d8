"""Model-local ONNX functions (``ModelProto.functions``), inlined at their calls.

onnx's inliner replaces each call of a local function by the function's nodes
(recursively; ONNX's checker has refused recursive functions already). The importer
then walks the inlined graph, whose node indices are not the model's: :func:`inline`
also says, for each node of the inlined graph, which node of the model's graph it came
from, so that messages name the call as the user's model has it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ParseError


@dataclass(frozen=True)
class Call:
    """A node of the inlined graph that came from a function: ``index`` and ``node`` are
    the model's call of the function."""

    index: int
    node: object

    def describe(self, inner, opset: int) -> str:
        call = self.node
        function = f"{call.domain}.{call.op_type}" if call.domain else call.op_type
        return (
            f"ONNX node {self.index} ({call.op_type} {call.name!r}, opset {opset}), "
            f"the {inner.op_type} node {inner.name!r} of its local function {function}"
        )


def inline(model, where: str) -> tuple[object, tuple[Call | None, ...]]:
    """``(model, calls)``: ``model`` with its local functions inlined, and for each node of
    its graph the :class:`Call` it came from (None: a node of the model's own graph). A
    model without functions is returned as it is, with no calls."""
    if not model.functions:
        return model, ()
    import onnx.inliner

    try:
        inlined = onnx.inliner.inline_local_functions(model)
    except Exception as exc:  # the inliner's own refusal of a malformed function
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ParseError(
            f"{where}: its local functions cannot be inlined: {first}",
            hint="the model's functions are malformed; check it with onnx.checker.check_model",
        ) from None
    functions = {(f.domain, f.name): f for f in model.functions}
    sizes: dict[tuple[str, str], int] = {}

    def size(node) -> int:
        """How many nodes ``node`` becomes when inlined."""
        key = (node.domain, node.op_type)
        if key not in functions:
            return 1
        if key not in sizes:
            sizes[key] = 0  # a cycle (which the checker refuses) counts as nothing, not forever
            sizes[key] = sum(size(n) for n in functions[key].node)
        return sizes[key]

    calls: list[Call | None] = []
    for index, node in enumerate(model.graph.node):
        n = size(node)
        called = (node.domain, node.op_type) in functions
        calls += [Call(index, node) if called else None] * n
    if len(calls) != len(inlined.graph.node):  # the inliner did more than expand calls
        return inlined, ()
    return inlined, tuple(calls)
