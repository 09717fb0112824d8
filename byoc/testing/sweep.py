"""``byoc sweep``: the conformance run of one backend against the numpy reference.

For every op the backend's spec maps, every dtype the spec, the mapping and the op
allow, and every rank the spec and the mapping allow, a few one-op *cases* are drawn
(:mod:`byoc.testing.sweep_cases`, by :mod:`byoc.testing.draft`: inputs and attributes
by the op's shape rule, seeded, small tensors; the rank is the output's, which the
spec's ranks are checked against). A case whose node the spec refuses (a ``when:``
condition, a dtype this machine's probe lacks, a macro that cannot read its shape) is
*not applicable*, with the generator's reason. Every other case becomes one region of
the backend, ``v = @backend { ... }``, in one graph: one build (one compile) for them
all, run once and compared output by output with the reference at the tolerance of its
dtype (:mod:`byoc.testing.compare`). A build or a run that fails is split (by op, then
dtype, then rank, then case) until the cases that fail it are found, within
:data:`BUILD_BUDGET` builds. The result is a :class:`~byoc.testing.sweep_report.SweepReport`.

Each case draws from its own generator, seeded by ``seed`` and its op, dtype, rank and
number, so a narrower sweep (``--op``, ``--dtype``) draws the same cases as the full one.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from time import perf_counter
from typing import TYPE_CHECKING

import numpy as np

from byoc.errors import ByocError, UsageError

from .compare import mismatch
from .sweep_cases import Case, choose, draw_cases, sweep_plan
from .sweep_report import FAILED, NOT_APPLICABLE, PASSED, Outcome, SweepReport

if TYPE_CHECKING:
    from byoc.catalog import Catalog
    from byoc.spec.backend import BackendSpec

log = logging.getLogger(__name__)

DEFAULT_CASES = 2
"""Cases per (op, dtype, rank) by default."""
SPARE = 3
"""Candidates drawn per wanted case: the spec may refuse some (a macro that does not
broadcast refuses most random elementwise shapes), and the cases it takes come first."""
BATCH = 1000
"""Cases per build at most: a sweep of more builds batches of them in parallel (a
compiler per core), since a compiler's time grows faster than its input."""
BUILD_BUDGET = 48
"""Builds a sweep may spend isolating the cases that fail a build or a run."""


def sweep(
    backend: str,
    *,
    spec_path=None,
    seed: int = 0,
    dtypes: Sequence[str] = (),
    ops: Sequence[str] = (),
    cases: int = DEFAULT_CASES,
    options: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> SweepReport:
    """Sweep ``backend`` (found on ``spec_path``, then the shipped specs): see the module
    doc. ``ops`` and ``dtypes`` narrow it (a name the spec lacks is a UsageError);
    ``options`` are build options (``--option``); ``progress`` hears a line per stage."""
    from byoc.api import load_backend, load_catalog

    if cases < 1:
        raise UsageError(f"--cases {cases}: sweep at least one case per op, dtype and rank")
    start = perf_counter()
    say = progress or log.info
    catalog = load_catalog(spec_path=spec_path)
    spec = load_backend(backend, spec_path, catalog=catalog)
    plan = sweep_plan(spec, catalog, ops, dtypes)
    candidates, undrawn = draw_cases(catalog, plan, seed, cases * SPARE)
    refused = _refusals(spec, catalog, candidates)
    drawn = choose(candidates, refused, cases)
    report = SweepReport(spec.name, seed, cases, undrawn=undrawn)
    say(f"{spec.name}: {len(drawn)} cases of {len({op for op, _, _ in plan})} ops drawn")
    runner = _Runner(spec.name, spec_path, catalog, options, report)
    runnable = [c for c in drawn if c.key not in refused]
    batches = [runnable[k : k + BATCH] for k in range(0, len(runnable), BATCH)]
    say(f"{spec.name}: {len(runnable)} applicable; building them in {len(batches)} module(s)")
    runner.limit += len(batches)
    results: dict[str, tuple[str, str]] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(len(batches), os.cpu_count() or 1))) as pool:
        for done in pool.map(runner.run, batches):
            results.update(done)
    for c in drawn:
        if c.key in refused:
            status, detail = NOT_APPLICABLE, refused[c.key]
        else:
            status, detail = results[c.key]
        report.outcomes.append(Outcome(c.op, c.dtype, c.rank, status, c.statement.signature(), detail))
    report.seconds = perf_counter() - start
    return report


