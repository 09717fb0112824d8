"""What a sweep covers: the (op, dtype, rank)s a spec maps, and the cases drawn for them
(one-op statements with random inputs, seeded per op, dtype, rank and number)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from byoc.errors import UsageError, did_you_mean
from byoc.ir import DTYPES

from .choices import NumpyChoices
from .draft import Draft
from .random_values import random_inputs
from .statements import Statement

if TYPE_CHECKING:
    from byoc.catalog import Catalog
    from byoc.spec.backend import BackendSpec

ATTEMPTS = 40
"""Proposals drawn per wanted case before the sweep gives up on an (op, dtype, rank):
a rank the op's shape rule cannot produce (a convolution of rank 1) is never drawn."""


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
