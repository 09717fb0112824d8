"""The Gelu that exporters write out, imported as one ``gelu`` or ``gelu_tanh``.

Models exported before ONNX had a Gelu op (opset 20), BERT's among them, spell the
exact Gelu as five nodes::

    d = Div(x, sqrt(2))        (or Mul(x, 1 / sqrt(2)))
    e = Erf(d)
    a = Add(e, 1)
    y = Mul(Mul(x, a), 0.5)    (or Mul(Mul(x, 0.5), a), or Mul(x, Mul(a, 0.5)))

and GPT-2's, the tanh approximation, as eight::

    c = Pow(x, 3)              (or Mul(Mul(x, x), x), or Mul(x, Mul(x, x)))
    u = Mul(Add(x, Mul(c, 0.044715)), sqrt(2 / pi))
    a = Add(Tanh(u), 1)
    y = the same products of x, a and 0.5

in any operand order. The import takes such a chain as the catalog's ``gelu`` (``x
Phi(x)``) or ``gelu_tanh``, as ONNX Runtime's graph optimiser does at its default
level: one op a backend can take whole (oneDNN's ``gelu_erf`` and ``gelu_tanh``) instead
of five or eight, and more precise in the negative tail, where ``1 + erf`` and
``1 + tanh`` cancel. A chain is taken only when every value inside it is read
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
from .ops import onnx_domain
from .values import tensor_array

SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
CUBE_COEFFICIENT = 0.044715
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
        return tensor_array(imp.onnx, value.t, imp.path) if value is not None else None

    last, inner = gelu_chains(nodes, constant, imp.type_of, {o.name for o in imp.graph.output})

    def gelu(x: str, y: str, approximate: str, name: str):
        if approximate == "none":
            return imp.onnx.helper.make_node("Gelu", [x], [y], name=name)
        return imp.onnx.helper.make_node("Gelu", [x], [y], name=name, approximate=approximate)

    return [(k, gelu(*last[k], n.name) if k in last else n) for k, n in enumerate(nodes) if k not in inner]


def gelu_chains(
    nodes: Sequence,
    constant: Callable[[str], np.ndarray | None],
    type_of: Callable[[str], tuple],
    outputs: set[str],
) -> tuple[dict[int, tuple[str, str, str]], set[int]]:
    """The decomposed Gelus among ``nodes``: for the last node of each, its index ->
    (x, y, approximate), the chain's input and output and ONNX Gelu's ``approximate``
    (``none`` or ``tanh``); and the indexes of the chain's other nodes, which import as
    nothing. ``constant(name)`` is a value's constant array (None when it is computed);
    ``type_of(name)`` its (shape, dtype); ``outputs`` the graph's."""
    graph = _Graph(nodes, constant, type_of, outputs)
    last: dict[int, tuple[str, str, str]] = {}
    inner: set[int] = set()
    for e, node in enumerate(nodes):
        if not (graph.is_op(e, "Erf") or graph.is_op(e, "Tanh")):
            continue
        d = graph.producer.get(node.input[0])
        if d is None or graph.readers[node.input[0]] != 1:
            continue
        found_x = graph.scaled_input(d) if node.op_type == "Erf" else graph.tanh_argument(d)
        if found_x is None:
            continue
        x, before = found_x
        if getattr(type_of(x)[1], "name", None) not in FLOATS:
            continue
        a = graph.only_reader(node.output[0], "Add")
        if a is None or not graph.scalar(graph.other(a, node.output[0]), x, 1.0):
            continue
        found = graph.product(a, x)
        if found is not None:
            y, m = found
            approximate = "none" if node.op_type == "Erf" else node.op_type.lower()  # named after Tanh
            last[y] = (x, nodes[y].output[0], approximate)
            inner |= {*before, e, a, m}
    return last, inner


