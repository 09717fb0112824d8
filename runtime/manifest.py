"""The manifest of a built model: its graphs, its modules and its member files.

A build (:func:`byoc.build`) makes a :class:`Manifest`; a ``.byoc`` bundle stores it
as ``manifest.json`` (:meth:`Manifest.to_json`, sorted keys, two-space indent) and
loading reads it back with :meth:`Manifest.from_json`, which refuses a key given twice
in one object (a member listed twice), checks every field and raises :class:`~byoc.errors.RuntimeFailure` for anything missing or mistyped, so the
rest of the runtime works with typed entries only. The JSON, version 1::

    {"format": "byoc-bundle", "version": 1, "byoc": "<byoc version>",
     "source": "source.graph",
     "graphs": [{"name": "main", "host_graph": "main.graph.json",
                 "host_functions": "main.host.graph" or null}],
     "modules": [{"backend": "ccompiler", "kind": "library", "file": "libccompiler.so",
                  "sources": ["ccompiler.c"],
                  "functions": {"<symbol>": {"inputs": [["float32", [3, 4]]], "outputs": [...]}}},
                 {"backend": "json", "kind": "json", "file": "json.json", "kernels": {...}},
                 {"backend": "examplejson", "kind": "examplejson", "file": "...", "tokens": {...}}],
     "members": {"<name>": {"sha256": "<hex>", "size": <bytes>}},
     "catalogs": ["user_ops_1.yaml", ...]}

``"catalogs"`` (present only when the build used user op catalogs) names the members
holding them, in search order: the model's op catalog is the shipped one extended by
them, so a bundle with a user's ops runs where their spec directory is absent.

A library module built by a backend whose spec ``requires:`` libraries has a
``"requires"`` object: each requirement as the spec wrote it (name -> headers,
libraries, install, from), validated by the spec loader when the manifest is read,
so that loading locates the libraries again on the machine that runs the bundle.

A module's ``"kind"`` key holds its :class:`ModuleFormat` (how the runtime loads
it), not the backend's codegen kind; the key keeps its name so that version-1
bundles stay readable.

This module never imports ``byoc.generator``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

from byoc.errors import RuntimeFailure
from byoc.ir import DTYPES, TensorType

from .interface import Signature

if TYPE_CHECKING:
    from byoc.spec.requirements import Requirement

FORMAT = "byoc-bundle"
VERSION = 1
MANIFEST = "manifest.json"


class ModuleFormat(Enum):
    """How the runtime loads a module (the manifest's module ``"kind"``)."""

    LIBRARY = "library"
    """A compiled shared library, called through tvm_ffi."""
    JSON = "json"
    """JSON text that the JSON interpreter runs."""
    EXAMPLEJSON = "examplejson"
    """ExampleJSON text that the ExampleJSON interpreter runs."""


@dataclass(frozen=True)
class Member:
    """The size and sha256 of one member file, as the manifest records them."""

    sha256: str
    size: int

    @classmethod
    def of(cls, data: bytes) -> Member:
        return cls(hashlib.sha256(data).hexdigest(), len(data))


@dataclass(frozen=True)
class GraphEntry:
    """One graph: its host graph (graph-executor JSON) and host functions, by member name."""

    name: str
    host_graph: str
    host_functions: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "host_graph": self.host_graph, "host_functions": self.host_functions}

    @classmethod
    def from_json(cls, fields: _Fields) -> GraphEntry:
        return cls(
            fields.text("name"), fields.text("host_graph"), fields.text("host_functions", optional=True)
        )


@dataclass(frozen=True)
class LibraryEntry:
    """A backend compiled into the shared library ``file``; ``functions`` gives every
    exported symbol with its signature, ``sources`` the members holding the generated
    code it was built from (for the reader: running needs only the library)."""

    module_format: ClassVar[ModuleFormat] = ModuleFormat.LIBRARY
    backend: str
    file: str
    functions: Mapping[str, Signature]
    sources: tuple[str, ...] = ()
    requires: tuple[Requirement, ...] = ()
    """The libraries the library links against (its backend spec's ``requires:``)."""

    def to_json(self) -> dict[str, Any]:
        functions = {sym: _signature_to_json(sig) for sym, sig in self.functions.items()}
        out = {**_common(self), "sources": list(self.sources), "functions": functions}
        if self.requires:
            out["requires"] = {r.name: r.record() for r in self.requires}
        return out

    @classmethod
    def from_json(cls, fields: _Fields) -> LibraryEntry:
        functions = fields.object("functions")
        signatures = {
            sym: _signature(fields.nested(sig, f"function {sym!r}")) for sym, sig in functions.items()
        }
        sources = fields.texts("sources") if "sources" in fields.data else ()
        requires = _requirements(fields) if "requires" in fields.data else ()
        return cls(fields.text("backend"), fields.text("file"), signatures, sources, requires)


