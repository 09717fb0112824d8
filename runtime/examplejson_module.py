"""The ExampleJSON runtime module: the BYOC guide's ``ExampleJsonModule``, in numpy.

The guide's C++ module parses ExampleJSON text, looks functions up by subgraph name
(``GetFunction``), runs each node with a hand-written kernel (``Run``: add, sub and
mul of 10x10 float32 only, in a chain) and writes the text back as its serialised
form (``SaveToBinary`` / ``LoadFromBinary``). This one has none of those limits:

* it is created from a file or a string (:meth:`ExampleJsonModule.from_file`,
  :meth:`~ExampleJsonModule.from_text`), parsed by byoc's ExampleJSON grammar with
  the op tokens of the examplejson backend spec (or a token table you give);
* ``get_function("<subgraph name>")`` returns a destination-passing function
  ``f(*inputs, output)`` with checked arguments;
* each subgraph, of any shape and any DAG, is precompiled into an interpreter
  :class:`~byoc.runtime.interpreter.InterpreterPlan` whose steps are the op catalog's numpy
  kernels, so results equal :func:`byoc.reference.evaluate` exactly;
* :meth:`~ExampleJsonModule.save` / :meth:`~ExampleJsonModule.load` serialise it.

The serialised form (``SaveToBinary``) is a fixed header then a UTF-8 JSON payload::

    magic    8 bytes   b"BYOCEJSN"
    version  u32 LE    1
    length   u64 LE    payload size in bytes
    sha256   32 bytes  of the payload
    payload            {"text": <ExampleJSON text>, "tokens": {token: catalog op},
                        "file": <source file name or null>}

so a truncated, corrupt or foreign blob, or another version, is a clear
:class:`~byoc.errors.RuntimeFailure`, never a misread module.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from byoc.catalog import Catalog, evaluate_outputs
from byoc.errors import ByocError, RuntimeFailure
from byoc.grammar.examplejson_parser import parse_examplejson
from byoc.grammar.lark_support import decode
from byoc.ir import CALL_OP, Function

from .interface import PackedFunction, Signature
from .interpreter import InterpreterPlan, InterpreterStep, read_module_file
from .spec_tables import spec_table

MAGIC = b"BYOCEJSN"
VERSION = 1
HEADER = struct.Struct("<8sIQ32s")
"""magic, version, payload length, payload sha256."""
BACKEND = "examplejson"
"""The backend spec whose op tokens are used when none are given."""


class ExampleJsonModule:
    """Every subgraph of one ExampleJSON text, runnable by subgraph name."""

    kind = "examplejson"

    def __init__(
        self, text: str, tokens: Mapping[str, str], *, catalog: Catalog | None = None, file: str | None = None
    ) -> None:
        """Parse ``text`` with the op ``tokens`` (token -> catalog op). A malformed
        text raises the parser's ParseError or GraphError, with its line:column."""
        from byoc.spec import load_catalog

        self.text = text
        self.tokens = dict(tokens)
        self.file = file
        self.catalog = catalog or load_catalog()
        program = parse_examplejson(text, self.catalog, file=file, tokens=self.tokens)
        self.plans: dict[str, InterpreterPlan] = {}
        self._consts: dict[str, tuple[np.ndarray, ...]] = {}
        for fn in program.functions:
            assert fn.name is not None
            self.plans[fn.name], self._consts[fn.name] = function_plan(fn, self.catalog)

    @classmethod
    def from_text(
        cls,
        text: str | bytes,
        *,
        tokens: Mapping[str, str] | None = None,
        spec_path: Any = None,
        backend: str = BACKEND,
        catalog: Catalog | None = None,
        file: str | None = None,
    ) -> ExampleJsonModule:
        """The module of ExampleJSON ``text``. Op tokens are ``tokens`` if given, else
        those of the examplejson-kind backend spec ``backend`` on ``spec_path``."""
        if tokens is None:
            tokens = spec_table(backend, spec_path, "examplejson", "tokens")
        return cls(decode(text, file), tokens, catalog=catalog, file=file)

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> ExampleJsonModule:
        """The module of an ``.examplejson`` file; keyword arguments as for :meth:`from_text`."""
        return cls.from_text(read_module_file(path), file=str(path), **kwargs)

    # ------------------------------------------------------------------ the module API

    def symbols(self) -> tuple[str, ...]:
        return tuple(self.plans)

    def signature(self, symbol: str) -> Signature:
        return self._plan(symbol).signature

    def get_function(self, symbol: str) -> PackedFunction:
        plan = self._plan(symbol)
        consts = self._consts[symbol]
        return lambda *args: plan.run(args, consts)

    def _plan(self, symbol: str) -> InterpreterPlan:
        plan = self.plans.get(symbol)
        if plan is None:
            raise RuntimeFailure(
                f"unknown subgraph {symbol!r}",
                hint=f"this ExampleJSON module has: {', '.join(self.plans) or 'none'}",
            )
        return plan

    # ------------------------------------------------------------------ serialisation

    def save(self) -> bytes:
        """The module as bytes (the guide's ``SaveToBinary``); :meth:`load` reads them."""
        payload = json.dumps(
            {"text": self.text, "tokens": self.tokens, "file": self.file}, ensure_ascii=False, sort_keys=True
        ).encode("utf-8")
        return HEADER.pack(MAGIC, VERSION, len(payload), hashlib.sha256(payload).digest()) + payload

    @classmethod
    def load(cls, data: bytes, *, catalog: Catalog | None = None) -> ExampleJsonModule:
        """A module from :meth:`save`'s bytes (the guide's ``LoadFromBinary``)."""
        payload = _payload(data)
        try:
            fields = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise RuntimeFailure("corrupt ExampleJSON module: its payload is not JSON") from None
        fields = fields if isinstance(fields, dict) else {}
        text, tokens, file = fields.get("text"), fields.get("tokens"), fields.get("file")
        if not (
            isinstance(text, str)
            and isinstance(tokens, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in tokens.items())
            and (file is None or isinstance(file, str))
        ):
            raise RuntimeFailure("corrupt ExampleJSON module: the payload needs text, tokens and file")
        try:
            return cls(text, tokens, catalog=catalog, file=file)
        except ByocError as exc:
            raise RuntimeFailure(f"the saved ExampleJSON module does not parse: {exc}") from None


