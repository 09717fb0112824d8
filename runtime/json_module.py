"""The JSON runtime module: TVM's ``JSONRuntimeBase``, interpreted with numpy.

It reads the module document the ``json`` codegen writes (``<backend>.json``; the
schema is documented in :mod:`byoc.generator.json_codegen`) and follows the JSON
runtime's semantics:

* each function is looked up by its **symbol**; its arguments are the input nodes,
  in ``arg_nodes`` order, then one output per entry of ``heads``, and their **count
  is checked** (as ``SetInputOutputBuffers`` does);
* its **const names** (``const_names``, the const nodes in ``arg_nodes`` order) are
  **bound once**, by an init step: :meth:`JsonRuntimeModule.init`, or
  ``get_function("__init_<symbol>")``, or else automatically on the first call;
* kernel nodes run the catalog op their kernel name maps to in the backend's spec
  (``relu`` is ``nn.relu``), with op attributes decoded from the node's attrs.

The whole document is validated on load by :mod:`byoc.runtime.json_loader`: a bad
structure, version, node id, forward reference, kernel, attribute or type raises
:class:`~byoc.errors.RuntimeFailure` naming the function and node. Each graph is
precompiled into an interpreter :class:`~byoc.runtime.interpreter.InterpreterPlan` of
(kernel, input entries, output entry) steps, so a call does no lookups.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from byoc.catalog import Catalog
from byoc.errors import Location, RuntimeFailure
from byoc.input_files import NPZ_LIMIT, read_limited
from byoc.npz_files import read_npz

from .bundle import MEMBER_NAME
from .interface import PackedFunction, Signature
from .interpreter import InterpreterPlan, read_module_file
from .json_loader import GraphLoader, check_header
from .spec_tables import spec_table

INIT_PREFIX = "__init_"
"""``get_function(INIT_PREFIX + symbol)`` is the function's init step, as in TVM."""


def const_array(
    name: str, value: Mapping[str, Any], archives: Mapping[str, Mapping[str, np.ndarray]]
) -> np.ndarray:
    """Entry ``name`` of ``const_values`` as a read-only array (already validated): its
    ``data``, or its entry of the ``.npz`` archive it names (a large constant)."""
    if "file" in value:
        array = archives[value["file"]][name]
    else:
        array = np.array(value["data"], dtype=value["dtype"]).reshape(value["shape"])
    array.flags.writeable = False
    return array


def read_archives(
    document: Mapping[str, Any], files: Mapping[str, bytes] | None, directory: Path | None, where: str
) -> dict[str, dict[str, np.ndarray]]:
    """The arrays of every ``.npz`` archive that ``const_values`` names: from ``files``
    (a bundle's members), else from ``directory`` (beside the module's file)."""
    values = document["const_values"]
    names = {v["file"] for v in values.values() if isinstance(v, dict) and isinstance(v.get("file"), str)}
    archives: dict[str, dict[str, np.ndarray]] = {}
    for name in sorted(names):
        if not MEMBER_NAME.match(name):  # a plain file name, never a path
            raise RuntimeFailure(f"{where}: const file {name!r} is not a plain file name")
        data = (files or {}).get(name)
        if data is None and directory is not None and os.path.lexists(directory / name):
            data = read_limited(directory / name, f"{where}: {name}", NPZ_LIMIT, RuntimeFailure)
        if data is not None:
            archives[name] = read_npz(io.BytesIO(data), f"{where}: {name}", RuntimeFailure)
    return archives


