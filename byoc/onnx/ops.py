"""ONNX nodes to catalog ops: the :class:`Importer` that walks a model's nodes, and
the handlers (:data:`KINDS`) that turn a node into byoc statements.

Which catalog op each ONNX op becomes is data, ``ops.yaml``; a handler here
reads the node's inputs and attributes for one kind of op. The catalog follows
ONNX's conventions (layouts, ``pads`` as begins then ends,
Reshape's 0 and -1, Split, Slice, Gather), so most handlers only rename the op and
its attributes; the rest compose several ops (Gemm, Softmax before opset 13) or
compute what ONNX leaves implicit (``auto_pad``).

An op of a user catalog names the ONNX op that imports as it in its ``onnx:`` key,
read as a row of the same table (:func:`onnx_row`, :meth:`byoc.catalog.OnnxImport.row`,
kind ``own_op``) and looked up first; the table must not have that ONNX op.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from ..catalog import Catalog, OnnxImport, infer_type, normalize_attrs
from ..errors import GraphError
from ..ir import DTYPES, TensorType, dtype_name, numpy_dtype
from .attention import ATTENTION_KINDS
from .composed import COMPOSED_KINDS
from .control import IN_PLACE, branch, loop, scan
from .expand import expand
from .grid_sample import GRID_SAMPLE_KINDS
from .model_import import (
    INLINE_ELEMENTS,
    Names,
    dsl_dtype,
    dsl_string,
    element_dtype,
    number,
    require_onnx,
    tensor_array,
)
from .indexing import INDEXING_KINDS
from .qlinear import QLINEAR_KINDS
from .quantize import FOLDED_AT_BUILD, QUANTIZE_KINDS
from .resize import resize
from .rnn import recurrent
from .signal import SIGNAL_KINDS, wrap_pad
from ..shape_rules import RuleError


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
    (bound, see :class:`Importer`). ``input`` is the input's ONNX name."""

    def __init__(self, message: str, input: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.input = input


class Importer:
    """One model's import: known constants, value types, and the statements so far.
    ``bound`` gives values of model inputs, which the import takes as constants (the
    model specialised to them: they are no longer inputs)."""

    def __init__(
        self,
        model,
        shapes: dict[str, tuple[int, ...]],
        path: str,
        calls=(),
        bound: Mapping | None = None,
        catalog: Catalog | None = None,
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
        declared = [onnx.ValueInfoProto() for _ in self.inputs]
        for saved, value in zip(declared, self.inputs):
            saved.CopyFrom(value)
        try:  # the shapes are fixed in the caller's model for inference only (no copy of its weights)
            self._fix_input_shapes(shapes)
            self.input_types = [_value_type(onnx, v) for v in self.inputs]
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
            self.types[v.name] = _value_type(onnx, v)
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
            params.append(f"{ident}: {dsl_dtype(dtype, f'{self.path}: input {value.name!r}')}{_dims(shape)}")
        for index, node in enumerate(self.graph.node):
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
        claims = self.own.get((_domain(node.domain), node.op_type))
        if not claims:
            return None
        opset = self.opset if _domain(node.domain) == "" else self.domains.get(node.domain, 1)
        for source, row in claims:
            if source.covers(opset):
                return row
        named = "; ".join(
            f"{row.op} at {source.opsets_text()} ({source.loc.file}:{source.loc.line})"
            if source.loc
            else f"{row.op} at {source.opsets_text()}"
            for source, row in claims
        )
        domain = _domain(node.domain) or "ai.onnx"
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
                feeds[name] = np.broadcast_to(np.zeros((), dtype), shape)
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
        """The versions of ``op_type`` newer than the model's opset, oldest first: the
        reference evaluator implements some ops only from a later version
        (QuantizeLinear and DequantizeLinear from 19, which added types and attributes
        with defaults that keep the earlier meaning), so a constant one is folded at the
        first version it implements."""
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
        type_ = f"{dsl_dtype(array.dtype, where)}{_dims(array.shape)}"
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
        args = list(inputs) + [f"{k}={_attr(v)}" for k, v in (attrs or {}).items()]
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


def outer_names(node) -> set[str]:
    """The values that ``node``'s subgraphs (an If's branches, a Loop's or Scan's body,
    and theirs in turn) read from the scopes around ``node``."""
    found: set[str] = set()
    for attribute in node.attribute:
        for graph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
            defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
            for inner in graph.node:
                read = {i for i in inner.input if i} | outer_names(inner)
                found |= read - defined
                defined |= set(inner.output)
            found |= {o.name for o in graph.output} - defined
    return found


def _value_type(onnx, value):
    t = value.type.tensor_type
    try:
        dtype = element_dtype(onnx, t.elem_type) if t.elem_type else None
    except (KeyError, ValueError, TypeError):  # an element type this onnx does not know
        dtype = None  # the node that makes or takes such a value is refused with its name
    if not t.HasField("shape") or any(not d.HasField("dim_value") or d.dim_value < 0 for d in t.shape.dim):
        return None, dtype  # unknown: dynamic, or a negative dimension (inference of a corrupt model)
    return tuple(d.dim_value for d in t.shape.dim), dtype


def _dims(shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _attr(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(str(int(x)) for x in v) + "]"
    if isinstance(v, str):
        return dsl_string(v)
    return number(v)


# ---------------------------------------------------------------- the handlers


@dataclass(frozen=True)
class OnnxOp:
    """One row of ops.yaml: the handler ``kind``, the catalog ``op`` it emits and
    the further ops of its ``roles``; ``attrs`` and ``axes_input_since`` as documented there."""

    kind: str
    op: str | None = None
    roles: Mapping[str, str] = field(default_factory=dict)
    attrs: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    axes_input_since: int = 1
    fixed: Mapping[str, float | str] = field(default_factory=dict)
    """Attributes that the ONNX op fixes: of the catalog ``op`` (HardSwish's hard_sigmoid
    slope), or of the ONNX op whose semantics it has (Upsample's, as a Resize)."""


Handler = Callable[[Importer, object, OnnxOp], None]


def _unary(imp: Importer, node, e: OnnxOp) -> None:
    """An elementwise op of one input; ``attrs`` maps ONNX attribute -> (byoc name, default)."""
    imp.check_attrs(node, set(e.attrs))
    values = {name: float(imp.attr(key, default)) for key, (name, default) in e.attrs.items()}
    imp.emit(e.op, [imp.value(node.input[0])], values, node.output[0])


def _binary(imp: Importer, node, e: OnnxOp) -> None:
    """An elementwise op of two inputs, or of several (Sum, Max, Min) as a chain.
    Before opset 7, Add, Sub, Mul, Div and Pow broadcast only when ``broadcast=1``
    says so, the second input's dimensions matching the first's from ``axis`` on
    (default: its last ones): trailing size-1 axes make that a numpy broadcast."""
    imp.check_attrs(node, {"broadcast", "axis"})
    names = [imp.value(i) for i in node.input]
    if imp.attr("broadcast", 0):
        rank, b_shape = len(imp.shape(node.input[0])), list(imp.shape(node.input[1]))
        trailing = rank - int(imp.attr("axis", rank - len(b_shape))) - len(b_shape)
        if trailing > 0:
            names[1] = imp.reshaped(node.input[1], b_shape + [1] * trailing, e.roles["reshape"])
    if len(names) == 1:
        imp.emit(e.roles["single"], names, out=node.output[0])
        return
    result = names[0]
    for k, other in enumerate(names[1:], start=2):
        result = imp.emit(e.op, [result, other], out=node.output[0] if k == len(names) else None)


def _pass_through(imp: Importer, node, e: OnnxOp) -> None:
    """Identity, and Dropout in inference (its mask output must be unused)."""
    if any(o in imp.used for o in node.output[1:]):
        raise imp.unsupported("Dropout's mask output")
    imp.alias(node.output[0], imp.value(node.input[0]))


def auto_pads(imp: Importer, kernel, strides, dilations) -> list[int]:
    """``pads`` for the node's ``auto_pad`` (or its own ``pads`` when NOTSET)."""
    auto = imp.attr("auto_pad", "NOTSET")
    rank = len(kernel)
    if auto == "NOTSET":
        return list(imp.attr("pads", [0] * (2 * rank)))
    if auto == "VALID":
        return [0] * (2 * rank)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise imp.unsupported(f"auto_pad={auto}")
    spatial = imp.shape(imp.node.input[0])[2:]
    _check_positive(imp, "strides", strides, rank)
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        out = math.ceil(size / s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else large)
        ends.append(large if auto == "SAME_UPPER" else small)
    return begins + ends


def _check_positive(imp: Importer, name: str, values, rank: int) -> None:
    """An attribute of one positive int per spatial axis (``strides``), as ``auto_pad``
    SAME_* needs to compute its pads."""
    if len(values) != rank or any(int(v) < 1 for v in values):
        raise imp.invalid(
            f"{name} {list(values)} with auto_pad={imp.attr('auto_pad')}: it needs {rank} positive value(s)",
            hint=f"ONNX's {name} are positive, one per spatial axis",
        )


def _transpose_pads(imp: Importer, kernel, strides, dilations) -> tuple[list[int], list[int]]:
    """ConvTranspose's ``pads`` and ``output_padding``. An ``output_shape`` (or
    ``auto_pad`` SAME_*, whose output is input * stride) sets the pads to what that
    size leaves over: SAME_UPPER puts the smaller half first, anything else the
    larger; a size beyond the unpadded output is more output padding at the end."""
    rank = len(kernel)
    extra = list(imp.attr("output_padding", [0] * rank))
    auto = imp.attr("auto_pad", "NOTSET")
    wanted = imp.attr("output_shape")
    spatial = imp.shape(imp.node.input[0])[2:]
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        _check_positive(imp, "strides", strides, rank)
    if wanted is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [size * s for size, s in zip(spatial, strides)]
    if wanted is None:
        return auto_pads(imp, kernel, strides, dilations), extra
    wanted = list(wanted)[-rank:]  # spatial sizes, or the whole output shape
    begins, ends = [], []
    for k in range(rank):
        full = strides[k] * (spatial[k] - 1) + extra[k] + (kernel[k] - 1) * dilations[k] + 1
        total = full - wanted[k]
        if total < 0:
            extra[k] -= total
            total = 0
        small, large = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else large)
        ends.append(large if auto == "SAME_UPPER" else small)
    return begins + ends, extra


def conv_attrs(imp: Importer, node, transpose: bool = False, weights: int = 1) -> dict:
    """The attributes of the catalog's conv (conv_transpose) for the node's ONNX ones,
    checked; ``weights`` is the index of its weights input (QLinearConv's is 3)."""
    allowed = {"auto_pad", "pads", "strides", "dilations", "group", "kernel_shape"}
    imp.check_attrs(node, allowed | ({"output_padding", "output_shape"} if transpose else set()))
    weight_shape = imp.shape(node.input[weights])
    kernel = list(imp.attr("kernel_shape", weight_shape[2:]))
    if kernel != list(weight_shape[2:]):
        raise imp.invalid(
            f"its kernel_shape {kernel} disagrees with its weights {node.input[weights]!r} of shape "
            f"{list(weight_shape)}, whose kernel is {list(weight_shape[2:])}",
            hint="kernel_shape must be the weights' spatial dimensions (or be left out)",
        )
    rank = len(kernel)
    strides = list(imp.attr("strides", [1] * rank))
    dilations = list(imp.attr("dilations", [1] * rank))
    attrs = {"strides": strides, "pads": [], "dilations": dilations, "groups": int(imp.attr("group", 1))}
    if transpose:
        attrs["pads"], attrs["output_padding"] = _transpose_pads(imp, kernel, strides, dilations)
    else:
        attrs["pads"] = auto_pads(imp, kernel, strides, dilations)
    return attrs


def _conv(transpose: bool) -> Handler:
    def handle(imp: Importer, node, e: OnnxOp) -> None:
        attrs = conv_attrs(imp, node, transpose)
        x, w = imp.value(node.input[0]), imp.value(node.input[1])
        has_bias = len(node.input) > 2 and node.input[2]
        y = imp.emit(e.op, [x, w], attrs, None if has_bias else node.output[0])
        if has_bias:
            imp.emit(e.roles["bias"], [y, imp.value(node.input[2])], {"axis": 1}, node.output[0])

    return handle


def _gemm(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"alpha", "beta", "transA", "transB", "broadcast"})
    alpha, beta = float(imp.attr("alpha", 1.0)), float(imp.attr("beta", 1.0))
    a = imp.value(node.input[0])
    if imp.attr("transA", 0):
        a = imp.emit(e.roles["flip"], [a], {"perm": [1, 0]})
    b = imp.value(node.input[1])
    has_c = len(node.input) > 2 and node.input[2] and beta != 0.0
    last = None if (alpha != 1.0 or has_c) else node.output[0]
    y = imp.emit(e.roles["times_transposed" if imp.attr("transB", 0) else "times"], [a, b], out=last)
    if alpha != 1.0:
        y = imp.emit(
            e.roles["scale"], [y, imp.scalar(alpha, node.input[0])], out=None if has_c else node.output[0]
        )
    if has_c:
        c_name = node.input[2]
        if beta == 1.0:
            c = imp.value(c_name)
        elif c_name in imp.consts:
            c = imp.constant(
                imp.consts[c_name] * np.asarray(beta, imp.consts[c_name].dtype), c_name + "_beta"
            )
        else:
            c = imp.emit(e.roles["scale"], [imp.value(c_name), imp.scalar(beta, c_name)])
        # a bias of one value per output column (the common case) is a bias_add, the form
        # a backend's dense + bias pattern takes; any other C broadcasts as an add
        units = imp.shape(node.output[0])[-1] if imp.type_of(node.output[0])[0] else None
        if imp.type_of(c_name)[0] == (units,):
            imp.emit(e.roles["bias"], [y, c], {"axis": 1}, out=node.output[0])
        else:
            imp.emit(e.roles["plus"], [y, c], out=node.output[0])


def _matmul(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, set())
    imp.emit(e.op, [imp.value(node.input[0]), imp.value(node.input[1])], out=node.output[0])


def _clip(imp: Importer, node, e: OnnxOp) -> None:
    """Clip's bounds: ``attrs`` lists them in input order (input 1, then 2); before
    opset 11 they are attributes of those names, from it optional constant inputs."""
    imp.check_attrs(node, set(e.attrs))
    bounds = {}
    for k, (key, (name, default)) in enumerate(e.attrs.items(), start=1):
        given = imp.const_input(k, f"Clip {key}")
        bounds[name] = (
            _one_value(imp, given, f"Clip {key}") if given is not None else float(imp.attr(key, default))
        )
    if not all(map(math.isfinite, bounds.values())):
        # An attribute is finite: clamp by constants instead, which hold inf and nan
        # (the roles low and high: elementwise maximum, then minimum).
        low, high = (imp.scalar(v, node.input[0]) for v in bounds.values())
        clamped = imp.emit(e.roles["low"], [imp.value(node.input[0]), low])
        imp.emit(e.roles["high"], [clamped, high], out=node.output[0])
        return
    imp.emit(e.op, [imp.value(node.input[0])], bounds, node.output[0])


def _one_value(imp: Importer, given: np.ndarray, what: str) -> float:
    """A scalar input (Clip's bounds, Pad's value) as a float: it must hold one value."""
    if np.size(given) != 1:
        raise imp.invalid(
            f"its {what} input holds {np.size(given)} values{f' (shape {list(np.shape(given))})' if np.ndim(given) else ''}, not one",
            hint=f"{what} is a scalar (or leave the input out, with an empty name)",
        )
    return float(np.ravel(given)[0])


def _batch_norm(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"epsilon", "momentum", "spatial", "is_test", "training_mode"})
    if imp.attr("training_mode", 0) or any(o in imp.used for o in node.output[1:]):
        raise imp.unsupported("BatchNormalization in training mode")
    if imp.attr("spatial", 1) != 1:
        raise imp.unsupported("BatchNormalization with spatial=0")
    inputs = [imp.value(i) for i in node.input[:5]]
    imp.emit(e.op, inputs, {"epsilon": float(imp.attr("epsilon", 1e-5))}, node.output[0])


def _lrn(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"size", "alpha", "beta", "bias"})
    attrs = {
        "size": int(imp.attr("size")),
        "alpha": float(imp.attr("alpha", 1e-4)),
        "beta": float(imp.attr("beta", 0.75)),
        "bias": float(imp.attr("bias", 1.0)),
    }
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _pool(average: bool) -> Handler:
    def handle(imp: Importer, node, e: OnnxOp) -> None:
        allowed = {"auto_pad", "kernel_shape", "strides", "pads", "ceil_mode", "storage_order", "dilations"}
        imp.check_attrs(node, allowed | ({"count_include_pad"} if average else set()))
        if any(o in imp.used for o in node.output[1:]):  # the MaxPool handler composes them
            raise imp.unsupported("MaxPool's indices here")
        kernel = list(imp.attr("kernel_shape"))
        rank = len(kernel)
        strides = list(imp.attr("strides", [1] * rank))
        dilations = list(imp.attr("dilations", [1] * rank))
        attrs = {
            "kernel_shape": kernel,
            "strides": strides,
            "pads": auto_pads(imp, kernel, strides, dilations),
            "dilations": dilations,
            "ceil_mode": bool(imp.attr("ceil_mode", 0)),
        }
        if average:
            attrs["count_include_pad"] = bool(imp.attr("count_include_pad", 0))
        imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])

    return handle


