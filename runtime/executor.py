"""Run a whole graph from its host graph JSON, in the spirit of TVM's graph executor.

Storage is allocated once per ``storage_id`` (entries that share an id share the
bytes; the generator only shares ids between values whose lifetimes do not overlap).
Each ``tvm_op`` node runs the function named by its ``func_name`` in whichever
loaded module provides it: a compiled library, the ExampleJSON or JSON interpreter,
or the host functions. All of them take inputs then outputs (destination passing),
so a run allocates nothing.

    ex = GraphExecutor(graph_json, modules)
    ex.set_input("x", x); ex.run(); y = ex.get_output(0)
    (y,) = ex(x=x, w0=w0, ...)                       # the same, in one call

Threads: an executor owns its storage, so ``ex(**inputs)`` holds a lock for the
whole call; calls from several threads are correct, one at a time. The step-wise
``set_input`` / ``run`` / ``get_output`` sequence is not atomic: a thread that uses it
needs an executor of its own (or its own lock). The modules themselves (compiled
libraries, interpreters) keep no state between calls and may run concurrently.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from byoc.errors import RuntimeFailure
from byoc.ir import DTYPES, TensorType

from .interface import Module, PackedFunction


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """An input or output of a graph: its name, shape and dtype (as ONNX Runtime's
    ``get_inputs()`` gives them). Outputs are named ``output_0``, ``output_1``, ...,
    as ``byoc run --save-outputs`` names them."""

    name: str
    shape: tuple[int, ...]
    dtype: str


class GraphExecutor:
    def __init__(
        self, graph: str | Mapping[str, Any], modules: Sequence[Module], *, name: str = "graph"
    ) -> None:
        self.name = name
        self._lock = threading.Lock()
        data = _load(graph, name)
        try:
            self._setup(data, modules)
        except (KeyError, IndexError, TypeError, ValueError, OverflowError) as exc:
            raise RuntimeFailure(f"{name}: malformed host graph: {type(exc).__name__}: {exc}") from None
        except MemoryError as exc:  # storage sizes come from the graph's shapes
            raise RuntimeFailure(f"{name}: cannot allocate the host graph's storage: {exc}") from None

    def _setup(self, data: Mapping[str, Any], modules: Sequence[Module]) -> None:
        nodes = data["nodes"]
        row = [int(v) for v in data["node_row_ptr"]]
        attrs = data["attrs"]
        shapes = _typed_list(attrs["shape"], "list_shape", self.name)
        dtypes = _typed_list(attrs["dltype"], "list_str", self.name)
        storage_ids = _typed_list(attrs["storage_id"], "list_int", self.name)
        n_entries = row[-1]
        if row[0] != 0 or any(a > b for a, b in zip(row, row[1:])):
            raise RuntimeFailure(f"{self.name}: node_row_ptr must start at 0 and never decrease")
        if len(row) != len(nodes) + 1 or not len(shapes) == len(dtypes) == len(storage_ids) == n_entries:
            raise RuntimeFailure(
                f"{self.name}: node_row_ptr, shape, dltype and storage_id disagree in length"
            )
        types = []
        for k, (shape, dtype) in enumerate(zip(shapes, dtypes)):
            if dtype not in DTYPES or any(int(d) < 0 for d in shape):
                raise RuntimeFailure(f"{self.name}: entry {k} has an invalid type {dtype}{list(shape)}")
            types.append(TensorType(tuple(int(d) for d in shape), dtype))
        self.types = tuple(types)
        # One byte buffer per storage id, as large as its largest entry.
        sizes: dict[int, int] = {}
        for sid, t in zip(storage_ids, types):
            sizes[int(sid)] = max(sizes.get(int(sid), 0), t.nbytes)
        pools = {sid: np.empty(max(size, 1), dtype=np.uint8) for sid, size in sizes.items()}
        self.entries = tuple(
            pools[int(sid)][: t.nbytes].view(t.dtype).reshape(t.shape) for sid, t in zip(storage_ids, types)
        )
        providers: dict[str, Module] = {}
        for module in modules:
            for symbol in module.symbols():
                providers.setdefault(symbol, module)

        def entry(ref: Sequence[int]) -> int:
            nid, index = int(ref[0]), int(ref[1])
            if not 0 <= nid < len(nodes) or not 0 <= index < row[nid + 1] - row[nid]:
                raise RuntimeFailure(f"{self.name}: input [{nid}, {index}] refers to no entry")
            return row[nid] + index

        self.input_names: list[str] = []
        self.input_entries: list[int] = []
        self.steps: list[tuple[PackedFunction, tuple[np.ndarray, ...], str]] = []
        self.step_modules: list[Module] = []
        """The module that provides each step's function."""
        arg_nodes = {int(n) for n in data["arg_nodes"]}
        for nid, node in enumerate(nodes):
            if node["op"] == "null":
                if nid not in arg_nodes:
                    raise RuntimeFailure(f"{self.name}: null node {nid} is not listed in arg_nodes")
                self.input_names.append(str(node["name"]))
                self.input_entries.append(row[nid])
                continue
            if node["op"] != "tvm_op":
                raise RuntimeFailure(f"{self.name}: node {nid} has unknown op {node['op']!r}")
            func_name = str(node["attrs"]["func_name"])
            module = providers.get(func_name)
            if module is None:
                raise RuntimeFailure(
                    f"{self.name}: no loaded module provides function {func_name!r} (node {nid})",
                    hint=f"loaded functions: {', '.join(sorted(providers)) or 'none'}",
                )
            ins = [entry(ref) for ref in node["inputs"]]
            for ref in node["inputs"]:
                if int(ref[0]) >= nid:
                    raise RuntimeFailure(
                        f"{self.name}: node {nid} reads node {int(ref[0])}, which comes later"
                    )
            outs = list(range(row[nid], row[nid + 1]))
            expected = module.signature(func_name)
            got = (tuple(self.types[k] for k in ins), tuple(self.types[k] for k in outs))
            if got != (expected.inputs, expected.outputs):
                raise RuntimeFailure(
                    f"{self.name}: node {nid} calls {func_name} with types {_show(got)}, "
                    f"but the function takes {_show((expected.inputs, expected.outputs))}"
                )
            args = tuple(self.entries[k] for k in ins + outs)
            self.steps.append((module.get_function(func_name), args, func_name))
            self.step_modules.append(module)
        self.output_entries = [entry(ref) for ref in data["heads"]]

    # ------------------------------------------------------------------ API

    @property
    def num_outputs(self) -> int:
        return len(self.output_entries)

    @property
    def inputs(self) -> tuple[TensorInfo, ...]:
        """What a call takes, in order."""
        return tuple(
            TensorInfo(name, t.shape, t.dtype)
            for name, t in zip(self.input_names, (self.types[k] for k in self.input_entries))
        )

    @property
    def outputs(self) -> tuple[TensorInfo, ...]:
        """What a call returns, in order."""
        return tuple(
            TensorInfo(f"output_{k}", self.types[e].shape, self.types[e].dtype)
            for k, e in enumerate(self.output_entries)
        )

    def input_type(self, key: str | int) -> TensorType:
        return self.types[self.input_entries[self._input_index(key)]]

    def set_input(self, key: str | int, value: Any) -> None:
        index = self._input_index(key)
        target = self.entries[self.input_entries[index]]
        array = np.asarray(value)
        if array.shape != target.shape or array.dtype != target.dtype:
            raise RuntimeFailure(
                f"input {self.input_names[index]!r} must be {target.dtype}{list(target.shape)}, "
                f"got {array.dtype}{list(array.shape)}"
            )
        np.copyto(target, array)

    def run(self, timings: list[tuple[int, int]] | None = None) -> None:
        """Run every step. With ``timings`` (profiling), append each step's start and end
        (``time.monotonic_ns``: CLOCK_MONOTONIC, the clock of a profiled library's
        kernel events) to it, in the order of :attr:`steps`."""
        clock = time.monotonic_ns
        for function, args, name in self.steps:
            start = clock() if timings is not None else 0
            try:
                function(*args)
            except RuntimeFailure:
                raise
            except (TypeError, ValueError, RuntimeError) as exc:
                raise self._failed(name, exc) from None
            if timings is not None:
                timings.append((start, clock()))

    def _failed(self, name: str, exc: Exception) -> RuntimeFailure:
        return RuntimeFailure(f"{self.name}: {name} failed: {exc}")

    def get_output(self, index: int) -> np.ndarray:
        if not 0 <= index < len(self.output_entries):
            raise RuntimeFailure(f"{self.name} has {len(self.output_entries)} output(s), not {index + 1}")
        return self.entries[self.output_entries[index]].copy()

    def __call__(self, **inputs: Any) -> tuple[np.ndarray, ...]:
        return self._call(inputs, None)[0]

    def timed_call(
        self, timings: list[tuple[int, int]], /, **inputs: Any
    ) -> tuple[tuple[np.ndarray, ...], tuple[int, int]]:
        """A call that appends each step's start and end to ``timings`` (see :meth:`run`);
        the outputs, and the start and end of the run (the steps, without copying the
        inputs in and the outputs out)."""
        return self._call(inputs, timings)

    def _call(
        self, inputs: Mapping[str, Any], timings: list[tuple[int, int]] | None
    ) -> tuple[tuple[np.ndarray, ...], tuple[int, int]]:
        missing = [n for n in self.input_names if n not in inputs]
        extra = [n for n in inputs if n not in self.input_names]
        if missing or extra:
            parts = [
                f"missing {', '.join(missing)}" if missing else "",
                f"unknown {', '.join(extra)}" if extra else "",
            ]
            raise RuntimeFailure(
                f"{self.name}: {'; '.join(p for p in parts if p)}",
                hint=f"inputs: {', '.join(self.input_names)}",
            )
        with self._lock:  # the storage is shared: one whole call at a time
            for name, value in inputs.items():
                self.set_input(name, value)
            if timings is None:
                self.run()
                span = (0, 0)
            else:
                start = time.monotonic_ns()
                self.run(timings)
                span = (start, time.monotonic_ns())
            return tuple(self.get_output(i) for i in range(len(self.output_entries))), span

    def _input_index(self, key: str | int) -> int:
        if isinstance(key, int):
            if 0 <= key < len(self.input_names):
                return key
        elif key in self.input_names:
            return self.input_names.index(key)
        raise RuntimeFailure(
            f"{self.name} has no input {key!r}", hint=f"inputs: {', '.join(self.input_names)}"
        )


def _load(graph: str | Mapping[str, Any], name: str) -> Mapping[str, Any]:
    if isinstance(graph, Mapping):
        return graph
    try:
        data = json.loads(graph)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: too deep
        raise RuntimeFailure(f"{name}: the host graph is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RuntimeFailure(f"{name}: the host graph must be a JSON object")
    return data


def _typed_list(value: Any, tag: str, name: str) -> list:
    if not (isinstance(value, list) and len(value) == 2 and value[0] == tag and isinstance(value[1], list)):
        raise RuntimeFailure(f"{name}: attrs must hold [{tag!r}, [...]]")
    return value[1]


def _show(types: tuple[tuple[TensorType, ...], tuple[TensorType, ...]]) -> str:
    ins, outs = types
    return f"({', '.join(map(str, ins))}) -> ({', '.join(map(str, outs))})"
