"""The ``byoc`` command line.

Every subcommand lives in a small function; errors derived from ByocError print
as located messages with a caret excerpt (no traceback) and exit with status 2.
``--debug`` shows the traceback as well. ``--spec-path DIR`` (repeatable) works on
every command, before or after the command name. The spec commands (``check``,
``backends``) live in :mod:`byoc.cli.spec_commands`, ``ops`` in :mod:`byoc.cli.ops`.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from .. import __version__
from ..api import LANGUAGES, PRINTED_LANGUAGES
from ..errors import ByocError, UsageError
from .cache import add_commands as add_cache_commands
from .completion import add_commands as add_completion_commands
from .completion import completes_files
from .examples import add_commands as add_examples_commands
from .gen import add_commands as add_gen_commands
from .logs import add_verbosity_arguments, logging_to_stderr, verbosity
from .onnx_import import add_commands as add_import_commands
from .onnx_import import add_shape_argument
from .ops import add_commands as add_ops_commands
from .partition import add_commands as add_partition_commands
from .run import add_commands as add_run_commands
from .spec_commands import add_commands as add_spec_commands
from .sweep import add_commands as add_sweep_commands

EPILOG = """\
examples (`byoc examples -o .` copies the examples/ they name into this directory):
  byoc parse examples/guide_whole_graph.graph
  byoc parse examples/guide_subgraph.examplejson --to graph
  byoc ops
  byoc backends
  byoc check spec/backends/
  byoc --spec-path my_specs backends          # also find my_specs/<backend>.yaml
  byoc import model.onnx -o models            # models/model.graph + models/model.npz
  byoc run model.onnx --backend fused         # an ONNX model directly (imported in memory)
  byoc cache info                             # the compile cache: place, size, bound

spec search path: the --spec-path directories, then $BYOC_SPEC_PATH (separated by
':'), then the shipped spec/backends/. The first <name>.yaml found wins. The ops.yaml
of each directory extends the op catalog (spec/ops.yaml) for every command.

verbosity: -v says each stage with its time on standard error, -vv also the
compiler commands and cache use; -q leaves errors only. byoc logs through Python's
logging module (logger "byoc") for programs that embed it.

exit status: 0 on success, 2 on bad input (a located error is printed)
"""

SPEC_PATH_HELP = (
    "also search DIR for backend specs (<name>.yaml), before $BYOC_SPEC_PATH and the shipped ones, "
    "and extend the op catalog by DIR/ops.yaml; repeatable"
)


def _common_parent() -> argparse.ArgumentParser:
    """The options that every subcommand accepts after its name: --spec-path, -v, -q."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--spec-path", dest="spec_path", action="append", default=[], metavar="DIR", help=SPEC_PATH_HELP
    )
    add_verbosity_arguments(parent)
    return parent


def parser() -> argparse.ArgumentParser:
    """byoc's argument parser (every command); ``byoc completion`` reads it."""
    top = argparse.ArgumentParser(
        prog="byoc",
        description=(
            "Spec-driven code generation for ML compilers' bring-your-own-codegen flow: "
            "describe a backend in YAML, write graphs in a small DSL or ExampleJSON, and "
            "generate, build and check C, C++ and JSON artifacts."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"byoc {__version__}")
    top.add_argument("--debug", action="store_true", help="show Python tracebacks for errors")
    top.add_argument(
        "--spec-path",
        dest="global_spec_path",
        action="append",
        default=[],
        metavar="DIR",
        help=SPEC_PATH_HELP,
    )
    add_verbosity_arguments(top, dest_prefix="global_")
    sub = top.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    parents = [_common_parent()]

    p = sub.add_parser(
        "parse",
        parents=parents,
        help="parse and validate a graph, then print it normalised",
        description=(
            "Parse a .graph (DSL) or .examplejson file, or import an .onnx model, check it "
            "against the op catalog (names, cycles, shapes, dtypes), and print it in normal "
            "form. With --to, convert between the languages (an ONNX model prints as DSL)."
        ),
        epilog=(
            "examples:\n"
            "  byoc parse examples/guide_whole_graph.graph\n"
            "  byoc parse examples/tvm_external_runtime.examplejson --to graph\n"
            "  cat g.graph | byoc parse - --from graph\n"
            "  byoc parse g.examplejson --spec-path my_specs   # op tokens from my_specs/examplejson.yaml\n"
            "  byoc parse model.onnx --shape x=1,3,32,32       # an ONNX model as DSL (weights: model.npz)\n"
            "\n"
            "ExampleJSON op tokens (add, sub, mul, ...) come from the examplejson backend spec.\n"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    completes_files(
        p.add_argument("file", metavar="FILE", help="the input file; '-' reads standard input (needs --from)")
    )
    p.add_argument(
        "--from",
        dest="source_language",
        choices=LANGUAGES,
        help="the input language (default: from the file extension)",
    )
    p.add_argument(
        "--to",
        choices=PRINTED_LANGUAGES,
        help="the output language (default: the input language; graph for an ONNX model)",
    )
    add_shape_argument(p)
    p.set_defaults(run=_cmd_parse)

    add_ops_commands(sub, parents)
    add_spec_commands(sub, parents)
    add_gen_commands(sub, parents)
    add_run_commands(sub, parents)
    add_partition_commands(sub, parents)
    add_import_commands(sub, parents)
    add_cache_commands(sub, parents)
    add_examples_commands(sub, parents)
    add_completion_commands(sub, parents)
    add_sweep_commands(sub, parents)
    return top


def _cmd_parse(args: argparse.Namespace) -> int:
    from ..api import language_of, parse_file, print_program
    from .onnx_import import shapes_of

    source = language_of(args.file, args.source_language)
    program = parse_file(args.file, source, spec_path=args.spec_path, shapes=shapes_of(args))
    to = args.to or (source if source in PRINTED_LANGUAGES else "graph")
    sys.stdout.write(print_program(program, to, spec_path=args.spec_path))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.spec_path = args.global_spec_path + getattr(args, "spec_path", [])
    try:
        _check_utf8(vars(args))
        if args.spec_path:  # a mistyped --spec-path fails every command, not only those that read specs
            from ..spec import spec_dirs

            spec_dirs(args.spec_path, env=False)
        with logging_to_stderr(verbosity(args)):
            return args.run(args)
    except ByocError as exc:
        if args.debug:
            traceback.print_exc()
        from ..onnx.locations import at_onnx_node

        sys.stderr.write(at_onnx_node(exc).render() + "\n")  # an imported ONNX model's: at its node
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0


def _check_utf8(values: dict[str, object]) -> None:
    """Refuse an argument that is not valid UTF-8 (Python keeps its stray bytes as
    surrogates, ``\udcff``): paths reach generated code, bundles and messages, which
    are UTF-8 text, so one would fail deep inside with a UnicodeEncodeError."""
    for key, value in values.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, (str, os.PathLike)):
                text = os.fspath(item)
                if isinstance(text, str) and not _is_utf8(text):
                    shown = os.fsencode(text).decode("utf-8", "backslashreplace")  # g\xff.graph
                    raise UsageError(
                        f"argument {shown} ({key.replace('_', '-')}) is not valid UTF-8",
                        hint="byoc writes paths into generated code and messages as UTF-8: rename the file",
                    )


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