def _softmax(imp: Importer, node, e: OnnxOp) -> None:
    """Softmax and LogSoftmax: one axis from opset 13; before it, over the input
    flattened to 2-D at ``axis`` (default 1), which is a reshape around the op."""
    imp.check_attrs(node, {"axis"})
    x = imp.value(node.input[0])
    shape = imp.shape(node.input[0])
    if imp.opset >= 13:
        imp.emit(e.op, [x], {"axis": int(imp.attr("axis", -1))}, node.output[0])
        return
    axis = _axis(imp, int(imp.attr("axis", 1)), len(shape), "axis")
    if axis == len(shape) - 1:
        imp.emit(e.op, [x], {"axis": -1}, node.output[0])
        return
    flat = [math.prod(shape[:axis]), math.prod(shape[axis:])]
    y = imp.emit(e.op, [imp.emit(e.roles["flat"], [x], {"newshape": flat})], {"axis": 1})
    imp.emit(e.roles["flat"], [y], {"newshape": list(shape)}, node.output[0])


def _axis(imp: Importer, axis: int, rank: int, what: str) -> int:
    """``axis`` of a rank-``rank`` input, in ONNX's range [-rank, rank - 1], as 0..rank - 1."""
    if not -rank <= axis < rank:
        raise imp.invalid(
            f"{what} {axis} is out of range for an input of rank {rank}",
            hint=f"ONNX takes an axis in [{-rank}, {rank - 1}] here",
        )
    return axis % rank


