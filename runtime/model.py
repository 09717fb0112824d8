"""A built program, ready to run: its modules and one graph executor per graph.

The same code assembles a model from a fresh build (:func:`byoc.build`) and from a
saved bundle (:func:`load`), from a manifest plus its member files, so a bundle
always runs exactly as the build it was saved from.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from byoc.atomic import write_file
from byoc.catalog import Catalog
from byoc.errors import RuntimeFailure, UsageError
from byoc.ir import DTYPES, TensorType

from .build import cache_dir
from .bundle import read_bundle, write_bundle
from .executor import GraphExecutor
from .host_module import HostModule
from .interface import Module, Signature


class Model:
    """Run with ``model(**inputs)`` (one graph) or ``model.run(graph, **inputs)``."""

    def __init__(
        self, manifest: Mapping[str, Any], members: Mapping[str, bytes], catalog: Catalog | None = None
    ) -> None:
        from byoc.spec import load_catalog

        self.manifest = dict(manifest)
        self.members = dict(members)
        catalog = catalog or load_catalog()
        try:
            self.modules: list[Module] = [_module(m, self.members, catalog) for m in manifest["modules"]]
            self.graphs: dict[str, GraphExecutor] = {}
            for g in manifest["graphs"]:
                modules = list(self.modules)
                if g.get("host_functions"):
                    text = _text(self.members, g["host_functions"])
                    modules.insert(0, HostModule(text, catalog, file=g["host_functions"]))
                self.graphs[str(g["name"])] = GraphExecutor(
                    _text(self.members, g["host_graph"]), modules, name=str(g["name"])
                )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a hand-edited manifest
            raise RuntimeFailure(f"the manifest is incomplete: {type(exc).__name__}: {exc}") from None

    @property
    def graph_names(self) -> tuple[str, ...]:
        return tuple(self.graphs)

    def executor(self, graph: str | None = None) -> GraphExecutor:
        if graph is None:
            if len(self.graphs) != 1:
                raise RuntimeFailure(
                    f"this model has {len(self.graphs)} graphs; name one",
                    hint=f"graphs: {', '.join(self.graphs)}",
                )
            return next(iter(self.graphs.values()))
        try:
            return self.graphs[graph]
        except KeyError:
            raise RuntimeFailure(f"no graph {graph!r}", hint=f"graphs: {', '.join(self.graphs)}") from None

    def run(self, graph: str | None = None, **inputs: Any) -> tuple[np.ndarray, ...]:
        return self.executor(graph)(**inputs)

    def __call__(self, **inputs: Any) -> tuple[np.ndarray, ...]:
        return self.executor()(**inputs)

    def save(self, path: str | Path) -> None:
        """Write the model as a ``.byoc`` bundle."""
        manifest = {k: v for k, v in self.manifest.items() if k not in ("members", "format", "version")}
        write_bundle(path, manifest, self.members)


def load(path: str | Path, catalog: Catalog | None = None) -> Model:
    """Restore a runnable model from a ``.byoc`` bundle (no code generator needed)."""
    manifest, members = read_bundle(path)
    return Model(manifest, members, catalog)


# ---------------------------------------------------------------------------- parts


def signature_to_json(sig: Signature) -> dict[str, list]:
    return {
        "inputs": [[t.dtype, list(t.shape)] for t in sig.inputs],
        "outputs": [[t.dtype, list(t.shape)] for t in sig.outputs],
    }


def signature_from_json(data: Mapping[str, Any]) -> Signature:
    def types(items: Any) -> tuple[TensorType, ...]:
        out = []
        for dtype, shape in items:
            if dtype not in DTYPES or any(int(d) < 0 for d in shape):
                raise RuntimeFailure(f"invalid tensor type {dtype}{shape} in the manifest")
            out.append(TensorType(tuple(int(d) for d in shape), str(dtype)))
        return tuple(out)

    return Signature(types(data["inputs"]), types(data["outputs"]))


def _text(members: Mapping[str, bytes], name: str) -> str:
    try:
        return members[name].decode("utf-8")
    except KeyError:
        raise RuntimeFailure(f"the manifest names {name!r}, which is missing") from None
    except UnicodeDecodeError:
        raise RuntimeFailure(f"{name} is not UTF-8 text") from None


def _module(entry: Mapping[str, Any], members: Mapping[str, bytes], catalog: Catalog) -> Module:
    kind = entry["kind"]
    if kind == "library":
        from .module import LibraryModule

        signatures = {sym: signature_from_json(sig) for sym, sig in entry["functions"].items()}
        return LibraryModule(_materialise(members, entry["file"]), signatures)
    if kind == "json":
        from .json_module import JsonRuntimeModule

        return JsonRuntimeModule.from_text(
            _text(members, entry["file"]), catalog=catalog, kernels=entry["kernels"]
        )
    if kind == "examplejson":
        from .examplejson_module import ExampleJsonModule

        return ExampleJsonModule.from_text(
            _text(members, entry["file"]), tokens=entry["tokens"], catalog=catalog
        )
    raise RuntimeFailure(f"unknown module kind {kind!r} in the manifest")


def _materialise(members: Mapping[str, bytes], name: str) -> Path:
    """A file holding member ``name`` (a shared library), content-addressed in the cache."""
    data = members[name]
    digest = hashlib.sha256(data).hexdigest()
    target = cache_dir() / "bundles" / digest[:2] / digest / name
    try:
        if hashlib.sha256(target.read_bytes()).hexdigest() == digest:
            return target
    except OSError:  # absent, or something else (a directory) sits there: unpack afresh
        pass
    try:
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_file(target, data)  # temp file, then rename: no partial library, ever
    except (OSError, UsageError) as exc:
        reason = exc.message if isinstance(exc, UsageError) else exc.strerror or exc
        raise RuntimeFailure(
            f"cannot unpack {name} into {target.parent}: {reason}",
            hint="set $BYOC_CACHE_DIR to a writable directory",
        ) from None
    return target
