"""The Gelu that exporters write out, imported as one ``gelu``.

Models exported before ONNX had a Gelu op (opset 20), BERT's among them, spell the
exact Gelu as five nodes::

    d = Div(x, sqrt(2))        (or Mul(x, 1 / sqrt(2)))
    e = Erf(d)
    a = Add(e, 1)
    y = Mul(Mul(x, a), 0.5)    (or Mul(Mul(x, 0.5), a), or Mul(x, Mul(a, 0.5)))

in any operand order. The import takes such a chain as the catalog's ``gelu`` (``x
Phi(x)``), as ONNX Runtime's graph optimiser does at its default level: one op a backend
can take whole (oneDNN's ``gelu_erf``) instead of five, and more precise in the negative
tail, where ``1 + erf`` cancels. A chain is taken only when every value inside it is read
by the next node alone (not by another node, a subgraph or the graph's outputs), and its
constants are single values of x's dtype that do not change x's shape; anything else
imports node by node.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from .control import outer_names

SQRT2 = math.sqrt(2.0)
FLOATS = ("float16", "bfloat16", "float32", "float64")
"""The dtypes of the catalog's gelu."""
RELATIVE = 1e-6
"""How close a constant must be to sqrt(2), 1/sqrt(2), 1 or 0.5: float32's own rounding
of them, and the digits exporters print (1.4142135), are within it."""


def with_gelus(imp) -> list[tuple[int, object]]:
    """The nodes of ``imp``'s graph to import, each with its index in the graph: a
    decomposed Gelu's last node as one Gelu node (under its name), the chain's other
    nodes left out."""
    nodes = imp.graph.node
    made = {o: n for n in nodes if n.op_type == "Constant" and not n.input for o in n.output}

    def constant(name: str) -> np.ndarray | None:
        if name in imp.consts:
            return np.asarray(imp.consts[name])
        node = made.get(name)
        value = next((a for a in node.attribute if a.name == "value"), None) if node is not None else None
        return imp.onnx.numpy_helper.to_array(value.t) if value is not None else None

    last, inner = gelu_chains(nodes, constant, imp.type_of, {o.name for o in imp.graph.output})
    make = imp.onnx.helper.make_node
    return [
        (k, make("Gelu", [last[k][0]], [last[k][1]], name=n.name) if k in last else n)
        for k, n in enumerate(nodes)
        if k not in inner
    ]


def gelu_chains(
    nodes: Sequence,
    constant: Callable[[str], np.ndarray | None],
    type_of: Callable[[str], tuple],
    outputs: set[str],
) -> tuple[dict[int, tuple[str, str]], set[int]]:
    """The decomposed Gelus among ``nodes``: for the last node of each, its index ->
    (x, y), the chain's input and output; and the indexes of the chain's other nodes,
    which import as nothing. ``constant(name)`` is a value's constant array (None when
    it is computed); ``type_of(name)`` its (shape, dtype); ``outputs`` the graph's."""
    producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    readers: Counter[str] = Counter(o for o in outputs)
    for n in nodes:
        readers.update({i for i in n.input if i} | outer_names(n))
    reader_of: dict[str, int] = {}
    for k, n in enumerate(nodes):
        for i in n.input:
            reader_of.setdefault(i, k)

    def only_reader(value: str, op: str) -> int | None:
        k = reader_of.get(value)
        if (
            readers[value] != 1
            or k is None
            or nodes[k].op_type != op
            or nodes[k].domain not in ("", "ai.onnx")
        ):
            return None
        return k

    def other(k: int, value: str) -> str | None:
        """The input of binary node k beside ``value``."""
        ins = list(nodes[k].input)
        if len(ins) != 2 or value not in ins or ins[0] == ins[1]:
            return None
        return ins[1] if ins[0] == value else ins[0]

    def is_scalar(name: str | None, x: str, target: float) -> bool:
        c = constant(name) if name else None
        shape, dtype = type_of(x)
        if c is None or shape is None or c.size != 1 or c.dtype != dtype or c.ndim > len(shape):
            return False
        return bool(abs(float(c.reshape(())) - target) <= RELATIVE * abs(target))

    last: dict[int, tuple[str, str]] = {}
    inner: set[int] = set()
    for e, node in enumerate(nodes):
        if node.op_type != "Erf" or node.domain not in ("", "ai.onnx"):
            continue
        d = producer.get(node.input[0])
        if d is None or readers[node.input[0]] != 1:
            continue
        x = _scaled_input(
            nodes[d], lambda c, x: is_scalar(c, x, SQRT2), lambda c, x: is_scalar(c, x, 1 / SQRT2)
        )
        if x is None or getattr(type_of(x)[1], "name", None) not in FLOATS:
            continue
        a = only_reader(node.output[0], "Add")
        if a is None or not is_scalar(other(a, node.output[0]), x, 1.0):
            continue
        found = _product(
            nodes, a, x, only_reader, other, producer, readers, lambda c, x=x: is_scalar(c, x, 0.5)
        )
        if found is None:
            continue
        y, extra = found
        last[y] = (x, nodes[y].output[0])
        inner |= {d, e, a, *extra}
    return last, inner


def _scaled_input(node, by_sqrt2, by_inverse) -> str | None:
    """x, where ``node`` is x / sqrt(2) or x * (1 / sqrt(2)) (either order)."""
    if node.domain not in ("", "ai.onnx") or len(node.input) != 2:
        return None
    p, q = node.input
    if node.op_type == "Div":
        return p if by_sqrt2(q, p) else None
    if node.op_type == "Mul":
        return p if by_inverse(q, p) else (q if by_inverse(p, q) else None)
    return None


def _product(
    nodes, a: int, x: str, only_reader, other, producer, readers, is_half
) -> tuple[int, list[int]] | None:
    """The chain's last node after ``a`` = 1 + erf: y = (x a) 0.5, (x 0.5) a or x (a 0.5)
    (either order in each product); (its index, the indexes of the products before it)."""
    a_out = nodes[a].output[0]
    m = only_reader(a_out, "Mul")
    if m is None:
        return None
    beside = other(m, a_out)
    if beside == x:  # x a, then times 0.5
        y = only_reader(nodes[m].output[0], "Mul")
        if y is not None and is_half(other(y, nodes[m].output[0])):
            return y, [m]
        return None
    if is_half(beside):  # a 0.5, then times x
        y = only_reader(nodes[m].output[0], "Mul")
        if y is not None and other(y, nodes[m].output[0]) == x:
            return y, [m]
        return None
    h = producer.get(beside) if beside is not None else None  # (x 0.5) a
    if h is None or readers[beside] != 1 or nodes[h].op_type != "Mul" or len(nodes[h].input) != 2:
        return None
    p, q = nodes[h].input
    if (p == x and is_half(q)) or (q == x and is_half(p)):
        return m, [h]
    return None
