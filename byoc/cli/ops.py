"""``byoc ops``: the op catalog, shipped and the user's, as a table or op by op."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Location, UsageError, close_names

if TYPE_CHECKING:
    from ..catalog import AttrDef, Catalog, OpDef

OPS_EPILOG = """\
examples:
  byoc ops                                 every op: inputs, shape rule, dtypes, attributes
  byoc ops conv relu                       those ops in detail: doc, reference, C expression
  byoc --spec-path my_specs ops            with the ops of my_specs/ops.yaml
  byoc ops --onnx                          every ONNX op byoc imports, and the catalog ops it becomes
  byoc backends                            which backend runs which op

The catalog is the shipped spec/ops.yaml extended by the ops.yaml of each spec
directory: the --spec-path directories, then $BYOC_SPEC_PATH (separated by ':').
A user catalog may add ops and change the doc of shipped ones (an entry with only
`doc:`). When one is on the path, the table gains a `from` column: `byoc` for a
shipped op, else the catalog file that defines it, and `doc: FILE` where a user
catalog changed an op's doc. spec/README.md documents the format.
"""


def add_commands(sub, parents) -> None:
    o = sub.add_parser(
        "ops",
        parents=parents,
        help="list the op catalog",
        description=(
            "List every op of the catalog (spec/ops.yaml and the ops.yaml of each spec directory): "
            "inputs, shape rule, dtypes, attributes. With NAMEs, show those ops in detail."
        ),
        epilog=OPS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    o.add_argument("names", nargs="*", metavar="NAME", help="show these ops in detail")
    o.add_argument(
        "--onnx",
        action="store_true",
        help="list the ONNX ops that byoc imports (byoc/onnx/ops.yaml): how each is handled "
        "and the catalog ops it becomes",
    )
    o.set_defaults(run=_cmd_ops)


def _cmd_ops(args: argparse.Namespace) -> int:
    from ..api import load_catalog

    if args.onnx:
        if args.names:
            raise UsageError("--onnx lists every ONNX op; it takes no op names", hint="byoc ops --onnx")
        sys.stdout.write(onnx_table())
        return 0
    catalog = load_catalog(spec_path=args.spec_path)
    if args.names:
        for name in args.names:
            sys.stdout.write(_describe(_op(catalog, name), catalog))
        return 0
    extended = bool(catalog.user_files)
    rows = [("op", "inputs", "shape rule", "dtypes") + (("from",) if extended else ()) + ("attributes",)]
    for op in catalog.values():
        attrs = ", ".join(_attr_text(a) for a in op.attrs) or "-"
        origin = (_origin(op, catalog),) if extended else ()
        rows.append((op.name, op.arity_text(), op.shape_rule, ", ".join(op.dtypes)) + origin + (attrs,))
    sys.stdout.write(_table(rows))
    return 0


def _table(rows: list[tuple[str, ...]]) -> str:
    """Rows as columns padded to their widest cell."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() + "\n" for row in rows)


def onnx_table() -> str:
    """Every ONNX op of byoc/onnx/ops.yaml, sorted: its handler (the row's ``kind``, a
    handler of byoc's ONNX import) and the catalog ops it emits (``op``, then the
    ``roles``); ops that byoc only folds at import say so."""
    from ..onnx.ops import onnx_ops

    rows = [("onnx op", "handler", "catalog ops")]
    for name, row in sorted(onnx_ops().items()):
        if row.kind == "folded":
            rows.append((name, row.kind, "folded at import (a model input's value specialises the model)"))
            continue
        ops = [row.op] if row.op else []
        ops += [op for op in row.roles.values() if op not in ops]
        rows.append((name, row.kind, ", ".join(ops) or "- (an alias of its input)"))
    return _table(rows)


def _op(catalog: Catalog, name: str) -> OpDef:
    if name not in catalog:
        close = close_names(name, catalog)
        raise UsageError(
            f"unknown op {name!r}",
            hint=f"did you mean {close[0]!r}?" if close else "`byoc ops` lists the catalog",
        )
    return catalog[name]


def _origin(op: OpDef, catalog: Catalog) -> str:
    """``byoc`` for a shipped op, else the user catalog defining it; then where its doc came from."""
    from ..spec.search import display_path

    user = {f.path for f in catalog.user_files}
    text = display_path(op.loc.file) if op.loc is not None and op.loc.file in user else "byoc"
    if op.name in catalog.doc_locations:
        text += f"; doc: {display_path(catalog.doc_locations[op.name].file)}"
    return text


def _describe(op: OpDef, catalog: Catalog) -> str:
    lines = [f"{op.name}: defined at {_place(op.loc)}", f"  doc:        {op.doc or '-'}"]
    if op.name in catalog.doc_locations:
        lines[-1] += f"  (from {_place(catalog.doc_locations[op.name])})"
    lines += [
        f"  inputs:     {op.arity_text()}",
        f"  shape rule: {op.shape_rule}",
        f"  dtypes:     {', '.join(op.dtypes)}",
        f"  attributes: {', '.join(_attr_text(a) for a in op.attrs) or '-'}",
        f"  reference:  {f'numpy {op.numpy}' if op.numpy is not None else f'kernel {op.kernel}'}",
        f"  C:          {op.c or '-'}",
    ]
    return "\n".join(lines) + "\n"


def _place(loc: Location | None) -> str:
    """``file:line``; the shipped catalog as ``spec/ops.yaml:line (shipped with byoc)``."""
    from ..spec import SHIPPED_OPS

    if loc is None:
        return "(built in code)"
    if Path(loc.file).resolve() == SHIPPED_OPS.resolve():
        return f"spec/ops.yaml:{loc.line} (shipped with byoc)"
    return f"{loc.file}:{loc.line}"


def _attr_text(adef: AttrDef) -> str:
    """``name: type = default`` as the DSL spells the default, then ``(choice|...)``."""
    from ..value_types import value_text

    def spelled(value) -> str:
        return f'"{value}"' if isinstance(value, str) else value_text(value)

    text = f"{adef.name}: {adef.type}"
    if adef.default is not None:
        text += f" = {spelled(adef.default)}"
    if adef.choices:
        text += f" ({'|'.join(map(spelled, adef.choices))})"
    return text
