"""ONNX's recurrent layers, LSTM, GRU and RNN, unrolled at import over their static
sequence length.

Each direction becomes: one product of the whole input sequence by the input weights
(``dense`` of [steps * batch, inputs] by W, every gate at once, with both biases),
then per step only the product of the previous hidden state by the recurrent weights
and the gates' elementwise arithmetic. The steps' hidden states are stacked into Y;
the last one of each direction is Y_h (and the cell state Y_c, for LSTM). Reverse
directions run from the last step to the first and write Y in time order, as ONNX
says. ``layout`` 1 (batch first) transposes around that.

Gate order and equations follow ONNX (LSTM: i, o, f, c with peepholes P; GRU: z, r, h
with ``linear_before_reset``; RNN: one gate). ``activations`` may name every function
ONNX lists (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh,
HardSigmoid, Elu, Softsign, Softplus), with ``activation_alpha`` and
``activation_beta`` consumed in order by those that take them. ``clip`` bounds each
gate's input to its activation, not the cell state's (as ONNX Runtime has it).
LSTM's ``input_forget`` couples the forget gate to the input gate (f = 1 - i).
``sequence_lens`` must be a constant; lengths shorter than the sequence are refused
(the unrolled graph has one length). At most :data:`byoc.onnx.control.UNROLL_LIMIT`
steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .control import UNROLL_LIMIT

if TYPE_CHECKING:
    from .importer import Importer
    from .ops import OnnxOp


@dataclass(frozen=True)
class Cell:
    """One recurrent layer kind: its gate count and default activations."""

    gates: int
    activations: tuple[str, ...]


CELLS = {
    "LSTM": Cell(4, ("Sigmoid", "Tanh", "Tanh")),
    "GRU": Cell(3, ("Sigmoid", "Tanh")),
    "RNN": Cell(1, ("Tanh",)),
}

TAKES = {  # activation -> (its alpha default, its beta default); None: takes none
    "Affine": (1.0, 0.0),
    "LeakyRelu": (0.01, None),
    "ThresholdedRelu": (1.0, None),
    "ScaledTanh": (1.0, 1.0),
    "HardSigmoid": (0.2, 0.5),
    "Elu": (1.0, None),
}
"""The activations with parameters, and ONNX's defaults for them."""

PLAIN = {"Relu", "Tanh", "Sigmoid", "Softsign", "Softplus"}
"""The activations without parameters: each is the catalog op of its role."""