def _reshape(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"allowzero", "shape"})
    shape = imp.attr("shape") if imp.opset < 5 else imp.const_input(1, "Reshape shape")
    attrs = {"newshape": [int(v) for v in np.ravel(shape)], "allowzero": bool(imp.attr("allowzero", 0))}
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _flatten(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"axis"})
    axis = int(imp.attr("axis", 1))
    axis += len(imp.shape(node.input[0])) if axis < 0 else 0  # -r..r; -1 is r - 1
    imp.emit(e.op, [imp.value(node.input[0])], {"axis": axis}, node.output[0])


def _transpose(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"perm"})
    perm = imp.attr("perm")
    attrs = {"perm": list(perm)} if perm is not None else {}
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _axes(imp: Importer, node, since: int) -> list[int] | None:
    """Axes from the attribute (before opset ``since``) or the second input."""
    if imp.opset < since:
        axes = imp.attr("axes")
    else:
        axes = imp.const_input(1, "axes")
    return None if axes is None else [int(a) for a in np.ravel(axes)]


def _squeeze(imp: Importer, node, e: OnnxOp) -> None:
    """Squeeze and Unsqueeze: axes as an attribute before opset 13, an input from it."""
    imp.check_attrs(node, {"axes"})
    axes = _axes(imp, node, 13)
    attrs = {"axes": axes} if axes is not None else {}
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _expand(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, set())
    given = imp.const_input(1, "Expand shape")
    if given is None or np.ndim(given) != 1:
        raise imp.invalid(
            f"its shape input is {'absent' if given is None else f'of rank {np.ndim(given)}'}, not a 1-D tensor",
            hint="Expand's shape is a 1-D int64 tensor, one value per output dimension",
        )
    shape = [int(v) for v in given]
    imp.emit(e.op, [imp.value(node.input[0])], {"newshape": shape}, node.output[0])


