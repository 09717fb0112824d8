"""``byoc gen``: write every artifact of a graph for its backends."""

from __future__ import annotations

import argparse
import sys

from ..errors import UsageError

GEN_EPILOG = """\
examples:
  byoc gen examples/guide_whole_graph.graph                 # print the C module
  byoc gen examples/guide_whole_graph.graph -o out/         # write every artifact
  byoc gen examples/tvm_external_runtime.examplejson --backend ccompiler -o out/
  byoc gen g.graph -o out/ --option opt_level=3 --option ccompiler.fast_math=true
  byoc gen model.onnx --backend fused -o out/     # an ONNX model, imported in memory

artifacts: one module per backend (ccompiler.c, engine.cc + its header,
examplejson.examplejson, json.json), and per graph its host graph
(<graph>.graph.json, graph-executor JSON) and host functions (<graph>.host.graph).

A DSL graph offloads the regions it marks with @backend { ... } and, with
--backend, whatever those backends support (automatic partitioning). An ExampleJSON
file offloads each subgraph whole, to --backend (default: examplejson), keeping the
subgraph's name as the exported symbol. Output is written atomically: -o DIR holds
either its old contents or the complete new set, never a partial one.
"""


def add_commands(sub, parents) -> None:
    g = sub.add_parser(
        "gen",
        parents=parents,
        help="generate the C, C++ and JSON artifacts of a graph",
        description="Generate every artifact of a graph: backend modules and host graphs.",
        epilog=GEN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_graph_arguments(g)
    g.add_argument(
        "-o", "--output", metavar="DIR", help="write all artifacts into DIR (default: print the main one)"
    )
    g.set_defaults(run=_cmd_gen)


class _BackendList(argparse.Action):
    """--backend a,b is --backend a --backend b."""

    def __call__(self, parser, namespace, values, option_string=None):
        names = [name.strip() for name in values.split(",")]
        if not all(names):
            parser.error(f"argument --backend: {values!r} names an empty backend")
        getattr(namespace, self.dest).extend(names)


def add_graph_arguments(p: argparse.ArgumentParser) -> None:
    """FILE, --from, --backend, --option and --shape: shared by gen, build, run,
    partition and dot."""
    from ..api import LANGUAGES
    from .completion import completes_files
    from .onnx_import import add_shape_argument

    completes_files(
        p.add_argument(
            "file",
            metavar="FILE",
            help="a .graph, .examplejson or .onnx file ('-' reads standard input, with --from)",
        )
    )
    p.add_argument("--from", dest="source_language", choices=LANGUAGES, help="the input language")
    p.add_argument(
        "--backend",
        action=_BackendList,
        default=[],
        metavar="NAME[,NAME...]",
        help="the backend to offload to (ExampleJSON: default examplejson), repeatable, in order of "
        "preference; `byoc backends` lists them",
    )
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a backend build option, KEY or BACKEND.KEY; typed by the spec (see spec/README.md)",
    )
    add_shape_argument(p)


def parse_options(pairs: list[str]) -> dict[str, str]:
    from ..spec.option_types import split_option_key

    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option {pair!r} is not KEY=VALUE", hint="for example --option opt_level=3")
        split_option_key(key.strip())  # NAME or BACKEND.NAME, before the graph is read
        if key.strip() in out:
            raise UsageError(f"--option {key.strip()} is given twice")
        out[key.strip()] = value
    return out


def _cmd_gen(args: argparse.Namespace) -> int:
    from ..api import backend_loader, language_of, load_catalog, parse_file
    from ..atomic import write_directory
    from ..building import offload
    from ..generator.artifacts import Role
    from ..generator.pipeline import generate
    from .onnx_import import shapes_of

    options = parse_options(args.option)
    catalog = load_catalog(spec_path=args.spec_path)
    loader = backend_loader(args.spec_path, catalog)
    language = language_of(args.file, args.source_language)
    program = parse_file(
        args.file, language, catalog=catalog, spec_path=args.spec_path, shapes=shapes_of(args)
    )
    program = offload(program, language, args.backend, loader, catalog)
    artifacts = generate(program, catalog, loader, options).artifacts
    if args.output is None:
        main = next(a for a in artifacts if a.role is Role.MODULE)
        sys.stdout.write(main.text)
        return 0
    files: dict[str, list] = {}  # a file two backends share (byoc_entry.c) is written once
    for a in artifacts:
        files.setdefault(a.name, []).append(a)
    written = write_directory(args.output, {name: same[0].content for name, same in files.items()})
    for path, same in zip(written, files.values()):
        backends = ", ".join(a.backend for a in same if a.backend)
        sys.stdout.write(f"wrote {path}  ({same[0].role.value}{', ' + backends if backends else ''})\n")
    return 0
