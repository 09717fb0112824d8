"""Validate a JSON-runtime module document and compile its graphs into interpreter
plans, for :mod:`byoc.runtime.json_module`.

Everything is checked before anything runs: the header (format, version, keys);
for each function its symbol, ``const_names``, every node (op, name, the
``shape``/``dtype`` attrs), every ``[nid, index, version]`` reference (it must name
an output of an *earlier* node), each kernel (a known kernel name, decodable op
attributes, an input count and output type the op catalog agrees with),
``node_row_ptr``, ``arg_nodes``, ``heads`` and the constants' values. A failure is
a :class:`~byoc.errors.RuntimeFailure` naming the file, the function and the node.

The plan's entries are TVM's entry ids, ``node_row_ptr[nid] + index``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from math import prod
from typing import Any

import numpy as np

from byoc.catalog import Catalog, RuleError, evaluate_outputs, infer_types, normalize_attrs
from byoc.errors import RuntimeFailure
from byoc.ir import DTYPES, TensorType, is_integer

from .interface import Signature
from .interpreter import InterpreterPlan, InterpreterStep

FORMAT = "byoc-json-runtime"
VERSION = 1


def check_header(document: Any, where: str) -> str:
    """The document's backend name, after checking its format, version and top-level keys."""
    if not isinstance(document, dict):
        raise RuntimeFailure(f"{where}: a JSON module is an object, got {type(document).__name__}")
    if document.get("format") != FORMAT:
        raise RuntimeFailure(f"{where}: not a JSON-runtime module (format is not {FORMAT!r})")
    version = document.get("version")
    if version != VERSION or isinstance(version, bool):
        raise RuntimeFailure(
            f"{where}: JSON module version {version!r} is not supported",
            hint=f"this byoc reads version {VERSION}; regenerate it with `byoc gen`",
        )
    for key, kind in (("backend", str), ("functions", dict), ("const_values", dict)):
        if not isinstance(document.get(key), kind):
            raise RuntimeFailure(f"{where}: key {key!r} is missing or not a {kind.__name__}")
    return document["backend"]


