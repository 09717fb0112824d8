"""The spec commands of the ``byoc`` command line: ``byoc check`` and ``byoc backends``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import ByocError
from ..value_types import value_text
from .completion import completes_files

if TYPE_CHECKING:
    from ..spec.backend import BackendSpec

CHECK_EPILOG = """\
examples:
  byoc check spec/backends/                validate the shipped backends
  byoc check spec/ops.yaml                 validate an op catalog
  byoc check my_specs/                     every *.yaml and <name>/<name>.yaml of a directory
  byoc check                               the catalog and every spec on the search path
  byoc check --no-compile my_specs/        validate without compiling any spec's C

A file with a `kind:` or `name:` key is a backend spec, checked against the op
catalog of its directory and the search path; `ops.yaml` outside the shipped spec/
is a spec directory's op catalog, which may add ops and change the doc of shipped
ones; any other file is a complete op catalog. Each valid file prints `<file>: ok`;
each invalid one prints its first error, located at file:line:column with the
offending line. A backend spec that lists C files (`support:`) or has a `probe:` has
them compiled as byoc compiles them, once per spec version (a compiler error is located
in the file), when the libraries it requires are installed; the `ok` line says which.
spec/README.md documents both formats.

exit status: 0 if every file is valid, 2 otherwise
"""

BACKENDS_EPILOG = """\
examples:
  byoc backends                            list every backend found
  byoc backends ccompiler                  details: compile settings, options, op mapping
  byoc --spec-path my_specs backends       include the backends of my_specs/*.yaml

Backends are found in the --spec-path directories, then in $BYOC_SPEC_PATH
(separated by ':'), then in the shipped spec/backends/; the first <name>.yaml wins.
Below the table, each library a backend requires (its spec's `requires:`) is shown
as found, with where, or as missing, with how to install it.
"""


def add_commands(sub: argparse._SubParsersAction, parents: Sequence[argparse.ArgumentParser]) -> None:
    c = sub.add_parser(
        "check",
        parents=list(parents),
        help="validate backend specs and op catalogs",
        description="Validate spec files: backend specs (those of spec/backends/) and op catalogs (spec/ops.yaml).",
        epilog=CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    completes_files(
        c.add_argument("specs", nargs="*", metavar="SPEC", help="a spec file, or a directory of them")
    )
    c.add_argument(
        "--no-compile",
        dest="compile",
        action="store_false",
        help="validate only: do not compile a backend spec's `support:` C files or its `probe:`",
    )
    c.set_defaults(run=cmd_check)

    b = sub.add_parser(
        "backends",
        parents=list(parents),
        help="list the backends found on the spec search path",
        description=(
            "List every backend spec on the search path: its codegen kind, dtypes, ranks and "
            "supported ops. With a NAME, show that backend in detail."
        ),
        epilog=BACKENDS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    b.add_argument("name", nargs="?", metavar="NAME", help="show one backend in detail")
    b.set_defaults(run=cmd_backends)


def cmd_check(args: argparse.Namespace) -> int:
    from ..spec import check_spec, spec_files

    status = 0
    reported: set[str] = set()  # a bad catalog fails every spec checked against it: said once
    for path in spec_files(args.specs, args.spec_path):
        try:
            _, spec = check_spec(path, spec_path=args.spec_path)
            compiled = support_note(spec) if spec is not None and args.compile else ""
        except ByocError as exc:
            text = exc.render()
            if text not in reported:
                sys.stderr.write(text + "\n")
                reported.add(text)
            status = 2
        else:
            sys.stdout.write(f"{path}: ok{compiled}\n")
    return status


def support_note(spec: BackendSpec) -> str:
    """Compile the C a spec keeps outside its modules as byoc does (the C files of its
    ``support:`` list, and its ``probe:``'s source), a BuildError located in the file
    otherwise, and say so after the ``ok``; or say why they were not compiled (a library
    the spec requires is missing). Empty for a spec with neither."""
    from ..runtime.build import support_objects
    from ..runtime.probe import probe_function

    sources = [f.name for f in spec.support if not f.is_header]
    parts = [f"its support C ({', '.join(sources)})"] if sources else []
    if spec.probe is not None:
        parts.append("its probe")
    if not parts:
        return ""
    what = " and ".join(parts)
    why = spec.missing_library()
    if why is not None:
        return f", {what} not compiled: {why}"
    if sources:
        support_objects(spec, spec.template_values())
    if spec.probe is not None:
        probe_function(spec)
    return f", {what} compiled"


def cmd_backends(args: argparse.Namespace) -> int:
    from ..spec import find_backends, load_backend, load_catalog_on_path
    from ..spec.search import load_backend_path

    catalog = load_catalog_on_path(args.spec_path)
    if args.name is not None:
        sys.stdout.write(describe(load_backend(args.name, args.spec_path, catalog=catalog)))
        return 0
    found = find_backends(args.spec_path)
    rows = [("backend", "kind", "dtypes", "ranks", "ops")]
    libraries: list[str] = []
    status = 0
    for path in found.values():
        try:
            spec = load_backend_path(path, catalog=catalog)
        except ByocError as exc:
            sys.stderr.write(exc.render() + "\n")
            status = 2
            continue
        rows.append(
            (spec.name, spec.kind.name, ", ".join(spec.dtypes), ranks_text(spec.ranks), ", ".join(spec.ops))
        )
        libraries += (f"  {spec.name}: {line}" for line in requirement_lines(spec))
    _table(rows)
    if libraries:
        sys.stdout.write("\nlibraries:\n" + "\n".join(libraries) + "\n")
    return status


def requirement_lines(spec: BackendSpec) -> list[str]:
    """One line per library ``spec`` requires: found (where) or missing (why, and how to install)."""
    from ..spec.requirements import NotFound

    lines = []
    for req in spec.requires.values():
        try:
            linkage = req.locate()
        except NotFound as exc:
            lines.append(f"{req.name}: missing ({exc}); install: {req.install}")
        else:
            where = [*linkage.files, *(f"headers in {d}" for d in linkage.include_dirs)]
            lines.append(f"{req.name}: found ({'; '.join(where) or 'in the default directories'})")
    return lines


def probe_text(spec: BackendSpec) -> str:
    """What ``spec``'s probe says about this machine: which of its dtypes it computes here."""
    from ..runtime.probe import machine_computes

    assert spec.probe is not None
    if spec.missing_library() is not None:
        answer = "unknown here (a required library is missing)"
    else:
        here = [d for d in spec.probe.dtypes if machine_computes(spec, d)]
        answer = f"{', '.join(here)} on this machine" if here else "none on this machine"
    return f"{', '.join(spec.probe.dtypes)} where the machine computes them: {answer}\n    ({spec.probe.doc})"


def describe(spec: BackendSpec) -> str:
    """A readable account of one backend spec (``byoc backends NAME``)."""
    lines = [f"{spec.name}: {spec.kind.name} backend, from {spec.source}"]
    if spec.description:
        lines.append(f"  {spec.description}")
    lines += [
        f"  symbol prefix: {spec.symbol_prefix}",
        f"  dtypes:        {', '.join(spec.dtypes)}",
        f"  ranks:         {ranks_text(spec.ranks)}",
    ]
    if spec.probe is not None:
        lines.append(f"  probed:        {probe_text(spec)}")
    comp = spec.compile
    if comp.compiled:
        flags = " ".join(comp.render_flags(spec.template_values()))
        lines.append(f"  compile:       {comp.compiler} -std={comp.std} {flags}  ({comp.language})")
        if comp.large_flags:
            large = " ".join(comp.large_flags)
            lines.append(f"                 and {large} for a module source above {comp.large_above:,} bytes")
    else:
        lines.append(f"  compile:       nothing; byoc.runtime interprets the {comp.language} artifact")
    if spec.requires:
        lines.append("  requires:")
        for req, status in zip(spec.requires.values(), requirement_lines(spec)):
            found_from = ", ".join(f"{k}: {v}" for k, v in req.where.items())
            lines.append(f"    {status}")
            lines.append(
                f"      headers {', '.join(req.headers) or 'none'}; libraries {', '.join(req.libraries) or 'none'}; from {found_from}"
            )
            if req.environment:
                given = ", ".join(f"{k}={v}" for k, v in req.environment.items())
                lines.append(f"      environment (set before it loads, unless already set): {given}")
    lines.append("  options:" + ("" if spec.options else "       none"))
    for o in spec.options.values():
        value = value_text(o.default)
        choices = f" (one of {', '.join(map(value_text, o.choices))})" if o.choices else ""
        choices += f" ({o.range_text()})" if o.range_text() else ""
        lines.append(f"    {o.name}: {o.type} = {value}{choices}" + (f"  {o.doc}" if o.doc else ""))
    lines.append("  ops:")
    for op, b in spec.ops.items():
        lines.append(f"    {op}: {b.describe()}")
    if spec.patterns:
        lines.append("  patterns (composites, matched largest first):")
        lines += [f"    {name}: {p.describe()}" for name, p in spec.patterns.items()]
    return "\n".join(lines) + "\n"


def ranks_text(ranks: Sequence[int]) -> str:
    """``0-8`` for a run of ranks, ``1, 2, 4`` otherwise."""
    if len(ranks) > 2 and list(ranks) == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(map(str, ranks))


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        sys.stdout.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() + "\n")
