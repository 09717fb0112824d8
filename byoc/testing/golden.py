"""Helpers for a backend vendor's own test suite: golden files and reference checks.

:func:`generated_artifacts` gives a graph's generated files as text that does not
depend on where the test runs: generated comments name the graph file as it was
given (``region @acme at tests/graphs/add.graph:3:7``), and here its directory part
is replaced by :data:`GRAPH_DIR`, so that a golden file written in one checkout
passes in another, from any working directory. Spec files are named already by
their directory's name alone (``acme_specs/acme.yaml (from --spec-path)``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from byoc.ir import Function, Program

from .compare import mismatch
from .random_values import random_array

GRAPH_DIR = "<graphs>"
"""What stands for the directory of the graph file in :func:`generated_artifacts`."""


def generated_artifacts(
    graph: str | Path | Program,
    backend: str | Sequence[str] | None = None,
    *,
    spec_path=None,
    options: Mapping[str, str] | None = None,
    language: str | None = None,
) -> dict[str, str]:
    """Every artifact ``byoc gen FILE --backend BACKEND -o DIR`` writes, by file name,
    as text the same on every machine (see the module doc); a weights artifact (a
    large constant's bytes) as ``<n> bytes, sha256 <digest>``. ``graph`` is a
    ``.graph``, ``.examplejson`` or ``.onnx`` file, or a parsed Program; ``backend``
    (one, or several in order of preference) partitions it, else only its explicit
    ``@backend`` regions are offloaded; ``options`` are ``--option`` values."""
    from byoc.api import backend_loader, language_of, load_catalog, parse_file
    from byoc.building import offload
    from byoc.generator.pipeline import generate

    catalog = load_catalog(spec_path=spec_path)
    loader = backend_loader(spec_path, catalog)
    if isinstance(graph, Program):
        program, lang = graph, language or "graph"
    else:
        lang = language_of(graph, language)
        program = parse_file(graph, lang, catalog=catalog, spec_path=spec_path)
    backends = [backend] if isinstance(backend, str) else list(backend or ())
    program = offload(program, lang, backends, loader, catalog)
    artifacts = generate(program, catalog, loader, options).artifacts
    files = _source_files(program)
    out = {}
    for a in artifacts:
        if a.data is not None:
            out[a.name] = f"{len(a.data)} bytes, sha256 {hashlib.sha256(a.data).hexdigest()}\n"
        else:
            out[a.name] = machine_independent(a.text, files)
    return out


def machine_independent(text: str, files: set[str]) -> str:
    """``text`` with the directory part of each of ``files`` (paths as typed, as
    locations name them) replaced by :data:`GRAPH_DIR`, where it is followed by a
    ``:`` (a location, ``file:line``)."""
    for file in sorted(files, key=len, reverse=True):  # a longer path first: it may end in a shorter one
        stable = f"{GRAPH_DIR}/{Path(file).name}"
        text = re.sub(rf"(?<![\w./\\-]){re.escape(file)}(?=:)", lambda _m, s=stable: s, text)
    return text


def _source_files(program: Program) -> set[str]:
    """The files every location of ``program`` names."""
    files: set[str] = set()

    def visit(fn: Function) -> None:
        for item in (fn, *fn.params, *fn.constants, *fn.nodes):
            if item.loc is not None and item.loc.file and not item.loc.file.startswith("<"):
                files.add(item.loc.file)
        for node in fn.nodes:
            if node.callee is not None:
                visit(node.callee)

    for fn in program.functions:
        visit(fn)
    return files


def assert_matches_reference(
    graph: str | Path | Program,
    backend: str | Sequence[str] | None = None,
    *,
    spec_path=None,
    inputs: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
    options: Mapping[str, str] | None = None,
) -> dict[str, tuple[np.ndarray, ...]]:
    """Build ``graph`` (a file or a parsed Program) for ``backend`` (partitioned; None:
    its explicit regions only), run every graph of it, and raise an AssertionError
    naming each output that differs from the numpy reference beyond its dtype's
    tolerance (:data:`byoc.testing.TOLERANCE`). ``inputs`` are used by name, every
    other input is random (seeded by ``seed``). Returns each graph's outputs."""
    from byoc.api import evaluate, load_catalog, parse_file
    from byoc.building import build

    catalog = load_catalog(spec_path=spec_path)
    program = graph if isinstance(graph, Program) else parse_file(graph, catalog=catalog, spec_path=spec_path)
    backends = [backend] if isinstance(backend, str) else list(backend or ())
    model = build(program, backends=backends, spec_path=spec_path, catalog=catalog, options=options)
    rng = np.random.default_rng(seed)
    results = {}
    problems = []
    for fn in program.functions:
        given = dict(inputs or {})
        values = {p.name: given[p.name] if p.name in given else random_array(p.type, rng) for p in fn.params}
        with np.errstate(all="ignore"):  # domain errors give NaN, as in C
            want = evaluate(fn, values, catalog)
            got = model.run(fn.name, **values)
        for k, (g, w) in enumerate(zip(got, want)):
            why = mismatch(g, w)
            if why is not None:
                problems.append(f"graph {fn.name}, output {k} ({fn.outputs[k]}): {why}")
        results[fn.name] = got
    if problems:
        names = ", ".join(backends) or "its regions' backends"
        raise AssertionError(
            f"{len(problems)} output(s) differ from the reference on {names}:\n  " + "\n  ".join(problems)
        )
    return results
