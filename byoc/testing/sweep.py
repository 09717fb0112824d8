"""``byoc sweep``: the conformance run of one backend against the numpy reference.

For every op the backend's spec maps, every dtype the spec, the mapping and the op
allow, and every rank the spec and the mapping allow, a few one-op *cases* are drawn
(:mod:`byoc.testing.cases`: inputs and attributes by the op's shape rule, seeded, small
tensors; the rank is the output's, which the spec's ranks are checked against). A case
whose node the spec refuses (a ``when:`` condition, a dtype this machine's probe lacks,
a macro that cannot read its shape) is *not applicable*, with the generator's reason.
Every other case becomes one region of the backend, ``v = @backend { ... }``, in one
graph: one build (one compile) for them all, run once and compared output by output
with the reference at the tolerance of its dtype (:mod:`byoc.testing.compare`). A build
or a run that fails is split (by op, then dtype, then rank, then case) until the cases
that fail it are found, within :data:`BUILD_BUDGET` builds.

Each case draws from its own generator, seeded by ``seed`` and its op, dtype, rank and
number, so a narrower sweep (``--op``, ``--dtype``) draws the same cases as the full one.
"""

from __future__ import annotations

import logging
import os
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING

import numpy as np

from byoc.errors import ByocError, UsageError, did_you_mean
from byoc.ir import DTYPES

from .cases import Draft, NumpyChoices, Statement, random_inputs
from .compare import mismatch

if TYPE_CHECKING:
    from byoc.catalog import Catalog
    from byoc.spec.backend import BackendSpec

log = logging.getLogger(__name__)

DEFAULT_CASES = 2
"""Cases per (op, dtype, rank) by default."""
ATTEMPTS = 40
"""Proposals drawn per wanted case before the sweep gives up on an (op, dtype, rank):
a rank the op's shape rule cannot produce (a convolution of rank 1) is never drawn."""
SPARE = 3
"""Candidates drawn per wanted case: the spec may refuse some (a macro that does not
broadcast refuses most random elementwise shapes), and the cases it takes come first."""
BATCH = 1000
"""Cases per build at most: a sweep of more builds batches of them in parallel (a
compiler per core), since a compiler's time grows faster than its input."""
BUILD_BUDGET = 48
"""Builds a sweep may spend isolating the cases that fail a build or a run."""

PASSED, FAILED, NOT_APPLICABLE = "passed", "failed", "not applicable"


@dataclass(frozen=True)
class Case:
    """One drawn case: a statement of one op, and its random inputs."""

    op: str
    dtype: str
    rank: int
    statement: Statement
    inputs: dict[str, np.ndarray] = field(compare=False, repr=False)

    @property
    def key(self) -> str:
        return self.statement.outputs[0].name


@dataclass(frozen=True)
class Outcome:
    """What became of one case: passed, failed (``detail``: the error or the largest
    error) or not applicable (``detail``: why the spec refuses the node)."""

    op: str
    dtype: str
    rank: int
    status: str
    call: str
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "op": self.op,
            "dtype": self.dtype,
            "rank": self.rank,
            "status": self.status,
            "call": self.call,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Row:
    """The counts of one (op, dtype) of a report, or of one (op, dtype, rank)."""

    op: str
    dtype: str
    ranks: tuple[int, ...]
    passed: int
    failed: int
    not_applicable: int

    @property
    def cases(self) -> int:
        return self.passed + self.failed + self.not_applicable