def _refusals(spec: BackendSpec, catalog: Catalog, cases: Sequence[Case]) -> dict[str, str]:
    """Why the spec (on this machine: without the dtypes its probe finds missing)
    refuses the node of each case it refuses, by case key."""
    from byoc.api import parse
    from byoc.generator.partition.annotate import why_not_supported
    from byoc.runtime.probe import for_machine

    if not cases:
        return {}
    fn = parse(_graph_text(cases), "graph", file="sweep.graph", catalog=catalog).functions[0]
    types = fn.types()
    machine = for_machine(spec, {t.dtype for t in types.values()})
    out = {}
    for node in fn.nodes:
        why = why_not_supported(machine, node, types, catalog)
        if why is not None:
            out[node.outputs[0]] = why
    return out


def _graph_text(cases: Sequence[Case], backend: str | None = None) -> str:
    """One graph of every case: its statement as a host node, or as a region of
    ``backend`` (``c0_v0 = @backend { t0 = add(c0_p0, c0_p1) return t0 }``)."""
    params = ", ".join(f"{p.value.name}: {p.value.type}" for c in cases for p in c.statement.params)
    lines = []
    for c in cases:
        s = c.statement
        if backend is None:
            lines.append(f"  {s.text}\n")
        else:
            inner = ", ".join(f"t{k}" for k in range(len(s.outputs)))
            outer = ", ".join(v.name for v in s.outputs)
            lines.append(f"  {outer} = @{backend} {{\n    {inner} = {s.call}\n    return {inner}\n  }}\n")
    returned = ", ".join(v.name for c in cases for v in c.statement.outputs)
    return f"graph sweep({params}) {{\n{''.join(lines)}  return {returned}\n}}\n"


class _Runner:
    """Builds, runs and compares batches of cases, splitting one that fails."""

    def __init__(
        self,
        backend: str,
        spec_path,
        catalog: Catalog,
        options: Mapping[str, str] | None,
        report: SweepReport,
    ) -> None:
        self.backend = backend
        self.spec_path = spec_path
        self.catalog = catalog
        self.options = options
        self.report = report
        self.lock = threading.Lock()
        self.limit = BUILD_BUDGET
        """The builds after which a failed batch is no longer split."""

    def run(self, cases: Sequence[Case]) -> dict[str, tuple[str, str]]:
        """(status, detail) of every case, by key."""
        try:
            return self._run_batch(cases)
        except Exception as exc:  # noqa: BLE001 - a generator's crash is the backend's failure
            error = _error_text(exc)
        if len(cases) == 1:
            return {cases[0].key: (FAILED, error)}
        if self.report.builds >= self.limit:
            note = f"{error} (in a build of {len(cases)} cases; the sweep's build budget ran out)"
            return {c.key: (FAILED, note) for c in cases}
        out: dict[str, tuple[str, str]] = {}
        for part in _split(cases):
            out.update(self.run(part))
        return out

    def _run_batch(self, cases: Sequence[Case]) -> dict[str, tuple[str, str]]:
        from byoc.api import evaluate, parse
        from byoc.building import build

        with self.lock:
            self.report.builds += 1
        program = parse(_graph_text(cases, self.backend), "graph", file="sweep.graph", catalog=self.catalog)
        inputs = {name: array for c in cases for name, array in c.inputs.items()}
        with np.errstate(all="ignore"):  # domain errors give NaN, as in C
            want = evaluate(program.functions[0], inputs, self.catalog)
            model = build(program, spec_path=self.spec_path, catalog=self.catalog, options=self.options)
            got = model(**inputs)
        out: dict[str, tuple[str, str]] = {}
        k = 0
        for c in cases:
            n = len(c.statement.outputs)
            whys = [mismatch(g, w) for g, w in zip(got[k : k + n], want[k : k + n])]
            k += n
            wrong = [f"output {j}: {why}" if n > 1 else why for j, why in enumerate(whys) if why is not None]
            out[c.key] = (FAILED, "; ".join(wrong)) if wrong else (PASSED, "")
        return out


def _split(cases: Sequence[Case]) -> list[list[Case]]:
    """A failed batch in parts: by op, else by dtype, else by rank, else one case each."""
    for key in (lambda c: c.op, lambda c: c.dtype, lambda c: c.rank):
        groups: dict[object, list[Case]] = {}
        for c in cases:
            groups.setdefault(key(c), []).append(c)
        if len(groups) > 1:
            return list(groups.values())
    return [[c] for c in cases]


def _error_text(exc: Exception) -> str:
    if isinstance(exc, ByocError):
        text = f"{exc.title}: {exc}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:2000]