class GraphLoader:
    """Validates one function entry and compiles its graph into an InterpreterPlan."""

    def __init__(
        self,
        where: str,
        catalog: Catalog,
        kernels: Mapping[str, str],
        archives: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    ) -> None:
        """``archives`` holds the arrays of the ``.npz`` files that large constants name."""
        self.where = where
        self.catalog = catalog
        self.kernels = kernels
        self.archives = archives or {}

    def fail(self, message: str, nid: int | None = None) -> RuntimeFailure:
        at = f", node {nid}" if nid is not None else ""
        return RuntimeFailure(f"{self.where}{at}: {message}")

    def get(self, obj: Any, key: str, kind: type, nid: int | None = None) -> Any:
        value = obj.get(key) if isinstance(obj, dict) else None
        if not isinstance(value, kind):
            raise self.fail(f"key {key!r} is missing or not a {kind.__name__}", nid)
        return value

    def load(
        self, symbol: str, entry: Any, values: Mapping[str, Any]
    ) -> tuple[InterpreterPlan, tuple[str, ...]]:
        if self.get(entry, "symbol", str) != symbol:
            raise self.fail(f"its symbol is {entry['symbol']!r}, not its key")
        names = self.get(entry, "const_names", list)
        graph = self.get(entry, "graph", dict)
        nodes = self.get(graph, "nodes", list)
        types: list[tuple[TensorType, ...]] = []
        row_ptr = [0]
        steps: list[InterpreterStep] = []
        for nid, node in enumerate(nodes):
            op = self.get(node, "op", str, nid)
            self.get(node, "name", str, nid)
            types.append(self.node_types(node, nid))
            if len(types[nid]) != 1 and op != "kernel":
                raise self.fail(f"a {op} node has one output, this one declares {len(types[nid])}", nid)
            if op == "kernel":
                steps.append(self.kernel(node, nid, types, row_ptr))
            elif op not in ("input", "const"):
                raise self.fail(f"unknown node op {op!r} (input, const or kernel)", nid)
            row_ptr.append(row_ptr[-1] + len(types[nid]))
        if graph.get("node_row_ptr") != row_ptr:
            raise self.fail(f"node_row_ptr must be {row_ptr}, the prefix sums of the output counts")
        args = self.get(graph, "arg_nodes", list)
        wanted = [nid for nid, node in enumerate(nodes) if node["op"] != "kernel"]
        if sorted(a for a in args if _is_int(a)) != wanted or len(args) != len(wanted):
            raise self.fail(f"arg_nodes must list the input and const nodes {wanted}, got {args}")
        inputs = [a for a in args if nodes[a]["op"] == "input"]
        consts = [a for a in args if nodes[a]["op"] == "const"]
        if [nodes[a]["name"] for a in consts] != names:
            raise self.fail(f"const_names {names} differ from the const nodes in arg_nodes order")
        for nid in consts:
            self.check_value(nodes[nid]["name"], values, types[nid][0], nid)
        heads = [self.entry(h, f"head {k}", types) for k, h in enumerate(self.get(graph, "heads", list))]
        plan = InterpreterPlan(
            symbol=symbol,
            input_names=tuple(nodes[a]["name"] for a in inputs),
            signature=Signature(tuple(types[a][0] for a in inputs), tuple(types[n][i] for n, i in heads)),
            n_entries=row_ptr[-1],
            input_slots=tuple(row_ptr[a] for a in inputs),
            const_slots=tuple(row_ptr[a] for a in consts),
            const_types=tuple(types[a][0] for a in consts),
            steps=tuple(steps),
            output_slots=tuple(row_ptr[n] + i for n, i in heads),
        )
        return plan, tuple(names)

    def node_types(self, node: dict, nid: int) -> tuple[TensorType, ...]:
        attrs = self.get(node, "attrs", dict, nid)
        shapes, dtypes = attrs.get("shape"), attrs.get("dtype")
        ok = _nested(shapes, list) and _nested(dtypes, list) and len(shapes[0]) == len(dtypes[0]) > 0
        if not ok or not all(
            isinstance(s, list) and all(_is_int(d) and d >= 0 for d in s) for s in shapes[0]
        ):
            raise self.fail('attrs need "shape": [[[dims...], ...]] and "dtype": [[dtype, ...]]', nid)
        for d in dtypes[0]:
            if d not in DTYPES:
                raise self.fail(f"unknown dtype {d!r}", nid)
        return tuple(TensorType(tuple(s), d) for s, d in zip(shapes[0], dtypes[0]))

    def entry(self, ref: Any, what: str, types: Sequence[tuple], nid: int | None = None) -> tuple[int, int]:
        """A ``[nid, index, version]`` reference, by node ``nid`` (None: a head), to
        an output of a node defined before it."""
        limit = len(types) if nid is None else nid
        if not (isinstance(ref, list) and len(ref) == 3 and all(_is_int(x) for x in ref)):
            raise self.fail(f"{what} must be [nid, index, version], got {ref!r}", nid)
        src, index, _ = ref
        if not 0 <= src < limit:
            before = "in the graph" if nid is None else "before it"
            raise self.fail(f"{what} refers to node {src}, which is not defined {before}", nid)
        if not 0 <= index < len(types[src]):
            raise self.fail(
                f"{what} refers to output {index} of node {src}, which has {len(types[src])}", nid
            )
        return src, index

    def kernel(self, node: dict, nid: int, types: list, row_ptr: list[int]) -> InterpreterStep:
        name = node["name"]
        op_name = self.kernels.get(name)
        if op_name is None or op_name not in self.catalog:
            raise self.fail(f"unknown kernel {name!r}", nid)
        op = self.catalog[op_name]
        refs = [
            self.entry(r, f"input {k}", types, nid) for k, r in enumerate(self.get(node, "inputs", list, nid))
        ]
        attrs = node["attrs"]
        declared = types[nid]
        for key, want in (("num_inputs", len(refs)), ("num_outputs", len(declared))):
            if key in attrs and attrs[key] != str(want):
                raise self.fail(f"{key} is {attrs[key]!r}, but the node has {want}", nid)
        try:
            given = [(a.name, _attr_value(a.type, attrs[a.name])) for a in op.attrs if a.name in attrs]
            op_attrs = normalize_attrs(op, given)
            out = infer_types(op, [types[n][i] for n, i in refs], op_attrs, len(declared))
        except (RuleError, ValueError, TypeError) as exc:
            raise self.fail(f"kernel {name}: {getattr(exc, 'message', exc)}", nid) from None
        if out != declared:
            shown = ", ".join(map(str, out))
            raise self.fail(
                f"kernel {name} computes {shown}, the node declares {', '.join(map(str, declared))}", nid
            )
        fn = partial(evaluate_outputs, op, attrs=op_attrs, types=out)
        slots = tuple(range(row_ptr[nid], row_ptr[nid] + len(out)))
        return InterpreterStep(fn, tuple(row_ptr[n] + i for n, i in refs), slots)

    def check_value(self, name: str, values: Mapping[str, Any], t: TensorType, nid: int) -> None:
        value = values.get(name)
        if not isinstance(value, dict):
            raise self.fail(f"const {name!r} has no entry in const_values", nid)
        if value.get("dtype") != t.dtype or value.get("shape") != list(t.shape):
            raise self.fail(f"const_values[{name!r}] is not of the node's type {t}", nid)
        if "file" in value:
            self.check_stored(name, value, t, nid)
            return
        data = value.get("data")
        if not isinstance(data, list) or len(data) != prod(t.shape):
            raise self.fail(f"const_values[{name!r}] needs {prod(t.shape)} data values", nid)
        if t.dtype == "bool":
            ok = all(isinstance(x, bool) for x in data)
        elif is_integer(t.dtype):
            low, high = np.iinfo(t.dtype).min, np.iinfo(t.dtype).max
            ok = all(_is_int(x) and low <= x <= high for x in data)
        else:  # a number that rounds to a finite value of the dtype (65520 is no float16)
            ok = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in data)
            ok = ok and _finite_in(data, t.dtype)
        if not ok:
            kind = "bool value (true or false)" if t.dtype == "bool" else f"{t.dtype} number"
            raise self.fail(f"const_values[{name!r}] holds a value that is not a {kind}", nid)

    def check_stored(self, name: str, value: Mapping[str, Any], t: TensorType, nid: int) -> None:
        """A large constant: entry ``name`` of the archive ``value["file"]``, of type ``t``."""
        archive = self.archives.get(value["file"]) if isinstance(value["file"], str) else None
        if archive is None or "data" in value:
            raise self.fail(
                f"const_values[{name!r}] names the file {value['file']!r}, which is not beside the module",
                nid,
            )
        array = archive.get(name)
        if array is None or array.dtype != np.dtype(t.dtype) or array.shape != t.shape:
            got = "no such entry" if array is None else f"{array.dtype}{list(array.shape)}"
            raise self.fail(f"{value['file']}[{name!r}] is not of the node's type {t} ({got})", nid)


