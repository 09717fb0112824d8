"""``byoc.build``: from a graph to a runnable :class:`~byoc.runtime.Model`.

parse -> offload (explicit regions, or every ExampleJSON subgraph) -> generate ->
compile (C/C++, cached) -> package as a manifest plus members -> Model. The same
manifest and members are what ``Model.save`` writes into a ``.byoc`` bundle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

from . import __version__
from .catalog import Catalog
from .errors import UsageError
from .ir import Program

SOURCE_MEMBER = "source.graph"
"""The program as parsed, in DSL form: what ``byoc run`` checks a bundle against."""


@dataclass
class Timings:
    """Seconds spent in each stage, in order."""

    stages: dict[str, float] = field(default_factory=dict)

    def measure(self, stage: str):
        timings = self

        class _Timer:
            def __enter__(self):
                self.start = perf_counter()

            def __exit__(self, *exc):
                timings.stages[stage] = timings.stages.get(stage, 0.0) + perf_counter() - self.start

        return _Timer()


def offload(
    program: Program, language: str, backends: Sequence[str], load_backend, catalog: Catalog | None = None
) -> Program:
    """The program with everything to offload made explicit.

    ExampleJSON: each subgraph goes whole to one backend (default examplejson), and
    keeps its name as the exported symbol. DSL: explicit ``@backend`` regions stay as
    written, and with ``--backend`` every other node is partitioned automatically
    (annotate, merge, partition) over the given backends, in order of preference.
    """
    from .generator.lowering import offload_whole
    from .generator.partition import partition

    if language == "examplejson":
        if len(backends) > 1:
            raise UsageError("an ExampleJSON subgraph goes whole to one backend; pass one --backend")
        return offload_whole(program, backends[0] if backends else "examplejson")
    if backends:
        program = partition(program, [load_backend(name) for name in dict.fromkeys(backends)], catalog)
    if not any(n.callee is not None for fn in program.functions for n in fn.nodes):
        raise UsageError(
            "nothing is offloaded",
            hint="pass --backend NAME to offload what a backend supports, or mark a region "
            "with `name = @ccompiler { ... return ... }`",
        )
    return program


def build(
    source: str | Path | Program,
    *,
    backends: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
    spec_path: Sequence[str] | None = None,
    language: str | None = None,
    catalog: Catalog | None = None,
    timings: Timings | None = None,
):
    """Build a runnable Model from a file path or a parsed Program (see module doc)."""
    from .api import load_backend, load_catalog, parse_file, print_program
    from .generator.pipeline import generate
    from .runtime import Model

    timings = timings or Timings()
    catalog = catalog or load_catalog()

    def loader(name: str):
        return load_backend(name, spec_path=spec_path)

    with timings.measure("parse"):
        if isinstance(source, Program):
            program, lang = source, language or "graph"
        else:
            from .api import language_of

            lang = language_of(source, language)
            program = parse_file(source, lang, spec_path=spec_path)
        offloaded = offload(program, lang, backends, loader, catalog)

    with timings.measure("generate"):
        generated = generate(offloaded, catalog, loader, options)
        lowered, artifacts = generated.lowered, generated.artifacts
    manifest: dict[str, Any] = {"byoc": __version__, "source": SOURCE_MEMBER, "graphs": [], "modules": []}
    members: dict[str, bytes] = {a.name: a.text.encode("utf-8") for a in artifacts}
    members[SOURCE_MEMBER] = print_program(program, "graph").encode("utf-8")
    with timings.measure("compile"):
        for name, spec in generated.specs.items():
            manifest["modules"].append(
                _package_module(name, spec, artifacts, lowered, generated.options[name], members)
            )
    for fn in lowered.hosts:
        host_functions = f"{fn.name}.host.graph"
        manifest["graphs"].append(
            {
                "name": fn.name,
                "host_graph": f"{fn.name}.graph.json",
                "host_functions": host_functions if host_functions in members else None,
            }
        )
    with timings.measure("load"):
        return Model(manifest, members, catalog)


def _package_module(
    name, spec, artifacts, lowered, option_values, members: dict[str, bytes]
) -> dict[str, Any]:
    from .runtime.interface import Signature
    from .runtime.model import signature_to_json

    own = [a for a in artifacts if a.backend == name and a.role in ("module", "header")]
    module = next(a for a in own if a.role == "module")
    kind = spec.kind
    if kind.compiled:
        from .runtime.build import build_artifacts

        values = spec.template_values(option_values)
        library = build_artifacts({a.name: a.text for a in own}, module.name, spec.compile, values)
        lib_name = f"lib{name}.so"
        members[lib_name] = Path(library).read_bytes()
        functions = {
            fn.name: signature_to_json(Signature(tuple(p.type for p in fn.params), fn.output_types))
            for fn in lowered.externals_for(name)
        }
        return {
            "backend": name,
            "kind": "library",
            "file": lib_name,
            "sources": [a.name for a in own],
            "functions": functions,
        }
    if kind.name_table is not None:
        return {"backend": name, "kind": kind.name, "file": module.name, kind.name_table: spec.op_names()}
    raise UsageError(f"backend {name}: codegen kind {kind.name!r} cannot be built")
