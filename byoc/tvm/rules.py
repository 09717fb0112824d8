"""The rule table of TVM relax's front end, ``relax_ops.yaml``: which byoc catalog op a
relax op becomes, and how its attributes translate. No tvm import: the rules are data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

OUT_SHAPE = "$out_shape"
"""An attribute source meaning the shape of the relax result (reshape's new shape)."""
TRANSPOSE_OP = "relax.permute_dims"
"""What a ``transposed`` input must be."""


@dataclass(frozen=True, slots=True, eq=False)
class Rule:
    """One row of ``relax_ops.yaml`` (its header says what each key means); rules are
    read once, so one is equal only to itself."""

    relax: str
    op: str
    name: str
    attrs: Mapping[str, str] = field(default_factory=dict)
    require: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    transposed: frozenset[int] = frozenset()
    bias: int | None = None
    item: int | None = None


def _rule(row: Mapping) -> Rule:
    require = {
        k: tuple(map(str, v)) if isinstance(v, list) else (str(v),) for k, v in row.get("require", {}).items()
    }
    return Rule(
        relax=row["relax"],
        op=row["op"],
        name=row.get("name", row["op"]),
        attrs=dict(row.get("attrs", {})),
        require=require,
        transposed=frozenset(row.get("transposed", ())),
        bias=row.get("bias"),
        item=row.get("item"),
    )


@cache
def rules() -> tuple[Rule, ...]:
    """Every rule, in the table's order."""
    from ruamel.yaml import YAML

    # pure: with ruamel.yaml.clib installed, typ='safe' reads with YAML 1.1's resolver
    table = YAML(typ="safe", pure=True).load(
        (Path(__file__).parent / "relax_ops.yaml").read_text(encoding="utf-8")
    )
    return tuple(_rule(row) for row in table["rules"])


def rules_for(relax_op: str, item: int | None = None) -> tuple[Rule, ...]:
    """The rules of one relax op, in order of preference: of its result, or of item
    ``item`` of its tuple result."""
    return tuple(r for r in rules() if r.relax == relax_op and r.item == item)
