"""Load and validate op catalogs into a :class:`~byoc.catalog.Catalog`.

The shipped catalog is ``spec/ops.yaml``. A user's spec directory may hold an
``ops.yaml`` of the same format that extends it (:func:`merge_catalogs`): it may add
ops, and change the ``doc`` of an op defined elsewhere with an entry that holds only
``doc:``; redefining an op of the shipped catalog is an error. An op's ``onnx:`` key
names the ONNX op that imports as it (:func:`~byoc.spec.op_onnx.load_onnx`), a row of the ONNX
import's table (``byoc/onnx/ops.yaml``) that the table itself must not have.
Catalogs are cached by content, and each carries a digest of it (:attr:`Catalog.key`).
One op's entry is loaded by :mod:`.op_entry`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from byoc.catalog import Catalog, CatalogFile, OpDef
from byoc.errors import Location, SpecError

from .op_entry import check_op_name, load_op
from .op_onnx import check_onnx_claims
from .support import read_spec_text
from .validated_cache import validated

if TYPE_CHECKING:
    from .yaml_doc import YamlDoc

SHIPPED_OPS = Path(__file__).with_name("ops.yaml")
USER_CATALOG = "ops.yaml"
"""The file name of a spec directory's op catalog (every other ``*.yaml`` there is a backend spec)."""


@lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int) -> Catalog:
    return validated("catalog", path, "", lambda: load_catalog_text(_read(path)), Catalog)


def _read(path: str, text: str | None = None) -> YamlDoc:
    """The YAML document of ``path``. ruamel.yaml is imported here, on a validation: a
    process whose catalogs all come from the disk cache never imports it."""
    from .yaml_doc import YamlDoc

    return YamlDoc(path, text)


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load a complete op catalog; the shipped ``spec/ops.yaml`` when ``path`` is None.

    Results are cached per file and modification time, and kept in the disk cache
    (:mod:`.validated_cache`).
    """
    p = Path(path) if path is not None else SHIPPED_OPS
    try:
        mtime = p.stat().st_mtime_ns
    except OSError:
        mtime = -1
    return _load_cached(str(p), mtime)


def load_catalog_text(doc: YamlDoc) -> Catalog:
    """A complete catalog: every entry defines its op."""
    ops_node = _ops_node(doc, "an op catalog")
    ops = {name: load_op(doc, ops_node, name) for name in ops_node}
    check_onnx_claims(ops.values(), [doc])
    return Catalog(ops, source=doc.path, key=_digest([doc.text]))


def load_user_catalogs(paths: Sequence[str | Path]) -> Catalog:
    """The shipped catalog extended by the user catalogs ``paths``, in search order."""
    return merge_catalogs([CatalogFile(str(p), read_spec_text(p)) for p in paths])


def merge_catalogs(files: Sequence[CatalogFile]) -> Catalog:
    """The shipped catalog extended by ``files`` (user catalogs, in search order).

    A new op defined by several files comes from the first (as the first backend
    spec of a name wins); a doc change applies from the first file that makes one.
    Cached by the files' content (and the shipped catalog's).
    """
    if not files:
        return load_catalog()
    return _merged(SHIPPED_OPS.stat().st_mtime_ns, tuple(files))


@lru_cache(maxsize=16)
def _merged(shipped_mtime_ns: int, files: tuple[CatalogFile, ...]) -> Catalog:
    shipped = load_catalog()
    docs = [_read(f.path, f.text) for f in files]
    loaded = [_load_user_catalog(doc) for doc in docs]
    ops = dict(shipped)
    for doc, (defined, _) in zip(docs, loaded):
        for name, op in defined.items():
            if name in shipped:
                raise _redefined(doc, op, shipped[name])
            ops.setdefault(name, op)
    doc_locations: dict[str, Location] = {}
    for doc, (_, doc_changes) in zip(docs, loaded):
        for name, (text, loc) in doc_changes.items():
            if name not in ops:
                raise doc.error_at(
                    f"op {name}: a user catalog entry with only `doc:` changes the doc of an existing "
                    "op, and there is no op of that name",
                    loc,
                    hint="a new op needs `inputs`, `shape` and `numpy:` or `kernel:` (spec/README.md)",
                )
            if name not in doc_locations:
                ops[name] = replace(ops[name], doc=text)
                doc_locations[name] = loc
    check_onnx_claims(ops.values(), docs)
    key = _digest([shipped.key, *(f.text for f in files)])
    return Catalog(ops, source=shipped.source, key=key, user_files=files, doc_locations=doc_locations)


def _redefined(doc: YamlDoc, op: OpDef, shipped: OpDef) -> SpecError:
    return doc.error_at(
        f"op {op.name} is shipped with byoc (spec/ops.yaml:{shipped.loc.line if shipped.loc else '?'}); "
        "a user catalog may add ops and change the doc of shipped ones, not redefine them",
        op.loc or Location(doc.path, 1, 1),
        hint=f"give your op another name (such as my_{op.name}), or keep only `doc:` to change its doc",
    )


def _load_user_catalog(doc: YamlDoc) -> tuple[dict[str, OpDef], dict[str, tuple[str, Location]]]:
    """A user catalog's new ops, and its doc changes (entries with only ``doc:``)."""
    ops_node = _ops_node(doc, f"a spec directory's {USER_CATALOG} (its op catalog)")
    defined: dict[str, OpDef] = {}
    doc_changes: dict[str, tuple[str, Location]] = {}
    for name in ops_node:
        node = ops_node[name]
        if isinstance(node, dict) and list(node) == ["doc"]:
            check_op_name(doc, ops_node, name)
            text = doc.typed(node, "doc", str, f"op {name}: doc")
            doc_changes[name] = (text, doc.at(ops_node, name))
        else:
            defined[name] = load_op(doc, ops_node, name)
    return defined, doc_changes


def _ops_node(doc: YamlDoc, what: str):
    """The ``ops`` mapping of a catalog, after checking its top level."""
    root = doc.root
    if not isinstance(root, dict):
        raise doc.error(f"{what} must be a mapping with `version` and `ops`", root)
    if "kind" in root or "name" in root:
        key = "kind" if "kind" in root else "name"
        raise doc.error(
            f"{what} holds op definitions, not a backend spec",
            root,
            key,
            hint=f"name a backend spec <backend>.yaml; {USER_CATALOG} is the op catalog of its directory",
        )
    doc.check_keys(root, "the op catalog", ("version", "ops"), ())
    if doc.typed(root, "version", int, "version") != 1:
        raise doc.error(
            "unsupported catalog version", root, "version", value=True, hint="this byoc reads version 1"
        )
    return doc.mapping(root, "ops", "ops")


def _digest(texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()