def _pad(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"mode", "pads", "value", "paddings"})
    mode = imp.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise imp.unsupported(f"Pad mode {mode!r}")
    if imp.opset < 11:
        pads, value = imp.attr("pads", imp.attr("paddings")), float(imp.attr("value", 0.0))
    else:
        pads = imp.const_input(1, "Pad pads")
        given = imp.const_input(2, "Pad value")
        value = _one_value(imp, given, "Pad constant_value") if given is not None else 0.0
        axes = imp.const_input(3, "Pad axes")
        if axes is not None:  # opset 18: pads for these axes only (begins, then ends); 0 elsewhere
            rank = len(imp.shape(node.input[0]))
            listed = [int(a) for a in np.ravel(axes)]
            if len(np.ravel(pads)) != 2 * len(listed) or any(not -rank <= a < rank for a in listed):
                raise imp.invalid(
                    f"its pads {np.ravel(pads).tolist()} and axes {listed} do not match a rank-{rank} input",
                    hint="Pad's pads hold a begin and an end for each of its axes, in range",
                )
            full = [0] * (2 * rank)
            for k, a in enumerate(listed):
                full[a % rank], full[a % rank + rank] = (
                    int(np.ravel(pads)[k]),
                    int(np.ravel(pads)[k + len(listed)]),
                )
            pads = full
    if mode == "wrap":  # a gather per padded axis (byoc/onnx/signal.py)
        wrap_pad(imp, node, e, [int(p) for p in np.ravel(pads)])
        return
    attrs = {"pads": [int(p) for p in np.ravel(pads)], "mode": mode, "value": value}
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _slice(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"starts", "ends", "axes"})
    shape = imp.shape(node.input[0])
    if imp.opset < 10:
        starts, ends, axes, steps = imp.attr("starts"), imp.attr("ends"), imp.attr("axes"), None
    else:
        starts, ends = imp.const_input(1, "Slice starts"), imp.const_input(2, "Slice ends")
        axes, steps = imp.const_input(3, "Slice axes"), imp.const_input(4, "Slice steps")
    axes = list(range(len(np.ravel(starts)))) if axes is None else [int(a) for a in np.ravel(axes)]
    sizes = [shape[a % len(shape)] for a in axes]
    # ONNX clamps starts and ends to the axis; clamp them here so that INT64_MAX fits every dtype
    starts = [int(min(max(int(s), -d - 1), d)) for s, d in zip(np.ravel(starts), sizes)]
    ends = [int(min(max(int(e), -d - 1), d)) for e, d in zip(np.ravel(ends), sizes)]
    attrs = {"starts": starts, "ends": ends, "axes": axes}
    if steps is not None:
        attrs["steps"] = [int(s) for s in np.ravel(steps)]
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _split(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"axis", "split", "num_outputs"})
    axis = int(imp.attr("axis", 0))
    _axis(imp, axis, len(imp.shape(node.input[0])), "axis")  # checked; written as ONNX gives it
    sizes = imp.attr("split") if imp.opset < 13 else imp.const_input(1, "Split sizes")
    attrs = {"axis": axis}
    if sizes is not None:
        attrs["sizes"] = [int(s) for s in np.ravel(sizes)]
    elif imp.attr("num_outputs") is None or imp.shape(node.input[0])[axis] % len(node.output):
        attrs["sizes"] = _even_split(imp.shape(node.input[0])[axis], len(node.output))
    targets = [imp.names(o) for o in node.output]
    args = ", ".join([imp.value(node.input[0])] + [f"{k}={_attr(v)}" for k, v in attrs.items()])
    imp.lines.append(f"  {', '.join(targets)} = {e.op}({args})")
    shape, dtype = imp.shape(node.input[0]), imp.dtype(node.input[0])
    parts = attrs.get("sizes") or [shape[axis] // len(node.output)] * len(node.output)
    for o, t, size in zip(node.output, targets, parts):
        imp.alias(o, t)
        part = tuple(size if k == axis % len(shape) else d for k, d in enumerate(shape))
        imp.typed[t] = TensorType(part, dtype_name(np.dtype(dtype)))  # byoc's type of each part


def _even_split(size: int, parts: int) -> list[int]:
    """ONNX's parts of ``size`` in ``parts``: equal, the last one smaller."""
    each = math.ceil(size / parts)
    return [min(each, size - k * each) for k in range(parts)]


def _gather(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"axis"})
    inputs = [imp.value(node.input[0]), imp.value(node.input[1])]
    imp.emit(e.op, inputs, {"axis": int(imp.attr("axis", 0))}, node.output[0])


