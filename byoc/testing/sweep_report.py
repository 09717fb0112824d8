"""The result of a sweep: an outcome per case, counted per (op, dtype) or per rank, as
a table or JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

PASSED, FAILED, NOT_APPLICABLE = "passed", "failed", "not applicable"


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