@dataclass
class SweepReport:
    """The result of :func:`sweep`: an outcome per case, the (op, dtype, rank)s for which
    no case could be drawn, and what it cost."""

    backend: str
    seed: int
    cases_per_rank: int
    outcomes: list[Outcome] = field(default_factory=list)
    undrawn: list[tuple[str, str, int]] = field(default_factory=list)
    builds: int = 0
    seconds: float = 0.0

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == FAILED]

    @property
    def ok(self) -> bool:
        """Whether no case failed."""
        return not self.failures

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    def rows(self, by_rank: bool = False) -> list[Row]:
        """Counts per (op, dtype), or per (op, dtype, rank), in the sweep's order."""
        groups: dict[tuple, list[Outcome]] = {}
        for o in self.outcomes:
            groups.setdefault((o.op, o.dtype, o.rank) if by_rank else (o.op, o.dtype), []).append(o)
        return [
            Row(
                key[0],
                key[1],
                tuple(sorted({o.rank for o in group})),
                sum(o.status == PASSED for o in group),
                sum(o.status == FAILED for o in group),
                sum(o.status == NOT_APPLICABLE for o in group),
            )
            for key, group in groups.items()
        ]

    def table(self, by_rank: bool = False) -> str:
        """The report as text: a row per (op, dtype) (or per rank), then every failure
        with its op, dtype, shapes and attributes, the reasons of the cases not
        applicable, and a summary line."""
        header = ("op", "dtype", "rank", "cases", "passed", "failed", "not applicable")
        body = [
            (r.op, r.dtype, _ranks_text(r.ranks), str(r.cases), str(r.passed), str(r.failed))
            + (str(r.not_applicable),)
            for r in self.rows(by_rank)
        ]
        widths = [max(len(row[k]) for row in [header, *body]) for k in range(len(header))]
        lines = [f"byoc sweep {self.backend}  (seed {self.seed}, up to {self.cases_per_rank} per rank)"]
        lines += [
            "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *body]
        ]
        if self.failures:
            lines.append("failures:")
            lines += [f"  {o.op} {o.dtype} rank {o.rank}: {o.call}\n    {o.detail}" for o in self.failures]
        reasons = self._not_applicable_reasons()
        if reasons:
            lines.append("not applicable (the spec refuses the node), with the first reason per op:")
            lines += [f"  {op} ({n} cases): {why}" for op, (n, why) in reasons.items()]
        if self.undrawn:
            lines.append("no case drawn (the catalog refused every proposal of these ranks):")
            lines += [f"  {line}" for line in self._undrawn_lines()]
        lines.append(self.summary())
        return "\n".join(lines) + "\n"

    def summary(self) -> str:
        verdict = "every case matches the reference" if self.ok else "some cases FAILED"
        return (
            f"result: {self.count(PASSED)} passed, {self.count(FAILED)} failed, "
            f"{self.count(NOT_APPLICABLE)} not applicable; {self.builds} build(s), "
            f"{self.seconds:.1f} s: {verdict}"
        )

    def _undrawn_lines(self) -> list[str]:
        """``flatten: rank 0-1, 3-8``, per op, with the dtypes where they differ."""
        ranks: dict[str, dict[str, list[int]]] = {}
        for op, dtype, rank in self.undrawn:
            ranks.setdefault(op, {}).setdefault(dtype, []).append(rank)
        lines = []
        for op, by_dtype in ranks.items():
            groups: dict[str, list[str]] = {}
            for dtype, rs in by_dtype.items():
                groups.setdefault(_ranks_text(rs), []).append(dtype)
            swept = {o.dtype for o in self.outcomes if o.op == op} | set(by_dtype)
            lines += [
                f"{op}{'' if set(dtypes) == swept else ' ' + ', '.join(dtypes)}: rank {text}"
                for text, dtypes in groups.items()
            ]
        return lines

    def _not_applicable_reasons(self) -> dict[str, tuple[int, str]]:
        out: dict[str, tuple[int, str]] = {}
        for o in self.outcomes:
            if o.status == NOT_APPLICABLE:
                n, why = out.get(o.op, (0, f"{o.dtype} rank {o.rank}: {o.call}: {o.detail}"))
                out[o.op] = (n + 1, why)
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "seed": self.seed,
            "cases_per_rank": self.cases_per_rank,
            "passed": self.count(PASSED),
            "failed": self.count(FAILED),
            "not_applicable": self.count(NOT_APPLICABLE),
            "builds": self.builds,
            "seconds": round(self.seconds, 3),
            "rows": [
                {
                    "op": r.op,
                    "dtype": r.dtype,
                    "rank": r.ranks[0],
                    "cases": r.cases,
                    "passed": r.passed,
                    "failed": r.failed,
                    "not_applicable": r.not_applicable,
                }
                for r in self.rows(by_rank=True)
            ],
            "undrawn": [{"op": op, "dtype": d, "rank": r} for op, d, r in self.undrawn],
            "outcomes": [o.to_json() for o in self.outcomes if o.status != PASSED],
        }


def _ranks_text(ranks: Sequence[int]) -> str:
    """``0-3, 5``: runs of consecutive ranks."""
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


# ------------------------------------------------------------------ the plan