def _finite_in(data: list, dtype: str) -> bool:
    """Whether every number of ``data`` (finite in JSON) is finite in the float ``dtype``."""
    with np.errstate(over="ignore"):
        try:
            rounded = np.array(data, dtype=np.float64).astype(dtype)
        except OverflowError:  # an integer beyond every double
            return False
    return bool(np.isfinite(rounded.astype(np.float64)).all())


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _nested(value: Any, kind: type) -> bool:
    """``[[...]]``: a one-element list holding a ``kind``."""
    return isinstance(value, list) and len(value) == 1 and isinstance(value[0], kind)


def _attr_value(kind: str, value: Any) -> Any:
    """An op attribute from its JSON form ``[["0"]]`` (strings, as TVM writes them)."""
    if not _nested(value, list) or not all(isinstance(s, str) for s in value[0]):
        raise ValueError(f"an attribute must be [[strings]], got {value!r}")
    strings = value[0]
    if kind == "ints":
        return tuple(int(s) for s in strings)
    if len(strings) != 1:
        raise ValueError(f"a {kind} attribute needs one value, got {strings}")
    text = strings[0]
    if kind == "bool":
        return {"1": True, "0": False, "true": True, "false": False}[text]
    return {"int": int, "float": float, "str": str}[kind](text)