def _concat(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"axis"})
    inputs = [imp.value(i) for i in node.input]
    imp.emit(e.op, inputs, {"axis": int(imp.attr("axis"))}, node.output[0])


def _reduce(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"axes", "keepdims", "noop_with_empty_axes"})
    axes = _axes(imp, node, e.axes_input_since)
    if not axes and imp.attr("noop_with_empty_axes", 0):
        imp.alias(node.output[0], imp.value(node.input[0]))
        return
    attrs = {"axes": axes or [], "keepdims": bool(imp.attr("keepdims", 1))}
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _where(imp: Importer, node, e: OnnxOp) -> None:
    """Where(condition, x, y): a bool condition (a constant or a value computed at run
    time), all three broadcast."""
    imp.check_attrs(node, set())
    imp.emit(e.op, [imp.value(i) for i in node.input[:3]], out=node.output[0])


def _cast(imp: Importer, node, e: OnnxOp) -> None:
    """Cast to ``to``, or CastLike to the dtype of input 1, as the catalog's ``cast`` (its
    rule: spec/ops.yaml); a cast to the dtype the value already has is no node at all.
    ``saturate`` and ``round_mode`` concern float8 targets only, which byoc lacks."""
    imp.check_attrs(node, {"to", "saturate", "round_mode"})
    target = imp.dtype(node.input[1]) if len(node.input) > 1 else _to(imp, "Cast")
    source = imp.dtype(node.input[0])
    for what, dtype in (("from", source), ("to", target)):
        if dtype is None or dtype_name(np.dtype(dtype)) is None:
            raise imp.unsupported(
                f"a Cast {what} {'an unknown dtype' if dtype is None else dtype}",
                hint=f"byoc's dtypes: {', '.join(DTYPES)}",
            )
    if source == target:
        imp.alias(node.output[0], imp.value(node.input[0]))
        return
    imp.emit(e.op or "cast", [imp.value(node.input[0])], {"to": dtype_name(np.dtype(target))}, node.output[0])


def _to(imp: Importer, what: str) -> np.dtype:
    """The dtype that the node's attribute ``to`` (an ONNX TensorProto type number) names;
    one byoc lacks is an error naming the node (``what``: a Cast to FLOAT8E4M3FN)."""
    to = int(imp.attr("to"))
    try:
        target = np.dtype(imp.onnx.helper.tensor_dtype_to_np_dtype(to))
    except Exception:
        target = None
    if target is None or dtype_name(target) is None:
        name = imp.onnx.TensorProto.DataType.Name(to) if to in imp.onnx.TensorProto.DataType.values() else to
        raise imp.unsupported(f"a {what} to {name}", hint=f"byoc's dtypes: {', '.join(DTYPES)}")
    return target


def _bitcast(imp: Importer, node, e: OnnxOp) -> None:
    """BitCast: each element's bits as the dtype ``to`` of the same width, the catalog's
    ``e.op`` (its rule, which refuses another width: spec/ops.yaml)."""
    imp.check_attrs(node, {"to"})
    to = dtype_name(_to(imp, "BitCast"))
    imp.emit(e.op, [imp.value(node.input[0])], {"to": to}, node.output[0])


def _attributed(imp: Importer, node, e: OnnxOp, *, own: bool = False) -> None:
    """An elementwise op of any number of inputs whose ONNX attributes ``attrs`` names
    (ONNX name -> [catalog name, default]); each value the node gives is converted to
    the type of the row's default (an ONNX int flag to a bool where the default is
    ``true``/``false``), the defaults being the catalog's (which are ONNX's). Kind
    ``own_op``, a user catalog's ``onnx:`` key, takes an op of any shape rule and
    writes ONNX's default where the node leaves an attribute out (the op's own
    default need not be ONNX's)."""
    imp.check_attrs(node, set(e.attrs))
    if own and len(node.output) > 1:
        raise imp.invalid(
            f"it has {len(node.output)} outputs, and {e.op}, which your catalog imports it as, gives one",
            hint="an op of your own imports an ONNX op of one output (spec/README.md)",
        )
    values: dict[str, object] = {}
    for key, (name, default) in e.attrs.items():
        value = imp.attr(key)
        if value is None and own:
            value = default
        if value is None:
            continue
        # The row's default says the catalog attribute's type: a YAML bool for a flag
        # that ONNX writes as an int, a string for a string.
        values[name] = (
            bool(int(value))
            if isinstance(default, bool)
            else str(value)
            if isinstance(default, str)
            else value
        )
    imp.emit(e.op, [imp.value(i) for i in node.input], values, node.output[0])


def _prelu(imp: Importer, node, e: OnnxOp) -> None:
    """PRelu; before opset 7 a slope of one dimension is per channel (axis 1), from
    it the slope broadcasts as numpy does."""
    imp.check_attrs(node, set())
    x_shape, slope_shape = imp.shape(node.input[0]), imp.shape(node.input[1])
    slope = imp.value(node.input[1])
    if imp.opset < 7 and len(slope_shape) == 1 and slope_shape[0] > 1 and len(x_shape) > 2:
        slope = imp.reshaped(node.input[1], [slope_shape[0]] + [1] * (len(x_shape) - 2), e.roles["reshape"])
    imp.emit(e.op, [imp.value(node.input[0]), slope], out=node.output[0])