@dataclass(frozen=True)
class InterpretedEntry:
    """A backend's interpreted module ``file``; ``op_names`` maps the names its text uses
    for ops (kernel names, op tokens) to catalog ops, stored under :attr:`names_key`."""

    module_format: ClassVar[ModuleFormat]
    names_key: ClassVar[str]
    backend: str
    file: str
    op_names: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {**_common(self), self.names_key: dict(self.op_names)}

    @classmethod
    def from_json(cls, fields: _Fields) -> InterpretedEntry:
        return cls(fields.text("backend"), fields.text("file"), fields.text_map(cls.names_key))


@dataclass(frozen=True)
class JsonEntry(InterpretedEntry):
    """A JSON module; its kernel names map to catalog ops."""

    module_format: ClassVar[ModuleFormat] = ModuleFormat.JSON
    names_key: ClassVar[str] = "kernels"


@dataclass(frozen=True)
class ExampleJsonEntry(InterpretedEntry):
    """An ExampleJSON module; its op tokens map to catalog ops."""

    module_format: ClassVar[ModuleFormat] = ModuleFormat.EXAMPLEJSON
    names_key: ClassVar[str] = "tokens"


ModuleEntry = LibraryEntry | JsonEntry | ExampleJsonEntry
"""One module of a manifest; its type says its :class:`ModuleFormat`."""

ENTRY_TYPES: dict[str, type[ModuleEntry]] = {
    t.module_format.value: t for t in (LibraryEntry, JsonEntry, ExampleJsonEntry)
}
"""The entry type of each module format, by its name in the JSON."""


def _common(entry: ModuleEntry) -> dict[str, Any]:
    """The keys every module has; ``kind`` is the module format (see the module doc)."""
    return {"backend": entry.backend, "kind": entry.module_format.value, "file": entry.file}


@dataclass(frozen=True)
class Manifest:
    """What a built model holds; ``members`` is filled in when it is written
    (:meth:`with_members`) or read back from a bundle."""

    byoc: str
    """The byoc version that built it."""
    source: str
    """The member holding the program as parsed, in DSL form."""
    graphs: tuple[GraphEntry, ...]
    modules: tuple[ModuleEntry, ...]
    members: Mapping[str, Member] = field(default_factory=dict)
    catalogs: tuple[str, ...] = ()
    """The members holding the user op catalogs of the build, in search order."""

    def with_members(self, members: Mapping[str, bytes]) -> Manifest:
        """This manifest recording the size and digest of every one of ``members``."""
        return replace(self, members={name: Member.of(data) for name, data in sorted(members.items())})

    def to_json(self) -> str:
        data = {
            "format": FORMAT,
            "version": VERSION,
            "byoc": self.byoc,
            "source": self.source,
            "graphs": [g.to_json() for g in self.graphs],
            "modules": [m.to_json() for m in self.modules],
            "members": {name: {"sha256": m.sha256, "size": m.size} for name, m in self.members.items()},
        }
        if self.catalogs:
            data["catalogs"] = list(self.catalogs)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, data: bytes | str, where: str) -> Manifest:
        """The manifest in ``data`` (from the bundle ``where``), every field checked."""
        try:
            raw = json.loads(data, object_pairs_hook=_unique_keys)
        except _DuplicateKey as exc:
            raise RuntimeFailure(
                f"{where}: {MANIFEST} names {exc.key!r} twice in one object",
                hint="a manifest lists each member, graph and field once; rebuild the bundle",
            ) from None
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: too deep
            raise RuntimeFailure(f"{where}: {MANIFEST} is not valid JSON ({exc})") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            found = raw.get("format") if isinstance(raw, dict) else None
            raise RuntimeFailure(f"{where} is not a byoc bundle (format {found!r})")
        if raw.get("version") != VERSION or isinstance(raw.get("version"), bool):
            raise RuntimeFailure(
                f"{where} has bundle version {raw.get('version')!r}; this byoc reads version {VERSION}",
                hint="rebuild the bundle with this byoc",
            )
        for key, kind in (("members", dict), ("graphs", list), ("modules", list)):
            if not isinstance(raw.get(key), kind):
                raise RuntimeFailure(f"{where}: {MANIFEST} lacks a valid {key!r}")
        top = _Fields(raw, MANIFEST, where)
        return cls(
            byoc=top.text("byoc"),
            source=top.text("source"),
            graphs=tuple(
                GraphEntry.from_json(top.nested(g, f"graphs[{k}]")) for k, g in enumerate(raw["graphs"])
            ),
            modules=tuple(_module(top.nested(m, f"modules[{k}]")) for k, m in enumerate(raw["modules"])),
            members={name: _member(top.nested(r, f"member {name!r}")) for name, r in raw["members"].items()},
            catalogs=top.texts("catalogs") if "catalogs" in raw else (),
        )