class JsonRuntimeModule:
    """Every function of one JSON-runtime module document."""

    kind = "json"

    def __init__(
        self,
        document: Any,
        *,
        file: str | None = None,
        catalog: Catalog | None = None,
        kernels: Mapping[str, str] | None = None,
        spec_path: Any = None,
        text: str | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        """``kernels`` maps kernel names to catalog ops; by default it comes from the
        spec of the document's backend, found on ``spec_path``. ``files`` holds the
        ``.npz`` archives of large constants by name (else they are read from beside
        ``file``)."""
        from byoc.spec import load_catalog

        self.file = file
        self._where = file or "<json module>"
        self.backend = check_header(document, self._where)
        self.catalog = catalog or load_catalog()
        self.kernels = (
            dict(kernels) if kernels is not None else spec_table(self.backend, spec_path, "json", "kernels")
        )
        self.document = document
        self.text = text
        values = document["const_values"]
        directory = Path(file).parent if file is not None else None
        self.archives = read_archives(document, files, directory, self._where)
        self.plans: dict[str, InterpreterPlan] = {}
        self.const_names: dict[str, tuple[str, ...]] = {}
        for symbol, entry in document["functions"].items():
            where = f"{self._where}: function {symbol!r}"
            loader = GraphLoader(where, self.catalog, self.kernels, self.archives)
            self.plans[symbol], self.const_names[symbol] = loader.load(symbol, entry, values)
        self._consts: dict[str, tuple[np.ndarray, ...]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_text(cls, text: str | bytes, *, file: str | None = None, **kwargs: Any) -> JsonRuntimeModule:
        """Load a module document from its JSON text."""
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RuntimeFailure(f"{file or '<json module>'}: not UTF-8 text ({exc.reason})") from None
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            loc = Location(file, exc.lineno, exc.colno)
            raise RuntimeFailure(f"not valid JSON: {exc.msg}", loc, source=text) from None
        except RecursionError:
            raise RuntimeFailure(f"{file or '<json module>'}: not valid JSON: nested too deeply") from None
        return cls(document, file=file, text=text, **kwargs)

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> JsonRuntimeModule:
        return cls.from_text(read_module_file(path), file=str(path), **kwargs)

    def save(self) -> bytes:
        """The module document as UTF-8 JSON; :meth:`from_text` loads it back."""
        return (self.text if self.text is not None else json.dumps(self.document)).encode()

    # ------------------------------------------------------------------ the module API

    def symbols(self) -> tuple[str, ...]:
        return tuple(self.plans)

    def signature(self, symbol: str) -> Signature:
        return self._plan(symbol).signature

    def get_function(self, symbol: str) -> PackedFunction:
        """The function ``symbol``, or its init step ``__init_<symbol>``."""
        if symbol.startswith(INIT_PREFIX) and symbol not in self.plans:
            target = symbol[len(INIT_PREFIX) :]
            self._plan(target)
            return lambda *consts: self.init(target, consts or None)
        plan = self._plan(symbol)

        def run(*args: Any) -> None:
            consts = self._consts.get(symbol)
            if consts is None:
                self.init(symbol)
                consts = self._consts[symbol]
            plan.run(args, consts)

        return run

    def init(self, symbol: str, consts: Sequence[Any] | None = None) -> bool:
        """Bind ``symbol``'s constants, once: from the module's ``const_values``, or
        ``consts`` (arrays in ``const_names`` order). Returns False if already bound."""
        plan = self._plan(symbol)
        with self._lock:
            if symbol in self._consts:
                if consts is not None:
                    raise RuntimeFailure(f"{symbol}: constants are already bound", hint="bind them once")
                return False
            if consts is None:
                values = self.document["const_values"]
                bound = tuple(const_array(n, values[n], self.archives) for n in self.const_names[symbol])
            else:
                bound = plan.check_consts(consts, self.const_names[symbol])
            self._consts[symbol] = bound
            return True

    def initialized(self, symbol: str) -> bool:
        return symbol in self._consts

    def _plan(self, symbol: str) -> InterpreterPlan:
        plan = self.plans.get(symbol)
        if plan is None:
            raise RuntimeFailure(
                f"no function {symbol!r} in JSON module {self._where}",
                hint=f"known: {', '.join(self.plans) or 'none'}",
            )
        return plan
