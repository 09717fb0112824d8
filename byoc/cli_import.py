"""``byoc import``: an ONNX model as a graph (``DIR/NAME.graph``) and its weights
(``DIR/NAME.npz``); see :mod:`byoc.onnx_import`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_commands(sub, parents) -> None:
    p = sub.add_parser(
        "import",
        parents=parents,
        help="import an ONNX model as a graph and a weights file",
        description=(
            "Read an ONNX model, fold what is constant (Shape, Constant, ConstantOfShape, ...), map "
            "its ops onto the op catalog, and write DIR/NAME.graph with its weights in DIR/NAME.npz, "
            "which the graph names with its SHA-256 digest. Needs the onnx package: "
            "pip install 'byoc[onnx]'."
        ),
        epilog=(
            "examples:\n"
            "  byoc import resnet50.onnx -o models      # models/resnet50.graph + models/resnet50.npz\n"
            "  byoc import model.onnx --shape input=1,3,224,224   # fix a dynamic dimension\n"
            "  byoc run models/resnet50.graph --backend fused\n"
            "  byoc run resnet50.onnx --backend fused    # the same, without the import step\n"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", metavar="MODEL", help="the .onnx file")
    p.add_argument("-o", "--output", metavar="DIR", default=".", help="where to write (default: .)")
    add_shape_argument(p)
    p.set_defaults(run=_cmd_import)


def add_shape_argument(p: argparse.ArgumentParser) -> None:
    """--shape NAME=DIMS: every command that reads a model takes it."""
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=DIMS",
        help="an ONNX model's input shape, e.g. input=1,3,224,224, to fix its dynamic dimensions; repeatable",
    )


def shapes_of(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """The --shape arguments as ``{input: dims}``."""
    from .onnx_import import parse_shapes

    return parse_shapes(args.shape)


def _cmd_import(args: argparse.Namespace) -> int:
    from .api import parse
    from .atomic import write_file
    from .errors import UsageError
    from .onnx_import import import_onnx

    shapes = shapes_of(args)
    out = Path(args.output)
    if not out.is_dir():
        raise UsageError(f"-o {out}: not a directory", hint="create it first")
    stem = Path(args.model).stem
    imported = import_onnx(args.model, shapes, weights_file=f"{stem}.npz")
    graph, weights = out / f"{stem}.graph", out / f"{stem}.npz"
    write_file(weights, imported.weights)  # first: the graph names the weights' digest
    # checked by the parser like any graph before it is written: an importer mistake is
    # an error here, not a broken model.graph
    parse(imported.text, file=str(graph), spec_path=args.spec_path)
    write_file(graph, imported.text)
    sys.stdout.write(
        f"wrote {graph} ({imported.text.count(chr(10))} lines) and {weights} "
        f"({imported.entries} array(s), {len(imported.weights):,} bytes)\n"
    )
    return 0