# ---------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class _Fields:
    """One JSON object of the manifest, read field by field; ``what`` names it in errors."""

    data: Mapping[str, Any]
    what: str
    where: str

    def incomplete(self, detail: str) -> RuntimeFailure:
        return RuntimeFailure(
            f"{self.where}: the manifest is incomplete: {detail}",
            hint="the bundle was edited or damaged; rebuild it with `byoc build`",
        )

    def nested(self, value: Any, what: str) -> _Fields:
        if not isinstance(value, dict):
            raise self.incomplete(f"{what} is not an object")
        return _Fields(value, what, self.where)

    def get(self, key: str, kind: type, noun: str, *, optional: bool = False) -> Any:
        value = self.data.get(key)
        if value is None:
            if optional:
                return None
            raise self.incomplete(f"{self.what} has no {key!r}")
        if not isinstance(value, kind) or isinstance(value, bool):
            raise self.incomplete(f"{self.what}: {key!r} is not {noun}")
        return value

    def text(self, key: str, *, optional: bool = False) -> Any:
        return self.get(key, str, "a string", optional=optional)

    def integer(self, key: str) -> int:
        return self.get(key, int, "an integer")

    def object(self, key: str) -> dict[str, Any]:
        return self.get(key, dict, "an object")

    def texts(self, key: str) -> tuple[str, ...]:
        items = self.get(key, list, "a list of strings")
        if not all(isinstance(item, str) for item in items):
            raise self.incomplete(f"{self.what}: {key!r} is not a list of strings")
        return tuple(items)

    def text_map(self, key: str) -> dict[str, str]:
        items = self.object(key)
        if not all(isinstance(value, str) for value in items.values()):
            raise self.incomplete(f"{self.what}: {key!r} does not map names to strings")
        return dict(items)


def _module(fields: _Fields) -> ModuleEntry:
    name = fields.text("kind")
    entry_type = ENTRY_TYPES.get(name)
    if entry_type is None:
        raise RuntimeFailure(f"{fields.where}: unknown module kind {name!r} in the manifest")
    return entry_type.from_json(fields)


def _requirements(fields: _Fields) -> tuple[Requirement, ...]:
    from byoc.errors import SpecError
    from byoc.spec.requirements import requirements_from_record

    try:
        return requirements_from_record(fields.object("requires"), f"{fields.where}: {fields.what}: requires")
    except SpecError as exc:
        raise fields.incomplete(exc.message) from None


def _member(fields: _Fields) -> Member:
    size = fields.integer("size")
    if size < 0:
        raise fields.incomplete(f"{fields.what}: 'size' is negative")
    return Member(fields.text("sha256"), size)


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's dict, refusing a key given twice (``json`` keeps the last)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _signature_to_json(sig: Signature) -> dict[str, list]:
    return {
        "inputs": [[t.dtype, list(t.shape)] for t in sig.inputs],
        "outputs": [[t.dtype, list(t.shape)] for t in sig.outputs],
    }


def _signature(fields: _Fields) -> Signature:
    def types(key: str) -> tuple[TensorType, ...]:
        out = []
        for item in fields.get(key, list, "a list of [dtype, shape] pairs"):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], list)):
                raise fields.incomplete(f"{fields.what}: {key!r} holds something other than [dtype, shape]")
            dtype, shape = item
            if (
                not isinstance(dtype, str)
                or dtype not in DTYPES
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
            ):
                raise RuntimeFailure(f"{fields.where}: invalid tensor type {dtype}{shape} in the manifest")
            out.append(TensorType(tuple(shape), dtype))
        return tuple(out)

    return Signature(types("inputs"), types("outputs"))