def _tile(imp: Importer, node, e: OnnxOp) -> None:
    """Tile by constant repeats: a size-1 axis before each repeated one, expanded to
    the repeat count, then merged into it (row-major order makes that a tiling)."""
    imp.check_attrs(node, set())
    shape = imp.shape(node.input[0])
    given = imp.const_input(1, "Tile repeats")
    if given is None or np.ndim(given) != 1 or len(given) != len(shape) or np.any(given < 0):
        shown = "absent" if given is None else f"{np.asarray(given).tolist()} (shape {list(np.shape(given))})"
        raise imp.invalid(
            f"its repeats input is {shown}, not {len(shape)} non-negative counts, one per axis of its input",
            hint="Tile's repeats is a 1-D int64 tensor with one count per input dimension",
        )
    repeats = [int(r) for r in given]
    spread, expanded, merged = [], [], []
    for size, r in zip(shape, repeats):
        spread += [1, size] if r != 1 else [size]
        expanded += [r, size] if r != 1 else [size]
        merged.append(size * r)
    x = imp.value(node.input[0])
    spread_x = imp.emit(e.roles["reshape"], [x], {"newshape": spread})
    wide = imp.emit(e.op, [spread_x], {"newshape": expanded})
    imp.emit(e.roles["reshape"], [wide], {"newshape": merged}, node.output[0])


def _instance_norm(imp: Importer, node, e: OnnxOp) -> None:
    """InstanceNormalization: each (batch, channel) plane normalised by its own mean
    and variance over the spatial axes, then scaled and shifted per channel."""
    imp.check_attrs(node, {"epsilon"})
    shape = imp.shape(node.input[0])
    over = {"axes": list(range(2, len(shape))), "keepdims": True}
    r = e.roles
    x = imp.value(node.input[0])
    centred = imp.emit(r["minus"], [x, imp.emit(e.op, [x], over)])
    variance = imp.emit(e.op, [imp.emit(r["times"], [centred, centred])], over)
    eps = imp.scalar(float(imp.attr("epsilon", 1e-5)), node.input[0])
    normed = imp.emit(
        r["times"], [centred, imp.emit(r["inverse_sqrt"], [imp.emit(r["plus"], [variance, eps])])]
    )
    per_channel = [shape[1]] + [1] * (len(shape) - 2)
    scale, bias = (imp.reshaped(node.input[k], per_channel, r["reshape"]) for k in (1, 2))
    imp.emit(r["plus"], [imp.emit(r["times"], [normed, scale]), bias], out=node.output[0])


def _shrink(imp: Importer, node, e: OnnxOp) -> None:
    """Shrink: 0 within [-lambd, lambd], else x moved towards 0 by bias. The part of x
    beyond the band, relu(x - lambd) - relu(-x - lambd), has the sign s (-1, 0 or 1)
    of the side x is on, and the result is (x - s * bias) * |s|."""
    imp.check_attrs(node, {"bias", "lambd"})
    r = e.roles
    x = imp.value(node.input[0])
    lambd = imp.scalar(float(imp.attr("lambd", 0.5)), node.input[0])
    above = imp.emit(e.op, [imp.emit(r["minus"], [x, lambd])])
    below = imp.emit(e.op, [imp.emit(r["minus"], [imp.emit(r["negate"], [x]), lambd])])
    side = imp.emit(r["signum"], [imp.emit(r["minus"], [above, below])])
    bias = imp.scalar(float(imp.attr("bias", 0.0)), node.input[0])
    moved = imp.emit(r["minus"], [x, imp.emit(r["times"], [side, bias])])
    imp.emit(r["times"], [moved, imp.emit(r["magnitude"], [side])], out=node.output[0])


def _normalized(imp: Importer, node, e: OnnxOp, centred: bool) -> None:
    """LayerNormalization (``centred``) and RMSNormalization over the axes from ``axis``
    on: (x - mean) / sqrt(variance + epsilon), or x / sqrt(mean(x^2) + epsilon), times
    Scale, plus B (LayerNormalization's optional third input); both broadcast to x's
    trailing axes. A float16 or bfloat16 x is computed in float32 when ``stash_type``
    is 1 (the default), as ONNX says, and the result cast back. LayerNormalization's
    optional Mean and InvStdDev outputs are the statistics, kept dims."""
    imp.check_attrs(node, {"axis", "epsilon", "stash_type"})
    r = e.roles
    shape = imp.shape(node.input[0])
    axis = int(imp.attr("axis", -1))
    if not -len(shape) <= axis < len(shape):
        raise imp.invalid(f"its axis {axis} is out of range for a rank-{len(shape)} input")
    over = {"axes": list(range(axis % len(shape), len(shape))), "keepdims": True}
    dtype = imp.dtype(node.input[0])
    stash = int(imp.attr("stash_type", 1)) == 1 and dtype_name(np.dtype(dtype)) in ("float16", "bfloat16")
    x = imp.value(node.input[0])
    if stash:
        x = imp.emit(r["cast"], [x], {"to": "float32"})
    eps = imp.constant(
        np.asarray(float(imp.attr("epsilon", 1e-5)), np.float32 if stash else dtype), imp.names.fresh("k")
    )
    if centred:
        mean = imp.emit(e.op, [x], over)
        x = imp.emit(r["minus"], [x, mean])
    inverse = imp.emit(
        r["inverse_sqrt"], [imp.emit(r["plus"], [imp.emit(e.op, [imp.emit(r["times"], [x, x])], over), eps])]
    )
    y = imp.emit(r["times"], [x, inverse])
    if stash:
        y = imp.emit(r["cast"], [y], {"to": dtype_name(np.dtype(dtype))})
    has_bias = centred and len(node.input) > 2 and node.input[2]
    y = imp.emit(r["times"], [y, imp.value(node.input[1])], out=None if has_bias else node.output[0])
    if has_bias:
        imp.emit(r["plus"], [y, imp.value(node.input[2])], out=node.output[0])
    for k, value in ((1, mean if centred else None), (2, inverse)):  # Mean, InvStdDev
        if k < len(node.output) and node.output[k] and node.output[k] in imp.used:
            if not centred or value is None:
                raise imp.unsupported(f"its output {k}")
            imp.alias(node.output[k], value)


