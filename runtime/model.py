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
from typing import TYPE_CHECKING, Any

import numpy as np

from byoc.atomic import write_file
from byoc.catalog import Catalog
from byoc.errors import RuntimeFailure, UsageError

from .build import cache_dir
from .bundle import read_bundle, write_bundle
from .cache_store import file_sha256, touch
from .executor import GraphExecutor, TensorInfo
from .host_module import HostModule
from .interface import Module
from .manifest import ExampleJsonEntry, JsonEntry, LibraryEntry, Manifest, ModuleEntry
from .members import Maker, Members

if TYPE_CHECKING:
    from .profile import Profile


class Model:
    """Run with ``model(**inputs)`` (one graph) or ``model.run(graph, **inputs)``."""

    def __init__(
        self,
        manifest: Manifest,
        members: Mapping[str, bytes | Maker],
        catalog: Catalog | None = None,
        built: Mapping[str, Path] | None = None,
    ) -> None:
        """``catalog`` defaults to the shipped one extended by the bundle's user catalogs.
        ``built`` names the files that already hold library members (a build's cache
        entries): those are loaded where they are, not unpacked into a second copy. A
        member may be given as the function that makes its bytes, which runs when the
        member is first read (:mod:`byoc.runtime.members`)."""
        self.manifest = manifest
        self.members = Members(members)
        catalog = catalog or _catalog(manifest, self.members)
        self.catalog = catalog
        """The op catalog the model runs its host ops and interpreted modules with."""
        self.modules: list[Module] = [
            _module(m, self.members, catalog, built or {}) for m in manifest.modules
        ]
        self.placement: dict[str | None, int] = {}
        """How many ops each backend runs (None: the host), as partitioning placed them;
        set by a build (byoc.building.build), empty for a loaded bundle."""
        libraries = [m for m in self.modules if m.kind == "library"]
        self.profiling: bool = bool(libraries) and all(getattr(m, "profiling", False) for m in libraries)
        """Whether :meth:`profile` works: the model was built with profiling (a build
        sets it; for a bundle, its compiled libraries were built with profiling)."""
        self.graphs: dict[str, GraphExecutor] = {}
        for g in manifest.graphs:
            modules = list(self.modules)
            if g.host_functions is not None:
                text = self.text(g.host_functions)
                modules.insert(0, HostModule(text, catalog, file=g.host_functions, files=self.members))
            self.graphs[g.name] = GraphExecutor(self.text(g.host_graph), modules, name=g.name)

    @property
    def graph_names(self) -> tuple[str, ...]:
        return tuple(self.graphs)

    def text(self, member: str) -> str:
        """The text of ``member`` (a host graph, a JSON module, the source graph)."""
        return _text(self.members, member)

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

    @property
    def inputs(self) -> tuple[TensorInfo, ...]:
        """The inputs of the model's one graph: name, shape and dtype of each, in order
        (``model.executor(name).inputs`` for a model of several graphs)."""
        return self.executor().inputs

    @property
    def outputs(self) -> tuple[TensorInfo, ...]:
        """The outputs of the model's one graph (``output_0``, ...), as :attr:`inputs`."""
        return self.executor().outputs

    def run(self, graph: str | None = None, **inputs: Any) -> tuple[np.ndarray, ...]:
        return self.executor(graph)(**inputs)

    def __call__(self, **inputs: Any) -> tuple[np.ndarray, ...]:
        return self.executor()(**inputs)

    def profile(self, graph: str | None = None, **inputs: Any) -> Profile:
        """Run ``graph`` (as :meth:`run`) once with profiling: the time of the run, of
        each region call, each kernel call inside a region and each host op, with the
        outputs (:class:`~byoc.runtime.profile.Profile`: ``.table()``,
        ``.to_chrome_trace(path)``). Needs a model built with profiling
        (:meth:`check_profiling`)."""
        self.check_profiling()
        from .profile import profile_run

        backends = {id(m): e.backend for m, e in zip(self.modules, self.manifest.modules)}
        return profile_run(self.executor(graph), inputs, backends)

    def check_profiling(self) -> None:
        """Raise a UsageError, with the fix as its hint, unless :meth:`profile` works."""
        if not self.profiling:
            raise UsageError(
                "this model was not built with profiling, so its kernels are not timed",
                hint="build it with byoc.build(..., profile=True), or `byoc run --profile` / "
                "`byoc build --profile`; a build without profiling has no profiling code at all",
            )

    def save(self, path: str | Path) -> None:
        """Write the model as a ``.byoc`` bundle."""
        write_bundle(path, self.manifest, self.members)


