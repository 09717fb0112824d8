"""The table of ONNX ops, ``ops.yaml``: which handler imports each ONNX op type and
which catalog ops it emits (:class:`OnnxOp`, one row).

An op of a user catalog names the ONNX op that imports as it in its ``onnx:`` key,
read as a row of the same table (:func:`onnx_row`, :meth:`byoc.catalog.OnnxImport.row`,
kind ``own_op``) and looked up first; the table must not have that ONNX op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..catalog import Catalog, OnnxImport


@dataclass(frozen=True)
class OnnxOp:
    """One row of ops.yaml: the handler ``kind``, the catalog ``op`` it emits and
    the further ops of its ``roles``; ``attrs`` and ``axes_input_since`` as documented there."""

    kind: str
    op: str | None = None
    roles: Mapping[str, str] = field(default_factory=dict)
    attrs: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    axes_input_since: int = 1
    fixed: Mapping[str, float | str] = field(default_factory=dict)
    """Attributes that the ONNX op fixes: of the catalog ``op`` (HardSwish's hard_sigmoid
    slope), or of the ONNX op whose semantics it has (Upsample's, as a Resize)."""


EXACT_DEFAULTS = ("attributed", "own_op")
"""The kinds whose ``attrs`` defaults keep their YAML type (a bool, a string, an int):
the catalog attribute's; the other kinds' are floats."""


def onnx_row(name: str, row: Mapping) -> OnnxOp:
    """One row of ops.yaml (the ONNX op ``name``'s), or a user op's ``onnx:`` key
    as one (:meth:`byoc.catalog.OnnxImport.row`): as the importer takes it."""
    attrs = {
        k: (v[0], v[1] if row["kind"] in EXACT_DEFAULTS else float(v[1]))
        for k, v in row.get("attrs", {}).items()
    }
    found = OnnxOp(
        row["kind"],
        row.get("op"),
        row.get("roles", {}),
        attrs,
        row.get("axes_input_since", 1),
        {k: v if isinstance(v, str) else float(v) for k, v in row.get("fixed", {}).items()},
    )
    from .handlers import KINDS

    assert found.kind in KINDS, f"ops.yaml: {name} has an unknown kind {row['kind']!r}"
    return found


@cache
def onnx_ops() -> dict[str, OnnxOp]:
    """ops.yaml, read once per process: ONNX op type -> its row. The parsed table is kept
    in byoc's disk cache, keyed by the file's text (ruamel's pure-Python parser took 0.7 s
    of every import of an ONNX model)."""
    from ruamel.yaml import YAML
    from ruamel.yaml import __version__ as ruamel_version

    from ..disk_cache import cached, entry_key

    text = (Path(__file__).parent / "ops.yaml").read_text(encoding="utf-8")
    table = cached(
        "yaml",
        entry_key("onnx ops.yaml", ruamel_version, text),
        # pure: with ruamel.yaml.clib installed, typ='safe' reads with YAML 1.1's resolver
        lambda: YAML(typ="safe", pure=True).load(text),
        expect=dict,
    )
    return {name: onnx_row(name, row) for name, row in table.items()}


def own_rows(catalog: Catalog) -> dict[tuple[str, str], list[tuple[OnnxImport, OnnxOp]]]:
    """The ONNX ops that ops of ``catalog`` import (their ``onnx:`` keys): (domain, op
    type) -> each op's key and its row, in catalog order."""
    found: dict[tuple[str, str], list[tuple[OnnxImport, OnnxOp]]] = {}
    for name, opdef in catalog.items():
        source = opdef.onnx
        if source is not None:
            row = onnx_row(source.type, source.row(name))
            found.setdefault((source.domain, source.type), []).append((source, row))
    return found


def onnx_domain(domain: str) -> str:
    """ONNX's default domain as the empty string, as it is most often written."""
    return "" if domain == "ai.onnx" else domain