def _payload(data: Any) -> bytes:
    """The checked payload of a serialised module."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise RuntimeFailure(f"an ExampleJSON module is loaded from bytes, not {type(data).__name__}")
    data = bytes(data)
    if len(data) < HEADER.size:
        raise RuntimeFailure(
            f"truncated ExampleJSON module: {len(data)} bytes, the header alone is {HEADER.size}"
        )
    magic, version, length, digest = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise RuntimeFailure("not a serialised ExampleJSON module (bad magic bytes)")
    if version != VERSION:
        raise RuntimeFailure(
            f"ExampleJSON module format version {version} is not supported",
            hint=f"this byoc reads version {VERSION}; save the module again",
        )
    payload = data[HEADER.size :]
    if len(payload) != length:
        state = "truncated" if len(payload) < length else "corrupt"
        raise RuntimeFailure(
            f"{state} ExampleJSON module: payload is {len(payload)} bytes, header says {length}"
        )
    if hashlib.sha256(payload).digest() != digest:
        raise RuntimeFailure("corrupt ExampleJSON module: the payload does not match its sha256")
    return payload


def function_plan(fn: Function, catalog: Catalog) -> tuple[InterpreterPlan, tuple[np.ndarray, ...]]:
    """An IR function of catalog ops, compiled into an interpreter plan (one entry per
    name: parameters, constants, nodes), and its constants' arrays."""
    slots: dict[str, int] = {}
    for name in [p.name for p in fn.params] + [c.name for c in fn.constants]:
        slots[name] = len(slots)
    steps = []
    for node in fn.nodes:
        if node.op == CALL_OP or len(node.outputs) != 1:
            raise RuntimeFailure(f"{fn.name}: node {node.name} is not a catalog op")
        kernel = partial(evaluate_outputs, catalog[node.op], attrs=node.attrs, types=node.types)
        inputs = tuple(slots[name] for name in node.inputs)
        slots[node.name] = len(slots)
        steps.append(InterpreterStep(kernel, inputs, (slots[node.name],)))
    consts = tuple(c.array for c in fn.constants)
    for array in consts:
        array.flags.writeable = False
    plan = InterpreterPlan(
        symbol=fn.name or "<anonymous>",
        input_names=tuple(p.name for p in fn.params),
        signature=Signature(tuple(p.type for p in fn.params), fn.output_types),
        n_entries=len(slots),
        input_slots=tuple(range(len(fn.params))),
        const_slots=tuple(slots[c.name] for c in fn.constants),
        const_types=tuple(c.type for c in fn.constants),
        steps=tuple(steps),
        output_slots=tuple(slots[name] for name in fn.outputs),
    )
    return plan, consts