class _Graph:
    """What the search of one graph's chains asks of it: who makes and who reads each
    value, and which values are constants near a given number."""

    def __init__(self, nodes: Sequence, constant, type_of, outputs: set[str]) -> None:
        self.nodes, self.constant, self.type_of = nodes, constant, type_of
        self.producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
        self.readers: Counter[str] = Counter(outputs)
        self.reader_of: dict[str, int] = {}
        for k, n in enumerate(nodes):
            self.readers.update({i for i in n.input if i} | outer_names(n))
            for i in n.input:
                self.reader_of.setdefault(i, k)

    def only_reader(self, value: str, op: str) -> int | None:
        """The node that alone reads ``value``, when it is a default-domain ``op``."""
        k = self.reader_of.get(value)
        if k is None or self.readers[value] != 1 or not self.is_op(k, op):
            return None
        return k

    def other(self, k: int, value: str) -> str | None:
        """The input of binary node k beside ``value``."""
        ins = list(self.nodes[k].input)
        if len(ins) != 2 or value not in ins or ins[0] == ins[1]:
            return None
        return ins[1] if ins[0] == value else ins[0]

    def scalar(self, name: str | None, x: str, target: float) -> bool:
        """Whether ``name`` is a constant single value of x's dtype near ``target``, of a
        rank that does not change x's shape."""
        c = self.constant(name) if name else None
        shape, dtype = self.type_of(x)
        if c is None or shape is None or c.size != 1 or c.dtype != dtype or c.ndim > len(shape):
            return False
        return bool(abs(float(c.reshape(())) - target) <= RELATIVE * abs(target))

    def scaled_input(self, k: int) -> tuple[str, set[int]] | None:
        """(x, {k}), where node k is x / sqrt(2) or x * (1 / sqrt(2)) (either order)."""
        node = self.nodes[k]
        if len(node.input) != 2:
            return None
        p, q = node.input
        if self.is_op(k, "Div"):
            return (p, {k}) if self.scalar(q, p, SQRT2) else None
        if self.is_op(k, "Mul"):
            found = self.scaled(k, 1 / SQRT2)
            return (found[1], {k}) if found is not None else None
        return None

    def tanh_argument(self, k: int) -> tuple[str, set[int]] | None:
        """(x, the chain's nodes), where node k is (x + 0.044715 x^3) sqrt(2 / pi), each
        product and sum in either order."""
        scaled = self.scaled(k, SQRT_2_OVER_PI) if self.is_op(k, "Mul") else None
        s = self.producer.get(scaled[1]) if scaled is not None else None
        if s is None or self.readers[self.nodes[s].output[0]] != 1 or not self.is_op(s, "Add"):
            return None
        for x, term in (tuple(self.nodes[s].input), tuple(reversed(self.nodes[s].input))):
            m = self.producer.get(term)
            scaled = self.scaled(m, CUBE_COEFFICIENT) if m is not None and self.readers[term] == 1 else None
            cube = self.producer.get(scaled[1]) if scaled is not None and self.is_op(m, "Mul") else None
            cubed = self.cube_of(cube, x) if cube is not None and self.readers[scaled[1]] == 1 else None
            if cubed is not None and self.scalar(scaled[0], x, CUBE_COEFFICIENT):
                return x, {k, s, m, *cubed}
        return None

    def scaled(self, k: int, target: float) -> tuple[str, str] | None:
        """(the constant, the other input) of binary node k, whose one input is a single
        value near ``target`` of the other's dtype."""
        ins = list(self.nodes[k].input)
        if len(ins) != 2:
            return None
        for c, v in (ins, ins[::-1]):
            if self.scalar(c, v, target):
                return c, v
        return None

    def cube_of(self, k: int, x: str) -> set[int] | None:
        """The nodes of x^3 ending at node k: Pow(x, 3), Mul(Mul(x, x), x) or
        Mul(x, Mul(x, x)); None when node k is not x's cube."""
        ins = list(self.nodes[k].input)
        if self.is_op(k, "Pow"):
            return {k} if len(ins) == 2 and ins[0] == x and self.scalar(ins[1], x, 3.0) else None
        if not self.is_op(k, "Mul") or len(ins) != 2 or x not in ins:
            return None
        square = ins[1] if ins[0] == x else ins[0]
        q = self.producer.get(square)
        if q is None or self.readers[square] != 1 or not self.is_op(q, "Mul"):
            return None
        return {k, q} if list(self.nodes[q].input) == [x, x] else None

    def product(self, a: int, x: str) -> tuple[int, int] | None:
        """The chain's last node after ``a`` = 1 + erf, y = (x a) 0.5, (x 0.5) a or x (a 0.5)
        (either order in each product), and the product before it."""
        a_out = self.nodes[a].output[0]
        m = self.only_reader(a_out, "Mul")
        if m is None:
            return None
        beside = self.other(m, a_out)
        if beside == x or self.scalar(beside, x, 0.5):  # (x a) 0.5 or x (a 0.5)
            y = self.only_reader(self.nodes[m].output[0], "Mul")
            rest = self.other(y, self.nodes[m].output[0]) if y is not None else None
            wanted = rest is not None and (self.scalar(rest, x, 0.5) if beside == x else rest == x)
            return (y, m) if wanted else None
        h = self.producer.get(beside) if beside is not None else None  # (x 0.5) a
        if h is None or self.readers[beside] != 1 or not self.is_op(h, "Mul"):
            return None
        return (m, h) if self.scalar(self.other(h, x), x, 0.5) else None

    def is_op(self, k: int, op: str) -> bool:
        return self.nodes[k].op_type == op and onnx_domain(self.nodes[k].domain) == ""
