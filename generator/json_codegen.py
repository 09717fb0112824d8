"""The ``json`` codegen: each external function becomes a graph in the schema of TVM's
JSON runtime (PR 5919, ``JSONSerializer`` / ``JSONRuntimeBase``).

One module file per backend, ``<backend>.json``, holds every function of the backend::

    {
      "format": "byoc-json-runtime",
      "version": 1,
      "backend": "json",
      "functions": {
        "<symbol>": {
          "symbol": "<symbol>",            # what get_symbol returns; the exported name
          "source": "file.graph:8",        # the region this function came from
          "const_names": ["<symbol>_const_0", ...],   # get_const_vars, in arg_nodes order
          "graph": {"nodes": [...], "arg_nodes": [...], "heads": [...], "node_row_ptr": [...]}
        }, ...
      },
      "const_values": {"<symbol>_const_0": {"dtype": "float32", "shape": [2, 3], "data": [...]},
                       "<symbol>_const_1": {"dtype": "float32", "shape": [512, 4096],
                                            "file": "json.consts.npz"}}
    }

``graph`` has exactly the keys of TVM's JSON-runtime graph, in TVM's order:

* ``nodes``: one ``{"op": "input", "name": <param name>}`` per parameter, in order;
  then one ``{"op": "const", "name": "<symbol>_const_<k>"}`` per constant, named as
  TVM names them; then one ``{"op": "kernel", "name": <kernel name from the spec>,
  "inputs": [[nid, index, version], ...]}`` per op, in topological order.
* every node's ``attrs`` (keys sorted) hold ``shape`` and ``dtype`` in TVM's nested
  style, one entry per output: ``"shape": [[[10, 10]]]``, ``"dtype": [["float32"]]``.
  Kernels add ``num_inputs`` and ``num_outputs`` (strings), their op attributes as
  lists of strings (``"axis": [["0"]]``, as TVM's ``OpAttrExtractor`` writes them),
  and ``"source": [["file:line"]]``, the op's provenance (JSON has no comments; it
  has the shape of any other op attribute). Const nodes carry ``source`` too.
* ``arg_nodes`` are the input and const nodes; ``node_row_ptr`` the prefix sums of
  the nodes' output counts; ``heads`` the function outputs as ``[nid, index, 0]``.

Constant *values* are stored once per module in ``const_values``, keyed by const
name (unique within the module since it starts with the symbol): ``shape``,
``dtype`` and the row-major ``data``. A constant of more than
:data:`~byoc.generator.artifacts.LARGE_CONSTANT_ELEMENTS` elements has
``"file": "<backend>.consts.npz"`` instead of ``data``: its values are that
archive's entry of the const's name, a binary artifact beside the module, so the
JSON never holds millions of numbers as text. So does a float constant of any size
holding a NaN or an infinity (a folded causal mask's -inf), which JSON numbers
cannot write. A runtime binds them when it loads
the module, as TVM's ``__init_<symbol>`` does with ``get_const_vars``.

The text is deterministic: keys in a fixed order, nodes one per line, indented by
the spec's ``indent`` option (0: no indentation, still one node per line).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from byoc.catalog import Catalog
from byoc.errors import GraphError, Location
from byoc.ir import CALL_OP, AttrValue, Constant, Function, TensorType, is_float, plain_numbers
from byoc.npz_files import npz_bytes
from byoc.spec.backend import BackendSpec, OptionValue
from byoc.spec.bindings import KernelBinding

from .artifacts import LARGE_CONSTANT_ELEMENTS, Artifact, Role, weights_artifact

FORMAT = "byoc-json-runtime"
VERSION = 1
RESERVED_ATTRS = frozenset({"shape", "dtype", "num_inputs", "num_outputs", "source"})
"""Node attrs keys the graph itself uses; an op attribute may not take them."""


def generate(
    externals: Sequence[Function], spec: BackendSpec, catalog: Catalog, options: Mapping[str, OptionValue]
) -> tuple[Artifact, ...]:
    functions = {}
    const_values: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    archive = f"{spec.name}.consts.npz"
    for fn in externals:
        entry, values = function_graph(fn, spec, archive, arrays)
        functions[entry["symbol"]] = entry
        const_values.update(values)
    document = {
        "format": FORMAT,
        "version": VERSION,
        "backend": spec.name,
        "functions": functions,
        "const_values": const_values,
    }
    indent = int(options.get("indent", 2))
    module = Artifact(f"{spec.name}.json", dumps(document, indent), Role.MODULE, spec.name)
    if not arrays:
        return (module,)
    return (module, weights_artifact(archive, npz_bytes(arrays), spec.name))


def function_graph(
    fn: Function, spec: BackendSpec, archive: str, arrays: dict[str, np.ndarray]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One function's module entry and its constants' values (const name -> value); a
    large constant's value names ``archive`` and its array goes to ``arrays``."""
    if fn.name is None:
        raise GraphError("a JSON-runtime function needs a symbol", fn.loc)
    symbol = fn.name
    nodes: list[Inline] = []
    entries: dict[str, list[int]] = {}
    row_ptr = [0]

    def add(node: dict[str, Any], outputs: Sequence[str], types: Sequence[TensorType]) -> None:
        nid = len(nodes)
        node["attrs"] = dict(sorted({**node.get("attrs", {}), **_type_attrs(types)}.items()))
        nodes.append(Inline(node))
        for index, name in enumerate(outputs):
            entries[name] = [nid, index, 0]
        row_ptr.append(row_ptr[-1] + len(outputs))

    for p in fn.params:
        add({"op": "input", "name": p.name}, (p.name,), (p.type,))
    const_names = []
    const_values = {}
    for k, c in enumerate(fn.constants):
        name = f"{symbol}_const_{k}"
        const_names.append(name)
        value: dict[str, Any] = {"dtype": c.type.dtype, "shape": list(c.type.shape)}
        if c.values.size > LARGE_CONSTANT_ELEMENTS or not _json_numbers(c):
            value["file"] = archive
            arrays[name] = c.array
        else:
            value["data"] = plain_numbers(c.values)
        const_values[name] = Inline(value)
        attrs = {"source": [[_where(c.loc)]]} if c.loc is not None else {}
        add({"op": "const", "name": name, "attrs": attrs}, (c.name,), (c.type,))
    for node in fn.nodes:
        binding = spec.ops.get(node.op)
        if node.op == CALL_OP or not isinstance(binding, KernelBinding):
            raise GraphError(
                f"backend {spec.name} has no kernel for op {node.op!r}",
                node.loc,
                hint=f"{spec.name} maps {', '.join(spec.ops)}",
            )
        attrs: dict[str, Any] = {"num_inputs": str(len(node.inputs)), "num_outputs": str(len(node.outputs))}
        for key, value in node.attrs:
            if key in RESERVED_ATTRS:
                raise GraphError(
                    f"attribute {key!r} of {node.op} collides with a JSON-runtime node key", node.loc
                )
            attrs[key] = [_attr_strings(value)]
        if node.loc is not None:
            attrs["source"] = [[_where(node.loc)]]
        inputs = [entries[name] for name in node.inputs]
        add(
            {"op": "kernel", "name": binding.name, "inputs": inputs, "attrs": attrs},
            node.outputs,
            node.types,
        )

    graph = {
        "nodes": nodes,
        "arg_nodes": list(range(len(fn.params) + len(fn.constants))),
        "heads": [entries[name] for name in fn.outputs],
        "node_row_ptr": row_ptr,
    }
    entry = {"symbol": symbol, "source": _where(fn.loc), "const_names": const_names, "graph": graph}
    return entry, const_values


