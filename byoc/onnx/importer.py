"""ONNX nodes to catalog ops: the :class:`Importer`, one model's import, which walks
its nodes and gives each to the handler its row of ``ops.yaml`` names
(:data:`~byoc.onnx.handlers.KINDS`), with what every handler reads and writes: known
constants, value types, attributes and the statements so far."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from ..catalog import infer_type, normalize_attrs
from ..errors import GraphError
from ..ir import TensorType, dtype_name, numpy_dtype
from ..shape_rule_model import RuleError
from .control import IN_PLACE, outer_names
from .expand import expand
from .gelu_fusion import with_gelus
from .handlers import KINDS
from .model_import import INLINE_ELEMENTS, require_onnx, weight_bytes_aside
from .ops import onnx_domain, onnx_ops, own_rows
from .quantize import FOLDED_AT_BUILD
from .values import Names, attr_text, dims_text, dsl_dtype, dsl_string, number, tensor_array, value_type

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..catalog import Catalog
    from .ops import OnnxOp


@cache
def shipped_catalog():
    """The shipped op catalog: every op the importer writes is in it."""
    from ..api import load_catalog

    return load_catalog()


RANDOM = frozenset(("RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"))
"""Ops of constants that are not constants: never folded."""


class NeedsValue(GraphError):
    """A node needs the value of a model input as a constant (Reshape's shape, a
    reduction's axes, ...): the model can be built once that input's value is known
    (bound, see :class:`Importer`). ``input`` is the input's ONNX name, ``position``
    its place among the model's inputs that are not initializers (None: not known)."""

    def __init__(
        self, message: str, input: str, hint: str | None = None, position: int | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.input, self.position = input, position


class Importer:
    """One model's import: known constants, value types, and the statements so far.
    ``bound`` gives values of model inputs, which the import takes as constants (the
    model specialised to them: they are no longer inputs). ``keep_weights=False``: the
    model's large initializers lose their bytes once read (byoc read the model)."""

    def __init__(
        self,
        model,
        shapes: dict[str, tuple[int, ...]],
        path: str,
        calls=(),
        bound: Mapping | None = None,
        catalog: Catalog | None = None,
        *,
        keep_weights: bool = True,
    ) -> None:
        onnx = require_onnx()
        self.catalog = shipped_catalog() if catalog is None else catalog
        self.own = own_rows(self.catalog)  # (domain, type) -> the catalog's own ops that import it
        self.calls = calls  # per node: the model's call of the local function it came from, if any
        self.onnx = onnx
        self.path = path
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.domains = {o.domain: o.version for o in model.opset_import}  # the other domains' versions
        graph = model.graph
        self.consts: dict[str, np.ndarray] = {t.name: tensor_array(onnx, t, path) for t in graph.initializer}
        self.inputs = [i for i in graph.input if i.name not in self.consts]
        self.input_names = [i.name for i in self.inputs]  # before any is bound
        declared = [onnx.ValueInfoProto.FromString(v.SerializeToString()) for v in self.inputs]
        try:  # the shapes are fixed in the caller's model for inference only (no copy of its weights)
            self._fix_input_shapes(shapes)
            self.input_types = [value_type(onnx, v) for v in self.inputs]
            # inference takes types and dims, not 100s of MB of weights
            with weight_bytes_aside(graph, restore=keep_weights):
                inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
        except Exception as exc:
            if isinstance(exc, GraphError):
                raise
            raise GraphError(f"ONNX shape inference failed on {path}: {str(exc).splitlines()[0]}") from None
        finally:
            for saved, value in zip(declared, self.inputs):
                value.CopyFrom(saved)
        self.types: dict[str, tuple[tuple[int, ...] | None, np.dtype]] = {}
        for v in (*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output):
            self.types[v.name] = value_type(onnx, v)
        if bound:  # specialised: constants from now on, no longer inputs
            kept = [k for k, v in enumerate(self.inputs) if v.name not in bound]
            self.inputs = [self.inputs[k] for k in kept]
            self.input_types = [self.input_types[k] for k in kept]
            self.consts.update({name: np.asarray(array) for name, array in bound.items()})
        self.graph = graph
        self.used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
        self.names = Names()
        self.lines: list[str] = []
        self.origins: list[str] = []  # per line of self.lines: the node it came from
        self.arrays: dict[str, np.ndarray] = {}
        self.emitted: dict[str, str] = {}  # ONNX name -> DSL identifier of a value in the text
        self.typed: dict[str, TensorType] = {}  # DSL identifier -> its type, by byoc's own rules
        self.node = None
        self.index = 0
        self.expanding = None  # (node, the model's opset) while its function's nodes import
        self.producers: dict[str, object] = {}  # ONNX value -> the node imported that defines it

    # ------------------------------------------------------------ model inputs

    def _fix_input_shapes(self, shapes: dict[str, tuple[int, ...]]) -> None:
        names = {i.name for i in self.inputs}
        unknown = sorted(set(shapes) - names)
        if unknown:
            raise GraphError(
                f"--shape names {', '.join(map(repr, unknown))}, which the model does not take",
                hint=f"the model's inputs: {', '.join(sorted(names))}",
            )
        for value in self.inputs:
            dims = value.type.tensor_type.shape.dim
            if value.name in shapes:
                wanted = shapes[value.name]
                if len(wanted) != len(dims):
                    raise GraphError(
                        f"--shape gives input {value.name!r} {len(wanted)} dimensions, but it has {len(dims)}"
                    )
                for d, v in zip(dims, wanted):
                    d.Clear()
                    d.dim_value = v
            for k, d in enumerate(dims):
                if not d.HasField("dim_value"):
                    shown = ",".join(str(x.dim_value) if x.HasField("dim_value") else "1" for x in dims)
                    raise GraphError(
                        f"input {value.name!r} has a dynamic dimension {k}"
                        + (f" ({d.dim_param!r})" if d.dim_param else ""),
                        hint=f"byoc needs static shapes: pass --shape {value.name}={shown}",
                    )
                if d.dim_value < 0:
                    raise GraphError(
                        f"{self.path}: input {value.name!r} has a negative dimension {k} ({d.dim_value})",
                        hint="a dimension is a number of elements, 0 or more; the model is corrupt",
                    )

    # ------------------------------------------------------------ running

    def run(self) -> tuple[str, dict[str, np.ndarray], list[str]]:
        """The graph's text, its weights, and for each line of the text the ONNX node it
        came from ("" for none)."""
        params = []
        for value, (shape, dtype) in zip(self.inputs, self.input_types):
            ident = self.names(value.name)
            self.emitted[value.name] = ident
            self.typed[ident] = TensorType(tuple(shape), dtype_name(dtype))
            params.append(
                f"{ident}: {dsl_dtype(dtype, f'{self.path}: input {value.name!r}')}{dims_text(shape)}"
            )
        for index, node in with_gelus(self):  # a decomposed Gelu as one node (gelu_fusion.py)
            self.node, self.index = node, index
            self.import_node(node)
            self.origins += [self.describe()] * (len(self.lines) - len(self.origins))
        self.node = None
        outputs = [self.value(o.name) for o in self.graph.output]
        self.origins += ["the model's outputs"] * (len(self.lines) - len(self.origins))
        body = "\n".join(self.lines)
        text = f"graph main({', '.join(params)}) {{\n{body}\n  return {', '.join(outputs)}\n}}\n"
        origins = ["the model's inputs", *(self.origins or [""]), "the model's outputs", ""]
        return text, self.arrays, origins

    def import_node(self, node) -> None:
        """Fold ``node``, or write its statements by its handler; an unrolled loop's
        body imports its nodes through here too (byoc/onnx/control.py)."""
        outer, self.node = self.node, node
        self.producers.update((o, node) for o in node.output if o)
        own = self.own_row(node)
        if own is not None:
            KINDS[own.kind](self, node, own)
        elif node.domain not in ("", "ai.onnx"):
            if not expand(self, node):  # ONNX defines it as a function of default-domain ops
                raise self.unsupported(f"op domain {node.domain!r}")
        elif self.foldable(node):
            self.fold(node)
        else:
            row = onnx_ops().get(node.op_type)
            if row is not None:
                KINDS[row.kind](self, node, row)
            elif not expand(self, node):  # ONNX defines it as a function of other ops
                raise self.unsupported("this op")
        self.node = outer

    def own_row(self, node) -> OnnxOp | None:
        """The row of the catalog's own op that imports ``node`` at the model's opset of
        its domain (None when no own op names its domain and type); an own op that
        names it at other opsets only is an error."""
        claims = self.own.get((onnx_domain(node.domain), node.op_type))
        if not claims:
            return None
        opset = self.opset if onnx_domain(node.domain) == "" else self.domains.get(node.domain, 1)
        for source, row in claims:
            if source.covers(opset):
                return row
        named = "; ".join(
            f"{row.op} at {source.opsets_text()} ({source.loc.file}:{source.loc.line})"
            if source.loc
            else f"{row.op} at {source.opsets_text()}"
            for source, row in claims
        )
        domain = onnx_domain(node.domain) or "ai.onnx"
        raise self.unsupported(
            f"{domain}.{node.op_type} at opset {opset}",
            hint=f"your catalog imports it as {named}; widen `opsets:` in its `onnx:` key if the op "
            "computes it at this opset too",
        )

    def foldable(self, node) -> bool:
        """Whether ``node`` computes a constant: Shape of a static tensor, Constant, or
        any deterministic op of constants only (with what its subgraphs read of the
        enclosing scopes: an If's branches, a Loop's body)."""
        inputs = [i for i in node.input if i]
        if node.op_type in ("Shape", "Size", "EyeLike"):  # of the input's shape (and dtype) alone
            return self.type_of(inputs[0])[0] is not None
        if not inputs:
            return node.op_type == "Constant"
        row = onnx_ops().get(node.op_type)
        if row is not None and row.kind in IN_PLACE:
            return False  # its subgraph's nodes fold one by one
        if row is not None and row.kind in FOLDED_AT_BUILD:
            return False  # after the backends' patterns had their pick (a dequantized weight)
        read = inputs + sorted(outer_names(node))
        return node.op_type not in RANDOM and all(i in self.consts for i in read)

    def fold(self, node) -> None:
        """Compute ``node`` now, with ONNX's reference evaluator at the model's opset, as
        a constant."""
        from onnx.reference import ReferenceEvaluator

        helper = self.onnx.helper
        if node.op_type == "Cast":  # an element type no ONNX defines: say so, not the evaluator's KeyError
            to = self.attr("to")
            if to is not None and int(to) not in self.onnx.TensorProto.DataType.values():
                raise self.unsupported(f"a Cast to {to}, an element type ONNX does not define")
        feeds = {}
        for name in [*node.input, *sorted(outer_names(node))]:
            if name in self.consts:
                feeds[name] = self.consts[name]
            elif name:  # Shape of a static tensor: any array of its shape and dtype (a view of
                shape, dtype = self.type_of(name)  # one element: the tensor may be huge)
                try:  # a dim of 2**62: more elements than numpy can index
                    feeds[name] = np.broadcast_to(np.zeros((), dtype), shape)
                except ValueError:
                    what = f"folding it at import: its input {name} of shape {list(shape)} is too large"
                    raise self.unsupported(what, hint="an array holds fewer than 2**63 elements") from None
        graph = helper.make_graph(
            [node],
            "fold",
            [
                helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                for n, a in feeds.items()
            ],
            [helper.make_empty_tensor_value_info(o) for o in node.output if o],
        )

        def evaluate(opset: int):
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
            return ReferenceEvaluator(model).run(None, feeds)

        try:
            results = evaluate(self.opset)
        except Exception as exc:
            results = None
            if "No implementation for operator" in str(exc):  # only at a later version of the op
                for opset in self._newer_versions(node.op_type):
                    try:
                        results = evaluate(opset)
                        break
                    except Exception:  # noqa: BLE001 - the first failure is the one reported
                        continue
            if results is None:
                raise self.unsupported(f"folding it at import ({type(exc).__name__}: {exc})") from None
        for name, value in zip([o for o in node.output if o], results):
            self.consts[name] = np.asarray(value)

    def _newer_versions(self, op_type: str) -> list[int]:
        """The versions of ``op_type`` newer than the model's opset, oldest first: a constant
        op that the reference evaluator implements only from a later version (QuantizeLinear
        from 19, whose new attributes' defaults keep the meaning) folds at the first one."""
        schemas = self.onnx.defs.get_all_schemas_with_history()
        return sorted(
            s.since_version
            for s in schemas
            if s.name == op_type and s.domain == "" and s.since_version > self.opset
        )

    # ------------------------------------------------------------ helpers for handlers

    def describe(self) -> str:
        """The current node, for messages: ``ONNX node 3 (Conv 'conv1', opset 13)``; a
        node of a function body that byoc expands, as that node of the model's node."""
        node = self.node
        if self.expanding is not None and node is not self.expanding[0]:
            outer, opset = self.expanding
            return (
                f"ONNX node {self.index} ({outer.op_type} {outer.name!r}, opset {opset}), "
                f"the {node.op_type} node of the function ONNX defines it by"
            )
        call = self.calls[self.index] if self.index < len(self.calls) else None
        if call is not None:
            return call.describe(node, self.opset)
        return f"ONNX node {self.index} ({node.op_type} {node.name!r}, opset {self.opset})"

    def unsupported(self, what: str, hint: str | None = None) -> GraphError:
        return GraphError(
            f"{self.path}: {self.describe()}: byoc does not support {what}",
            hint=hint
            or "byoc imports the ONNX ops its catalog has (`byoc ops` lists them); an op of your own "
            "imports by the `onnx:` key of its entry in your ops.yaml (spec/README.md)",
        )

    def invalid(self, what: str, hint: str | None = None) -> GraphError:
        """The current node breaks ONNX's own rules: ``what`` says how."""
        return GraphError(f"{self.path}: {self.describe()}: {what}", hint=hint)

    def attr(self, name: str, default=None):
        for a in self.node.attribute:
            if a.name == name:
                value = self.onnx.helper.get_attribute_value(a)
                if not isinstance(value, bytes):
                    return value
                try:
                    return value.decode("utf-8")
                except UnicodeDecodeError:
                    raise self.invalid(
                        f"its attribute {name!r} ({value[:60]!r}) is not UTF-8 text",
                        hint="ONNX string attributes are UTF-8; the model is corrupt",
                    ) from None
        return default

    def check_attrs(self, node, allowed: set[str]) -> None:
        for a in node.attribute:
            if a.name not in allowed:
                raise self.unsupported(f"its attribute {a.name!r}")

    def const_input(self, k: int, what: str) -> np.ndarray | None:
        """Input ``k`` of the node as a constant (None when absent); a non-constant is an error."""
        node = self.node
        if k >= len(node.input) or not node.input[k]:
            return None
        if node.input[k] not in self.consts:
            raise self.not_constant(node.input[k], what, f" (input {k}, {node.input[k]!r})")
        return self.consts[node.input[k]]

    def not_constant(self, name: str, what: str, where: str = "") -> GraphError:
        """The error for value ``name``, which the node needs at build time (its ``what``)
        and which is not a constant: :class:`NeedsValue` when it is computed from model
        inputs alone (binding them makes it one), else a refusal."""
        behind = self.inputs_behind(name)
        if behind:  # known once the model runs
            how = "" if name == behind[0] else "computed from "
            return NeedsValue(
                f"{self.path}: {self.describe()}: its {what} is {how}the model input {behind[0]!r}, "
                "whose value byoc needs at build time",
                behind[0],
                hint="make it an initializer, or run the model through byoc.onnx.backend, which "
                "builds it for the values it is given",
                position=self.input_names.index(behind[0]),
            )
        return self.unsupported(f"a {what} computed at run time{where or f' ({name!r})'}")

    def inputs_behind(self, name: str) -> list[str]:
        """The model inputs that the value ``name`` is computed from, when it is
        computed from them and constants alone by deterministic nodes imported so far
        (the model's, and those of expanded functions and unrolled bodies: Range's
        bounds before a Loop's trip count, say): binding them makes it a constant.
        Empty when anything else goes into it."""
        model_inputs = {v.name for v in self.inputs}
        producers = self.producers
        found: list[str] = []
        stack, seen = [name], set()
        while stack:
            value = stack.pop()
            if value in seen or value in self.consts or not value:
                continue
            seen.add(value)
            if value in model_inputs:
                found.append(value)
                continue
            node = producers.get(value)
            if node is None or node.op_type in RANDOM:
                return []
            stack += [i for i in node.input if i] + sorted(outer_names(node))
        return sorted(found, key=[v.name for v in self.inputs].index)

    def type_of(self, name: str) -> tuple[tuple[int, ...] | None, np.dtype | None]:
        """``(shape, dtype)`` of ONNX value ``name``, None where unknown: a constant's,
        ONNX's inference's, or byoc's own of the statement that defines it (where ONNX's
        inference has none: a value of an expanded function or an unrolled loop, or one
        after a Reshape to a computed shape)."""
        if name in self.consts:
            return self.consts[name].shape, self.consts[name].dtype
        shape, dtype = self.types.get(name, (None, None))
        typed = self.typed.get(self.emitted.get(name, ""))
        if typed is not None:  # an alias (Identity) of a typed value, or a statement's own type
            shape = typed.shape if shape is None else shape
            dtype = numpy_dtype(typed.dtype) if dtype is None else dtype
        return shape, dtype

    def shape(self, name: str) -> tuple[int, ...]:
        shape = self.type_of(name)[0]
        if shape is None:
            raise self.unsupported(f"a value of unknown shape ({name!r})")
        return shape

    def dtype(self, name: str) -> np.dtype | None:
        """The dtype of ONNX value ``name`` (None when no inference knows it)."""
        return self.type_of(name)[1]

    def value(self, name: str) -> str:
        """The DSL identifier of ONNX value ``name``, writing a constant on first use."""
        found = self.emitted.get(name)
        if found is not None:
            return found
        if name not in self.consts:
            raise GraphError(
                f"{self.path}: {self.describe() + ': ' if self.node else ''}ONNX value {name!r} is used but never defined"
            )
        return self.constant(self.consts[name], name)

    def constant(self, array: np.ndarray, name: str) -> str:
        ident = self.names(name)
        array = np.asarray(array, order="C")  # not np.ascontiguousarray: it makes a scalar shape (1,)
        where = f"{self.path}: {self.describe() + ': ' if self.node else ''}constant {name!r}"
        type_ = f"{dsl_dtype(array.dtype, where)}{dims_text(array.shape)}"
        if array.size <= INLINE_ELEMENTS and (array.dtype.kind in "iub" or np.isfinite(array).all()):
            values = "[" + ", ".join(number(v) for v in array.ravel().tolist()) + "]"
        else:
            entry = name if name not in self.arrays else ident
            self.arrays[entry] = array
            values = f"weights[{dsl_string(entry)}]"
        self.lines.append(f"  {ident} = const {type_} {values}")
        self.emitted[name] = ident
        self.typed[ident] = TensorType(array.shape, dtype_name(array.dtype))
        return ident

    def scalar(self, value: float, like: str) -> str:
        """A rank-0 constant of the dtype of ONNX value ``like``."""
        dtype = self.dtype(like) or np.dtype(np.float32)
        return self.constant(np.asarray(value, dtype), self.names.fresh("k"))

    def emit(self, op: str, inputs: list[str], attrs: dict | None = None, out: str | None = None) -> str:
        """``out = op(inputs, attrs)``; ``out`` is an ONNX name (bound) or None (a fresh one)."""
        ident = self.names(out) if out is not None else self.names.fresh("t")
        args = list(inputs) + [f"{k}={attr_text(v)}" for k, v in (attrs or {}).items()]
        self.lines.append(f"  {ident} = {op}({', '.join(args)})")
        if out is not None:
            self.emitted[out] = ident
        self._infer(op, ident, inputs, attrs or {}, out)
        return ident

    def _infer(self, op: str, ident: str, inputs: list[str], attrs: dict, out: str | None) -> None:
        """The type of ``ident = op(inputs, attrs)`` by the catalog's shape rules, and of
        ONNX value ``out`` where ONNX's inference left its shape unknown: after a
        Reshape to a shape that a Shape/Gather/Concat chain computes, it may, and a
        later op that needs the shape (Softmax's axis) would be refused. A statement
        byoc's rules refuse is left untyped: the parser reports it, located."""
        types = [self.typed.get(i) for i in inputs]
        opdef = self.catalog.get(op)
        if opdef is None or None in types:
            return
        given = [
            (k, tuple(int(x) for x in v) if isinstance(v, (list, tuple)) else v) for k, v in attrs.items()
        ]
        try:
            inferred = infer_type(opdef, types, normalize_attrs(opdef, given))
        except (RuleError, ValueError, TypeError):
            return
        self.typed[ident] = inferred
        if out is not None and self.types.get(out, (None, None))[0] is None:
            self.types[out] = (inferred.shape, numpy_dtype(inferred.dtype))

    def alias(self, onnx_name: str, ident: str) -> None:
        self.emitted[onnx_name] = ident

    def reshaped(self, name: str, shape: list[int], op: str) -> str:
        """ONNX value ``name`` in ``shape``: a constant reshaped now, anything else by
        the catalog op ``op`` (a row's reshape role) at run time."""
        if name in self.consts:
            return self.constant(self.consts[name].reshape(shape), self.names.fresh("k"))
        return self.emit(op, [self.value(name)], {"newshape": list(shape)})