class Layer:
    """One node's import: its shapes, weights and activations, and the ops it emits."""

    def __init__(self, imp: Importer, node, e: OnnxOp) -> None:
        self.imp, self.node, self.r = imp, node, e.roles
        self.cell = CELLS[node.op_type]
        schema = imp.onnx.defs.get_schema(node.op_type, imp.opset)
        imp.check_attrs(node, set(schema.attributes))  # every attribute ONNX defines is read
        self.direction = imp.attr("direction", "forward")
        if self.direction not in ("forward", "reverse", "bidirectional"):
            raise imp.invalid(f"its direction {self.direction!r} is not forward, reverse or bidirectional")
        self.dirs = 2 if self.direction == "bidirectional" else 1
        self.hidden = int(imp.attr("hidden_size", imp.shape(node.input[2])[-1]))
        self.layout = int(imp.attr("layout", 0))
        # the row's attrs: the ONNX attribute that bounds each gate's input (clip)
        bounds = [float(imp.attr(key, default)) for key, (_, default) in e.attrs.items()]
        self.clip = min(bounds) if bounds and min(bounds) < float("inf") else None
        x_shape = imp.shape(node.input[0])
        self.steps, self.batch = (x_shape[0], x_shape[1]) if self.layout == 0 else (x_shape[1], x_shape[0])
        if self.steps > UNROLL_LIMIT:
            raise imp.unsupported(f"a {node.op_type} of more than {UNROLL_LIMIT} steps (byoc unrolls it)")
        self.activations = self._activations()

    # -------------------------------------------------------------- the parts

    def _activations(self) -> list[tuple[str, float | None, float | None]]:
        """(name, alpha, beta) of each activation of each direction, in ONNX's order."""
        imp = self.imp
        given = [
            a.decode("utf-8", "replace") if isinstance(a, bytes) else a
            for a in imp.attr("activations", []) or []
        ]
        names = given or list(self.cell.activations) * self.dirs
        if len(names) != len(self.cell.activations) * self.dirs:
            raise imp.invalid(
                f"it lists {len(names)} activations; a {self.direction} {self.node.op_type} takes "
                f"{len(self.cell.activations) * self.dirs}"
            )
        alphas = list(imp.attr("activation_alpha", []) or [])
        betas = list(imp.attr("activation_beta", []) or [])
        out = []
        for name in names:
            if name not in PLAIN and name not in TAKES:
                raise imp.unsupported(f"the activation {name!r}")
            alpha = beta = None
            if name in TAKES:
                alpha_default, beta_default = TAKES[name]
                alpha = float(alphas.pop(0)) if alphas else alpha_default
                if beta_default is not None:
                    beta = float(betas.pop(0)) if betas else beta_default
            out.append((name, alpha, beta))
        return out

    def emit(self, role: str, inputs: list[str], attrs: dict | None = None, out: str | None = None) -> str:
        return self.imp.emit(self.r[role], inputs, attrs, out)

    def scalar(self, value: float) -> str:
        return self.imp.scalar(value, self.node.input[0])

    def activate(self, k: int, x: str, gate: bool = True) -> str:
        """Activation ``k`` (of all directions' list) of ``x``, a gate's input clipped
        first (not LSTM's cell state, whose activation ONNX Runtime does not clip)."""
        if self.clip is not None and gate:
            x = self.emit("low", [self.emit("high", [x, self.scalar(self.clip)]), self.scalar(-self.clip)])
        name, alpha, beta = self.activations[k]
        if name in PLAIN:
            return self.emit(name, [x])  # the role of each activation is named after it
        if name == "Affine":
            return self.emit("plus", [self.emit("times", [x, self.scalar(alpha)]), self.scalar(beta)])
        if name == "ScaledTanh":
            inner = self.emit("times", [x, self.scalar(beta)])
            return self.emit("times", [self.scalar(alpha), self.emit("Tanh", [inner])])
        if name == "ThresholdedRelu":
            above = self.emit("above", [x, self.scalar(alpha)])
            return self.emit("choose", [above, x, self.scalar(0.0)])
        if name == "HardSigmoid":
            return self.emit(name, [x], {"alpha": alpha, "beta": beta})
        return self.emit(name, [x], {"alpha": alpha})  # LeakyRelu, Elu

    def direction_of(self, name: str | None, d: int, axis: int = 0) -> str | None:
        """Direction ``d`` of input ``name`` (its axis ``axis`` dropped: the weights'
        first, the initial states' second with layout 1), or None when absent."""
        if not name:
            return None
        if name in self.imp.consts:
            part = np.take(self.imp.consts[name], d, axis=axis)
            return self.imp.constant(np.asarray(part), self.imp.names.fresh("k"))
        index = self.imp.constant(np.asarray(d, np.int64), self.imp.names.fresh("d"))
        return self.emit("pick", [self.imp.value(name), index], {"axis": axis})

    def state_of(self, k: int, d: int) -> str | None:
        """Direction ``d`` of the initial state input ``k`` (5: hidden, 6: cell)."""
        node = self.node
        return self.direction_of(node.input[k] if len(node.input) > k else None, d, axis=self.layout)

    def gate(self, x: str, k: int) -> str:
        """Gate ``k`` ([batch, H]) of the gates ``x`` ([batch, gates * H])."""
        h = self.hidden
        return self.emit("part", [x], {"starts": [k * h], "ends": [(k + 1) * h], "axes": [1]})

    # -------------------------------------------------------------- the layer

    def run(self) -> None:
        imp, node = self.imp, self.node
        x = imp.value(node.input[0])
        if self.layout:
            x = self.emit("flip", [x], {"perm": [1, 0, 2]})
        lens = imp.const_input(4, "sequence_lens")
        if lens is not None and np.any(np.asarray(lens) != self.steps):
            raise imp.unsupported(
                f"sequence_lens {np.asarray(lens).tolist()} shorter than the sequence ({self.steps} steps)",
                hint="byoc unrolls the layer over one length: give every batch element the whole sequence",
            )
        inputs = imp.shape(node.input[0])[-1]
        flat = self.emit("shape_as", [x], {"newshape": [self.steps * self.batch, inputs]})
        ys, hs, cs = [], [], []
        for d in range(self.dirs):
            y, h, c = self.direction_run(flat, d)
            ys.append(y)
            hs.append(h)
            cs.append(c)
        self.outputs(ys, hs, cs)

    def direction_run(self, flat: str, d: int) -> tuple[list[str], str, str | None]:
        """One direction: the hidden state of every step (in time order), and the last
        hidden and cell states."""
        imp, node, g, h = self.imp, self.node, self.cell.gates, self.hidden
        w, r = self.direction_of(node.input[1], d), self.direction_of(node.input[2], d)
        b = self.direction_of(node.input[3] if len(node.input) > 3 else None, d)
        before_reset = node.op_type == "GRU" and int(imp.attr("linear_before_reset", 0))
        projected = self.emit("project", [flat, w])  # [steps * batch, gates * H]
        recurrent_bias = None
        if b is not None:
            wb = self.emit("part", [b], {"starts": [0], "ends": [g * h], "axes": [0]})
            rb = self.emit("part", [b], {"starts": [g * h], "ends": [2 * g * h], "axes": [0]})
            if node.op_type == "GRU":  # the h gate's recurrent bias stays with R's product
                projected = self.emit("plus", [projected, wb])
                recurrent_bias = rb
            else:
                projected = self.emit("plus", [projected, self.emit("plus", [wb, rb])])
        steps = self.emit("shape_as", [projected], {"newshape": [self.steps, self.batch, g * h]})
        zeros = np.zeros((self.batch, h), imp.dtype(node.input[0]))
        state = self.state_of(5, d) or imp.constant(zeros, imp.names.fresh("h0"))
        cell = None
        if node.op_type == "LSTM":
            cell = self.state_of(6, d) or imp.constant(zeros, imp.names.fresh("c0"))
        peepholes = self.direction_of(node.input[7] if len(node.input) > 7 else None, d)
        order = (
            range(self.steps) if (d == 0 and self.direction != "reverse") else range(self.steps - 1, -1, -1)
        )
        first = len(self.cell.activations) * d
        hidden: dict[int, str] = {}
        for t in order:
            index = imp.constant(np.asarray(t, np.int64), imp.names.fresh("t"))
            x_t = self.emit("pick", [steps, index], {"axis": 0})  # [batch, gates * H]
            if node.op_type == "LSTM":
                state, cell = self.lstm_step(x_t, state, cell, r, peepholes, first)
            elif node.op_type == "GRU":
                state = self.gru_step(x_t, state, r, recurrent_bias, before_reset, first)
            else:
                state = self.activate(first, self.emit("plus", [x_t, self.emit("project", [state, r])]))
            hidden[t] = state
        return [hidden[t] for t in range(self.steps)], state, cell

    def lstm_step(self, x_t, state, cell, r, peepholes, first):
        gates = self.emit("plus", [x_t, self.emit("project", [state, r])])
        i, o, f, c = (self.gate(gates, k) for k in range(4))
        h = self.hidden
        if peepholes is not None:
            p_i, p_o, p_f = (
                self.emit("part", [peepholes], {"starts": [k * h], "ends": [(k + 1) * h], "axes": [0]})
                for k in range(3)
            )
            i = self.emit("plus", [i, self.emit("times", [p_i, cell])])
            f = self.emit("plus", [f, self.emit("times", [p_f, cell])])
        i = self.activate(first, i)
        if int(self.imp.attr("input_forget", 0)):
            f = self.emit("minus", [self.scalar(1.0), i])
        else:
            f = self.activate(first, f)
        c = self.activate(first + 1, c)
        cell = self.emit("plus", [self.emit("times", [f, cell]), self.emit("times", [i, c])])
        if peepholes is not None:
            o = self.emit("plus", [o, self.emit("times", [p_o, cell])])
        o = self.activate(first, o)
        return self.emit("times", [o, self.activate(first + 2, cell, gate=False)]), cell

    def gru_step(self, x_t, state, r, recurrent_bias, before_reset, first):
        h = self.hidden
        x_z, x_r, x_h = (self.gate(x_t, k) for k in range(3))
        r_z, r_r, r_h = (
            self.emit("part", [r], {"starts": [k * h], "ends": [(k + 1) * h], "axes": [0]}) for k in range(3)
        )
        rb = [None] * 3
        if recurrent_bias is not None:
            rb = [
                self.emit("part", [recurrent_bias], {"starts": [k * h], "ends": [(k + 1) * h], "axes": [0]})
                for k in range(3)
            ]

        def recur(value, weights, bias):
            product = self.emit("project", [value, weights])
            return product if bias is None else self.emit("plus", [product, bias])

        z = self.activate(first, self.emit("plus", [x_z, recur(state, r_z, rb[0])]))
        reset = self.activate(first, self.emit("plus", [x_r, recur(state, r_r, rb[1])]))
        if before_reset:
            candidate = self.emit("plus", [x_h, self.emit("times", [reset, recur(state, r_h, rb[2])])])
        else:
            candidate = self.emit("plus", [x_h, recur(self.emit("times", [reset, state]), r_h, rb[2])])
        candidate = self.activate(first + 1, candidate)
        keep = self.emit("times", [z, state])
        return self.emit(
            "plus", [self.emit("times", [self.emit("minus", [self.scalar(1.0), z]), candidate]), keep]
        )

    def outputs(self, ys: list[list[str]], hs: list[str], cs: list) -> None:
        """Y [steps, dirs, batch, H], Y_h and Y_c [dirs, batch, H] (batch first with
        layout 1), for those the node names."""
        node = self.node
        wanted = [
            k < len(node.output) and node.output[k] and node.output[k] in self.imp.used for k in range(3)
        ]
        if wanted[0]:
            per_step = [self.stack([ys[d][t] for d in range(self.dirs)], 0) for t in range(self.steps)]
            y = self.stack(per_step, 0)  # [steps, dirs, batch, H]
            self.finish(y, [2, 0, 1, 3], node.output[0])
        for k, states in ((1, hs), (2, cs)):
            if wanted[k]:
                self.finish(self.stack(states, 0), [1, 0, 2], node.output[k])

    def stack(self, values: list[str], axis: int) -> str:
        parts = [self.emit("grow", [v], {"axes": [axis]}) for v in values]
        return parts[0] if len(parts) == 1 else self.emit("join", parts, {"axis": axis})

    def finish(self, value: str, batch_first: list[int], out: str) -> None:
        if self.layout:
            self.emit("flip", [value], {"perm": batch_first}, out=out)
        else:
            self.emit("single", [value], out=out)


def recurrent(imp: Importer, node, e: OnnxOp) -> None:
    """LSTM, GRU and RNN (see the module doc)."""
    Layer(imp, node, e).run()
