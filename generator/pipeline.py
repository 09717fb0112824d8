"""From a parsed Program to every artifact of a build: lower the regions, run each
backend's generator on its external functions, and emit the host graphs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from byoc.catalog import Catalog
from byoc.errors import UsageError, did_you_mean
from byoc.gc_pause import full_collections_deferred
from byoc.ir import Program
from byoc.spec.backend import BackendSpec, OptionValue
from byoc.spec.option_types import split_option_key

from . import generator_for, host_graph
from .artifacts import Artifact, Role
from .lowering import Lowered, lower


def split_options(raw: Mapping[str, str], specs: Mapping[str, BackendSpec]) -> dict[str, dict[str, str]]:
    """Route ``--option`` values to backends.

    ``backend.key=value`` sets one backend's option; ``key=value`` sets it on every
    backend of the build that has the option. A key no backend has is an error.
    """
    routed: dict[str, dict[str, str]] = {name: {} for name in specs}
    for key, value in raw.items():
        backend, name = split_option_key(key)  # refuses ".opt_level", "json.", "a.b.c"
        targets = [backend] if backend else [b for b, s in specs.items() if name in s.options]
        if backend and backend not in specs:
            raise UsageError(
                f"--option {key}: backend {backend!r} is not used by this build",
                hint=f"backends in this build: {', '.join(specs) or 'none'}",
            )
        if not targets:
            known = sorted({f"{b}.{o}" for b, s in specs.items() for o in s.options})
            only = next(iter(specs.values())) if len(specs) == 1 else None
            guess = did_you_mean(name, {o for s in specs.values() for o in s.options})
            raise UsageError(
                f"--option {key}: no backend of this build has that option",
                only.options_loc if only is not None else None,
                hint=f"{guess}options: {', '.join(known) or 'none'}",
            )
        for target in targets:
            routed[target][name] = value
    return routed


@dataclass(frozen=True, slots=True)
class Generated:
    """A build's artifacts, with the specs and option values that made them."""

    lowered: Lowered
    artifacts: tuple[Artifact, ...]
    specs: Mapping[str, BackendSpec]
    options: Mapping[str, Mapping[str, OptionValue]]
    """Every option value of each backend for this build, defaults included."""


def generate(
    program: Program,
    catalog: Catalog,
    load_backend: Callable[[str], BackendSpec],
    options: Mapping[str, str] | None = None,
    *,
    profile: bool = False,
) -> Generated:
    """Every artifact of ``program`` (backend modules first, then host graphs), with
    the specs and option values that made them (what compiling needs). With
    ``profile``, every compiled module times its kernel calls
    (:mod:`byoc.generator.c.profile`); without it, no module has a trace of profiling."""
    with full_collections_deferred():
        return _generate(program, catalog, load_backend, options, profile)


def _generate(program, catalog, load_backend, options, profile: bool) -> Generated:
    lowered = lower(program, load_backend, catalog)
    specs = {name: load_backend(name) for name in lowered.backends}
    routed = split_options(options or {}, specs)
    artifacts: list[Artifact] = []
    values: dict[str, dict[str, OptionValue]] = {}
    for name, spec in specs.items():
        values[name] = spec.option_values(routed[name])
        timed = {"profile": True} if profile and spec.kind.compiled else {}
        artifacts.extend(
            generator_for(spec.kind)(lowered.externals_for(name), spec, catalog, values[name], **timed)
        )
    artifacts.extend(host_graph.generate(lowered.hosts, catalog))
    seen: dict[str, Artifact] = {}
    for artifact in artifacts:
        first = seen.get(artifact.name)
        if first is not None and shared_file(first, artifact):
            continue
        if first is not None:
            raise UsageError(
                f"two artifacts would both be written to {artifact.name!r}",
                hint="rename a graph or a backend so that their file names differ",
            )
        seen[artifact.name] = artifact
    return Generated(lowered, tuple(artifacts), specs, values)


def shared_file(first: Artifact, other: Artifact) -> bool:
    """Whether two artifacts of one name are one file that two backends' modules share
    (byoc's ``byoc_module.h``, ``byoc_entry.c``): support code of the same text."""
    shared = (Role.HEADER, Role.SUPPORT)
    return first.role in shared and other.role is first.role and first.content == other.content
