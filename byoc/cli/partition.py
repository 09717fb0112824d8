"""``byoc partition`` and ``byoc dot``: see and draw what runs where."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from ..errors import UsageError

PARTITION_EPILOG = """\
examples:
  byoc partition examples/guide_plain_graph.graph --backend ccompiler
  byoc partition g.graph --backend engine --backend json   # engine first, then json
  byoc partition model.onnx --backend ccompiler,json       # the same as two --backend
  byoc partition model.onnx --backend ccompiler,fused --explain  # why each op went where

Each op goes to the first backend, in --backend order, whose spec supports it
(op, dtypes, rank, broadcasting, attributes); ops no backend takes stay on the
host. Neighbouring ops of one backend merge into the largest regions that create
no cycle through the host. Regions already written as @backend { ... } are kept.
The output is DSL with explicit regions: edit it, and `byoc run` the result.
With --explain, it says instead where each op went and why each backend before
that one did not take it (a mapping it lacks, a dtype, a rank, a broadcast, a
`when:` condition with its values), and each pattern whose ops matched but that
was not taken, with why.
An ONNX model's weights print as references to MODEL.npz, the weights file that
`byoc import MODEL.onnx` writes (the same digest).
"""

DOT_EPILOG = """\
examples:
  byoc dot examples/guide_whole_graph.graph                      # DOT on stdout
  byoc dot examples/guide_plain_graph.graph --backend ccompiler -o guide.svg
  byoc dot g.graph -o g.png

One colour per backend, a cluster per region, tensor types on the edges. A file
with several graphs gives one picture (one digraph) that shows each graph in a
cluster of its own, labelled with its name. SVG and PNG need Graphviz's `dot` (Debian/Ubuntu: apt-get install graphviz; macOS: brew
install graphviz); .dot output does not.
"""


def add_commands(sub, parents) -> None:
    from .gen import add_graph_arguments

    p = sub.add_parser(
        "partition",
        parents=parents,
        help="print a graph with its automatic backend regions, as DSL",
        description="Annotate, merge and partition a graph over the given backends, and print it as DSL.",
        epilog=PARTITION_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_graph_arguments(p)
    add_explain_argument(p)
    p.set_defaults(run=_cmd_partition)

    d = sub.add_parser(
        "dot",
        parents=parents,
        help="draw a (partitioned) graph with Graphviz",
        description="Draw a graph, partitioned over --backend when given, as DOT, SVG or PNG.",
        epilog=DOT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_graph_arguments(d)
    d.add_argument(
        "-o", "--output", metavar="FILE", help="out.dot, out.svg or out.png (default: DOT on stdout)"
    )
    d.set_defaults(run=_cmd_dot)


def add_explain_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--explain",
        action="store_true",
        help="say for every op which backend took it and, for each backend before it in "
        "--backend order, why that one did not (and which of its patterns almost matched)",
    )


def explanation(args: argparse.Namespace, program, catalog) -> str:
    """The ``--explain`` text of partitioning ``program`` over ``--backend``."""
    from ..api import backend_loader
    from ..building import explain_over

    if not args.backend:
        raise UsageError("--explain needs --backend", hint="it explains the automatic partitioning over them")
    return explain_over(program, args.backend, backend_loader(args.spec_path, catalog), catalog)


def _parsed(args: argparse.Namespace, catalog):
    from ..api import language_of, parse_file
    from .onnx_import import shapes_of

    language = language_of(args.file, args.source_language)
    program = parse_file(
        args.file, language, catalog=catalog, spec_path=args.spec_path, shapes=shapes_of(args)
    )
    if args.option:
        raise UsageError("--option does not change partitioning", hint="pass options to gen, build or run")
    return program


def _partitioned(args: argparse.Namespace, catalog):
    from ..api import backend_loader
    from ..building import partition_over

    program = _parsed(args, catalog)
    if args.backend:
        program = partition_over(program, args.backend, backend_loader(args.spec_path, catalog), catalog)
    return program


def _cmd_partition(args: argparse.Namespace) -> int:
    from ..api import load_catalog, print_program

    if not args.backend:
        raise UsageError("name at least one --backend to partition for", hint="`byoc backends` lists them")
    catalog = load_catalog(spec_path=args.spec_path)
    if args.explain:
        sys.stdout.write(explanation(args, _parsed(args, catalog), catalog))
        return 0
    sys.stdout.write(print_program(_partitioned(args, catalog), "graph"))
    return 0


def _cmd_dot(args: argparse.Namespace) -> int:
    from ..api import backend_loader, load_catalog
    from ..atomic import write_file
    from ..generator.dot import dot_program
    from ..generator.lowering import lower

    catalog = load_catalog(spec_path=args.spec_path)
    program = _partitioned(args, catalog)
    has_regions = any(n.callee is not None for fn in program.functions for n in fn.nodes)
    if has_regions:  # show the exported symbols the regions get
        lowered = lower(program, backend_loader(args.spec_path, catalog), catalog)
        program = type(program)(lowered.hosts)
    text = dot_program(program)
    out = args.output
    if out is None:
        sys.stdout.write(text)
        return 0
    suffix = out.rsplit(".", 1)[-1].lower() if "." in out else ""
    if suffix in ("dot", "gv"):
        write_file(out, text)
    elif suffix in ("svg", "png"):
        dot = shutil.which("dot")
        if dot is None:
            raise UsageError(
                f"writing {out} needs Graphviz's `dot`, which is not installed",
                hint="install it (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz), "
                "or write DOT with -o out.dot",
            )
        proc = subprocess.run([dot, f"-T{suffix}"], input=text.encode(), capture_output=True, timeout=120)
        if proc.returncode != 0:
            raise UsageError(f"dot failed: {proc.stderr.decode(errors='replace').strip()}")
        write_file(out, proc.stdout)
    else:
        raise UsageError(
            f"cannot tell the picture format of {out!r}", hint="use a .dot, .svg or .png file name"
        )
    sys.stdout.write(f"wrote {out}\n")
    return 0