def _gelu(imp: Importer, node, e: OnnxOp) -> None:
    """Gelu (opset 20): the exact form, the catalog's op, or the approximation that
    ONNX names after the function it uses, ``approximate`` = the ``squash`` role's op:
    0.5 x (1 + squash(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    imp.check_attrs(node, {"approximate"})
    r = e.roles
    x = imp.value(node.input[0])
    approximate = imp.attr("approximate", "none")
    if approximate == "none":
        imp.emit(e.op, [x], out=node.output[0])
        return
    if approximate != r["squash"]:
        raise imp.invalid(f"its approximate {approximate!r} is not 'none' or {r['squash']!r}")
    k = {v: imp.scalar(v, node.input[0]) for v in (0.044715, math.sqrt(2 / math.pi), 0.5, 1.0)}
    cube = imp.emit(r["times"], [imp.emit(r["times"], [x, x]), x])
    inner = imp.emit(
        r["times"],
        [k[math.sqrt(2 / math.pi)], imp.emit(r["plus"], [x, imp.emit(r["times"], [k[0.044715], cube])])],
    )
    half = imp.emit(r["times"], [k[0.5], x])
    imp.emit(
        r["times"], [half, imp.emit(r["plus"], [k[1.0], imp.emit(r["squash"], [inner])])], out=node.output[0]
    )


def _gated(imp: Importer, node, e: OnnxOp) -> None:
    """x times a gate of x: Swish x sigmoid(alpha x), HardSwish x hard_sigmoid(x) (its
    slope ``fixed`` at 1/6), Mish x tanh(softplus(x)). ``op`` is the gate's last op, with
    the ``fixed`` attributes and those of ``attrs`` (as for unary), but for one named
    ``scale``, which multiplies x first (Swish's alpha); ``roles.inner`` is an op
    before it (Mish's softplus)."""
    imp.check_attrs(node, set(e.attrs))
    r = e.roles
    x = imp.value(node.input[0])
    values = {**e.fixed, **{name: float(imp.attr(key, default)) for key, (name, default) in e.attrs.items()}}
    gate = x
    if "scale" in values:
        gate = imp.emit(r["times"], [imp.scalar(values.pop("scale"), node.input[0]), x])
    if "inner" in r:
        gate = imp.emit(r["inner"], [gate])
    imp.emit(r["times"], [x, imp.emit(e.op, [gate], values)], out=node.output[0])


def _celu(imp: Importer, node, e: OnnxOp) -> None:
    """Celu: max(0, x) + min(0, alpha (exp(x / alpha) - 1)), which is alpha elu(x / alpha)."""
    imp.check_attrs(node, {"alpha"})
    r = e.roles
    alpha = imp.scalar(float(imp.attr("alpha", 1.0)), node.input[0])
    scaled = imp.emit(r["over"], [imp.value(node.input[0]), alpha])
    imp.emit(r["times"], [alpha, imp.emit(e.op, [scaled], {"alpha": 1.0})], out=node.output[0])


def _thresholded(imp: Importer, node, e: OnnxOp) -> None:
    """ThresholdedRelu: x where x > alpha, else 0."""
    imp.check_attrs(node, {"alpha"})
    r = e.roles
    x = imp.value(node.input[0])
    above = imp.emit(r["above"], [x, imp.scalar(float(imp.attr("alpha", 1.0)), node.input[0])])
    imp.emit(e.op, [above, x, imp.scalar(0.0, node.input[0])], out=node.output[0])


def _reduce_composed(imp: Importer, node, e: OnnxOp) -> None:
    """ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum and ReduceLogSumExp as the
    catalog's sum between elementwise ops: ``roles.before`` maps each element first
    (abs, square, exp), ``roles.after`` the sums (sqrt, log). LogSumExp subtracts the
    maximum over the same axes first (``roles.peak``) and adds it back after the log
    (``roles.plus``), so that exp cannot overflow; with keepdims 0 the kept axes are
    then squeezed (``roles.drop``)."""
    imp.check_attrs(node, {"axes", "keepdims", "noop_with_empty_axes"})
    r = e.roles
    axes = _axes(imp, node, e.axes_input_since)
    out = node.output[0]
    x = imp.value(node.input[0])
    if not axes and imp.attr("noop_with_empty_axes", 0):
        # each element is its own reduction: L1 |x|, L2 sqrt(x^2), LogSumExp x, ...
        steps = [] if "peak" in r else [r[k] for k in ("before", "after") if k in r]
        if not steps:
            imp.alias(out, x)
        for k, op in enumerate(steps):
            x = imp.emit(op, [x], out=out if k == len(steps) - 1 else None)
        return
    keep = bool(imp.attr("keepdims", 1))
    over = {"axes": axes or []}
    shape = imp.shape(node.input[0])
    if any(not -len(shape) <= a < len(shape) for a in axes or ()):
        raise imp.invalid(f"its axes {axes} are out of range for a rank-{len(shape)} input")
    empty = any(shape[a] == 0 for a in (axes or range(len(shape))))  # no maximum to take out
    if "peak" in r and not empty:
        peak = imp.emit(r["peak"], [x], {**over, "keepdims": True})
        sums = imp.emit(
            e.op, [imp.emit(r["before"], [imp.emit(r["minus"], [x, peak])])], {**over, "keepdims": True}
        )
        logged = imp.emit(r["plus"], [imp.emit(r["after"], [sums]), peak], out=out if keep else None)
        if not keep:
            rank = len(shape)
            imp.emit(
                r["drop"],
                [logged],
                {"axes": sorted(a % rank for a in axes) if axes else list(range(rank))},
                out=out,
            )
        return
    if "before" in r:
        x = imp.emit(r["before"], [x])
    if "after" in r:
        imp.emit(r["after"], [imp.emit(e.op, [x], {**over, "keepdims": keep})], out=out)
    else:
        imp.emit(e.op, [x], {**over, "keepdims": keep}, out=out)


def _mean_of(imp: Importer, node, e: OnnxOp) -> None:
    """Mean of several inputs, broadcast: their sum, divided by how many there are."""
    imp.check_attrs(node, set())
    names = [imp.value(i) for i in node.input]
    total = names[0]
    for other in names[1:]:
        total = imp.emit(e.op, [total, other])
    count = imp.scalar(float(len(names)), node.input[0])
    imp.emit(e.roles["over"], [total, count], out=node.output[0])


def _trilu(imp: Importer, node, e: OnnxOp) -> None:
    """Trilu: the upper (``upper`` 1) or lower triangle of the last two axes, from the
    diagonal ``k`` (an input: a model input's value specialises the model), zero
    elsewhere: ``op`` (where) between a constant mask and zero."""
    imp.check_attrs(node, {"upper"})
    shape = imp.shape(node.input[0])
    if len(shape) < 2:
        raise imp.invalid(f"its input has rank {len(shape)}, not 2 or more")
    given = imp.const_input(1, "Trilu k")
    if given is not None and np.size(given) != 1:
        raise imp.invalid(f"its k holds {np.size(given)} values, not one")
    k = 0 if given is None else int(np.ravel(given)[0])
    rows, cols = np.indices(shape[-2:])
    mask = cols - rows >= k if int(imp.attr("upper", 1)) else cols - rows <= k
    zero = imp.scalar(0, node.input[0])
    imp.emit(
        e.op,
        [imp.constant(mask, imp.names.fresh("mask")), imp.value(node.input[0]), zero],
        out=node.output[0],
    )


def _folded(imp: Importer, node, e: OnnxOp) -> None:
    """An op that byoc only folds (ConstantOfShape, Range): its inputs are shapes and
    bounds, whose values a build needs. It reaches this handler when one is not a
    constant: a model input's value specialises the model (:class:`NeedsValue`);
    anything else is refused."""
    for k, name in enumerate(node.input):
        if name and name not in imp.consts:
            imp.const_input(k, f"input {k}")


KINDS: dict[str, Handler] = {
    **ATTENTION_KINDS,
    "recurrent": recurrent,
    **INDEXING_KINDS,
    **SIGNAL_KINDS,
    **COMPOSED_KINDS,
    **QUANTIZE_KINDS,
    **QLINEAR_KINDS,
    **GRID_SAMPLE_KINDS,
    "folded": _folded,
    "branch": branch,
    "loop": loop,
    "scan": scan,
    "resize": lambda imp, node, e: resize(imp, node, onnx_ops()["Upsample"] if imp.opset < 11 else e),
    "triangle": _trilu,
    "unary": _unary,
    "normalized": lambda imp, node, e: _normalized(imp, node, e, centred=True),
    "rms_normalized": lambda imp, node, e: _normalized(imp, node, e, centred=False),
    "gaussian_error": _gelu,
    "gated": _gated,
    "celu": _celu,
    "thresholded": _thresholded,
    "reduce_composed": _reduce_composed,
    "mean_of": _mean_of,
    "binary": _binary,
    "pass_through": _pass_through,
    "conv": _conv(transpose=False),
    "conv_transpose": _conv(transpose=True),
    "gemm": _gemm,
    "matmul": _matmul,
    "bounded": _clip,
    "batch_norm": _batch_norm,
    "lrn": _lrn,
    "window_max": _pool(average=False),
    "window_mean": _pool(average=True),
    "softmax": _softmax,
    "reshape": _reshape,
    "flatten": _flatten,
    "transpose": _transpose,
    "squeeze": _squeeze,
    "expand": _expand,
    "pad": _pad,
    "slice": _slice,
    "split": _split,
    "gather": _gather,
    "concat": _concat,
    "reduce": _reduce,
    "select": _where,
    "cast": _cast,
    "bitcast": _bitcast,
    "attributed": _attributed,
    "own_op": lambda imp, node, e: _attributed(imp, node, e, own=True),
    "channel_slope": _prelu,
    "tile": _tile,
    "instance_norm": _instance_norm,
    "shrink": _shrink,
}
"""The handlers that ops.yaml's ``kind`` names."""


EXACT_DEFAULTS = ("attributed", "own_op")
"""The kinds whose ``attrs`` defaults keep their YAML type (a bool, a string, an int):
the catalog attribute's; the other kinds' are floats."""


def onnx_row(name: str, row: Mapping) -> OnnxOp:
    """One row of ops.yaml (the ONNX op ``name``'s), or a user op's ``onnx:`` key
    as one (:meth:`byoc.catalog.OnnxImport.row`): as the importer takes it."""
    attrs = {
        k: (v[0], v[1] if row["kind"] in EXACT_DEFAULTS else float(v[1]))
        for k, v in row.get("attrs", {}).items()
    }
    found = OnnxOp(
        row["kind"],
        row.get("op"),
        row.get("roles", {}),
        attrs,
        row.get("axes_input_since", 1),
        {k: v if isinstance(v, str) else float(v) for k, v in row.get("fixed", {}).items()},
    )
    assert found.kind in KINDS, f"ops.yaml: {name} has an unknown kind {row['kind']!r}"
    return found


@cache
def onnx_ops() -> dict[str, OnnxOp]:
    """ops.yaml, read once: ONNX op type -> its row."""
    from ruamel.yaml import YAML

    table = YAML(typ="safe").load((Path(__file__).parent / "ops.yaml").read_text(encoding="utf-8"))
    return {name: onnx_row(name, row) for name, row in table.items()}


def own_rows(catalog: Catalog) -> dict[tuple[str, str], list[tuple[OnnxImport, OnnxOp]]]:
    """The ONNX ops that ops of ``catalog`` import (their ``onnx:`` keys): (domain, op
    type) -> each op's key and its row, in catalog order."""
    found: dict[tuple[str, str], list[tuple[OnnxImport, OnnxOp]]] = {}
    for name, opdef in catalog.items():
        source = opdef.onnx
        if source is not None:
            row = onnx_row(source.type, source.row(name))
            found.setdefault((source.domain, source.type), []).append((source, row))
    return found


def _domain(domain: str) -> str:
    """ONNX's default domain as the empty string, as it is most often written."""
    return "" if domain == "ai.onnx" else domain