def sweep_plan(
    spec: BackendSpec, catalog: Catalog, ops: Sequence[str] = (), dtypes: Sequence[str] = ()
) -> list[tuple[str, str, tuple[int, ...]]]:
    """(op, dtype, ranks) to sweep: the ops the spec maps (or ``ops``, which it must
    map), each at the dtypes the spec, its mapping and the op allow (of ``dtypes``,
    which the spec must take), at the ranks the spec and the mapping allow."""
    _check_ops(spec, catalog, ops)
    _check_dtypes(spec, dtypes)
    plan = []
    for name, binding in spec.ops.items():
        if ops and name not in ops:
            continue
        ranks = tuple(r for r in spec.ranks if binding.supports(r))
        for dtype in spec.dtypes:
            if (not dtypes or dtype in dtypes) and dtype in catalog[name].dtypes and binding.takes(dtype):
                plan.append((name, dtype, ranks))
    if not plan:
        which = f"{', '.join(ops) or 'its ops'} at {', '.join(dtypes) or 'any dtype'}"
        raise UsageError(
            f"nothing to sweep: backend {spec.name} maps none of {which}",
            hint=f"`byoc --spec-path DIR backends {spec.name}` shows which ops it takes at which dtypes",
        )
    return plan


def _check_ops(spec: BackendSpec, catalog: Catalog, ops: Sequence[str]) -> None:
    for name in ops:
        if name not in catalog:
            raise UsageError(
                f"--op {name}: no such op in the catalog",
                hint=did_you_mean(name, catalog) + "`byoc ops` lists the catalog; an op of your own "
                "ops.yaml needs its directory on the spec path (--spec-path)",
            )
        if name not in spec.ops:
            raise UsageError(
                f"--op {name}: backend {spec.name} does not map {name}",
                hint=did_you_mean(name, spec.ops) + f"it maps {', '.join(spec.ops)}",
            )


def _check_dtypes(spec: BackendSpec, dtypes: Sequence[str]) -> None:
    for dtype in dtypes:
        if dtype not in DTYPES:
            raise UsageError(
                f"--dtype {dtype}: no such dtype",
                hint=did_you_mean(dtype, DTYPES) + f"the dtypes: {', '.join(DTYPES)}",
            )
        if dtype not in spec.dtypes:
            raise UsageError(
                f"--dtype {dtype}: backend {spec.name} does not take {dtype}",
                hint=f"its spec's dtypes: {', '.join(spec.dtypes)}",
            )


def draw_cases(
    catalog: Catalog, plan: Sequence[tuple[str, str, tuple[int, ...]]], seed: int, per_rank: int
) -> tuple[list[Case], list[tuple[str, str, int]]]:
    """Up to ``per_rank`` cases per (op, dtype, rank) of ``plan``, and the (op, dtype,
    rank)s of which none could be drawn in :data:`ATTEMPTS` proposals per case."""
    cases: list[Case] = []
    undrawn = []
    for op, dtype, ranks in plan:
        for rank in ranks:
            rng = np.random.default_rng([seed, zlib.crc32(f"{op}/{dtype}/{rank}".encode())])
            found = 0
            for _ in range(ATTEMPTS * per_rank):
                if found == per_rank:
                    break
                draft = Draft(NumpyChoices(rng), dtype, rank=rank, prefix=f"c{len(cases)}_")
                statement = draft.add(catalog[op])
                if statement is not None and statement.outputs[0].type.rank == rank:
                    cases.append(Case(op, dtype, rank, statement, random_inputs(statement.params, rng)))
                    found += 1
            if not found:
                undrawn.append((op, dtype, rank))
    return cases, undrawn


def choose(cases: Sequence[Case], refused: dict[str, str], per_rank: int) -> list[Case]:
    """``per_rank`` cases of each (op, dtype, rank): those the spec takes first, in the
    order drawn, then those it refuses (reported as not applicable)."""
    groups: dict[tuple[str, str, int], list[Case]] = {}
    for c in cases:
        groups.setdefault((c.op, c.dtype, c.rank), []).append(c)
    out = []
    for group in groups.values():
        taken = [c for c in group if c.key not in refused] + [c for c in group if c.key in refused]
        out += sorted(taken[:per_rank], key=group.index)
    return out


# ------------------------------------------------------------------ running


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
    from byoc.generator.partition import why_not_supported
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