def _json_numbers(c: Constant) -> bool:
    """Whether JSON numbers can hold the constant's values: not a NaN or an infinity
    (a float constant holding one goes to the ``.npz``, whatever its size)."""
    if not is_float(c.type.dtype):
        return True
    return bool(np.isfinite(c.values.astype(np.float64)).all())


def _type_attrs(types: Sequence[TensorType]) -> dict[str, Any]:
    return {"shape": [[list(t.shape) for t in types]], "dtype": [[t.dtype for t in types]]}


def _attr_strings(value: AttrValue) -> list[str]:
    """An op attribute as TVM's OpAttrExtractor writes it: a list of strings."""
    if isinstance(value, bool):
        return ["1" if value else "0"]
    if isinstance(value, tuple):
        return [str(v) for v in value]
    if isinstance(value, float):
        return [repr(value)]
    return [str(value)]


def _where(loc: Location | None) -> str:
    """``file:line`` of a location, or ``<unknown>``."""
    if loc is None:
        return "<unknown>"
    return f"{loc.file or '<string>'}:{loc.line}"


class Inline(dict):
    """A JSON object that :func:`dumps` writes on one line."""

    __slots__ = ()


def dumps(value: Any, indent: int = 2) -> str:
    """Deterministic JSON text: objects and arrays that hold objects are spread one
    member per line (indented by ``indent`` per level); everything else, and every
    :class:`Inline` object, is written on one line. Ends with a newline."""
    return _dump(value, indent, 0) + "\n"


def _dump(value: Any, indent: int, depth: int) -> str:
    if isinstance(value, Inline) or not _has_object(value):
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))
    pad = " " * (indent * (depth + 1))
    end = " " * (indent * depth)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [
            f"{pad}{json.dumps(str(k), ensure_ascii=False)}: {_dump(v, indent, depth + 1)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + end + "}"
    items = [pad + _dump(v, indent, depth + 1) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + end + "]"


def _has_object(value: Any) -> bool:
    if isinstance(value, dict):
        return True
    if isinstance(value, list):
        return any(_has_object(v) for v in value)
    return False