def load(path: str | Path, catalog: Catalog | None = None) -> Model:
    """Restore a runnable model from a ``.byoc`` bundle (no code generator needed)."""
    manifest, members = read_bundle(path)
    return Model(manifest, members, catalog)


# ---------------------------------------------------------------------------- parts


def _member(members: Mapping[str, bytes], name: str) -> bytes:
    try:
        return members[name]
    except KeyError:
        raise RuntimeFailure(f"the manifest names {name!r}, which is missing") from None


def _text(members: Mapping[str, bytes], name: str) -> str:
    try:
        return _member(members, name).decode("utf-8")
    except UnicodeDecodeError:
        raise RuntimeFailure(f"{name} is not UTF-8 text") from None


def _catalog(manifest: Manifest, members: Mapping[str, bytes]) -> Catalog:
    """The shipped op catalog, extended by the user catalogs the build saved as members."""
    from byoc.catalog import CatalogFile
    from byoc.spec import merge_catalogs

    return merge_catalogs([CatalogFile(name, _text(members, name)) for name in manifest.catalogs])


def _module(
    entry: ModuleEntry, members: Mapping[str, bytes], catalog: Catalog, built: Mapping[str, Path]
) -> Module:
    if isinstance(entry, LibraryEntry):
        from .module import LibraryModule

        _load_requirements(entry)
        return LibraryModule(
            built[entry.file] if entry.file in built else _materialise(members, entry.file),
            entry.functions,
            requirements=entry.requires,
            backend=entry.backend,
        )
    if isinstance(entry, JsonEntry):
        from .json_module import JsonRuntimeModule

        return JsonRuntimeModule.from_text(
            _text(members, entry.file), catalog=catalog, kernels=entry.op_names, files=members
        )
    assert isinstance(entry, ExampleJsonEntry), entry
    from .examplejson_module import ExampleJsonModule

    return ExampleJsonModule.from_text(_text(members, entry.file), tokens=entry.op_names, catalog=catalog)


def _load_requirements(entry: LibraryEntry) -> None:
    """Locate the libraries ``entry`` links against on this machine and load them
    (globally), so the library finds them wherever this machine installed them, not
    only where the build machine had them (its rpath). Each is checked and bound now
    (:func:`~byoc.runtime.native_load.load_now`); a linker script (glibc's
    ``libm.so``) stands for the shared objects it names."""
    from byoc.spec.requirements import NotFound

    from .native_load import load_now

    for req in entry.requires:
        try:
            files = req.locate().files
        except NotFound as exc:
            raise RuntimeFailure(
                f"backend {entry.backend} needs {req.name}, which is not installed here: {exc}",
                hint=req.install,
            ) from None
        for file in files:
            load_now(
                file,
                what=f"the library of requirement {req.name} of backend {entry.backend}",
                requirements=(req,),
                global_=True,
            )


def _materialise(members: Mapping[str, bytes], name: str) -> Path:
    """A file holding member ``name`` (a shared library), content-addressed in the cache."""
    data = _member(members, name)
    digest = hashlib.sha256(data).hexdigest()
    target = cache_dir() / "bundles" / digest[:2] / digest / name
    try:
        if file_sha256(target) == digest:
            touch(target.parent)  # its last use, for least-recently-used eviction
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
