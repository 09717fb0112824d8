"""``byoc import``: an ONNX model as a graph (``DIR/NAME.graph``) and its weights
(``DIR/NAME.npz``); see :mod:`byoc.onnx.model_import`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_commands(sub, parents) -> None:
    from .completion import completes_files

    p = sub.add_parser(
        "import",
        parents=parents,
        help="import an ONNX model as a graph and a weights file",
        description=(
            "Read an ONNX model, fold what is constant (Shape, Constant, ConstantOfShape, ...), map "
            "its ops onto the op catalog, and write DIR/NAME.graph with its weights in DIR/NAME.npz, "
            "which the graph names with its SHA-256 digest. Needs the onnx package: "
            "pip install 'byoc-codegen[onnx]'."
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
    completes_files(p.add_argument("model", metavar="MODEL", help="the .onnx file"))
    p.add_argument(
        "-o", "--output", metavar="DIR", default=".", help="where to write, created when missing (default: .)"
    )
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
    if not args.shape:  # a graph's run: no ONNX import to load
        return {}
    from ..onnx.model_import import parse_shapes

    return parse_shapes(args.shape)


def _cmd_import(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..onnx.model_import import import_onnx, parse_imported

    shapes = shapes_of(args)
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise UsageError(
            f"-o {out} exists and is not a directory", hint="name a directory (it is created when missing)"
        )
    stem = Path(args.model).stem
    imported = import_onnx(args.model, shapes, weights_file=f"{stem}.npz", spec_path=args.spec_path)
    graph, weights = out / f"{stem}.graph", out / f"{stem}.npz"
    # checked by the parser like any graph before anything is written (the weights read
    # from memory): an importer mistake is an error here, not a broken model.graph
    parse_imported(imported, str(graph), spec_path=args.spec_path)
    try:  # only now, when there is something to write: a failed import leaves no directory behind
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"-o {out}: cannot create the directory: {exc.strerror or exc}") from None
    write_together([(weights, imported.weights), (graph, imported.text.encode("utf-8"))])
    sys.stdout.write(
        f"wrote {graph} ({imported.text.count(chr(10))} lines) and {weights} "
        f"({imported.entries} array(s), {len(imported.weights):,} bytes)\n"
    )
    return 0


def write_together(outputs: list[tuple[Path, bytes]]) -> None:
    """Write every ``(path, data)`` of ``outputs`` or none: each is written in full to a
    hidden temporary sibling first (a full disk or an unwritable directory fails there,
    leaving the old files as they were), then they are renamed into place in order. If
    a rename fails, the files already renamed get their old content back. A kill
    between two renames can still leave the first file new and the second old (the
    graph's digest then refuses the new weights, as it must)."""
    import os
    import shutil
    import tempfile

    from ..errors import UsageError

    for target, _ in outputs:
        if target.exists() and not target.is_file():
            what = "Is a directory" if target.is_dir() else "not a regular file (a device, pipe or socket)"
            raise UsageError(f"cannot write {target}: {what}", hint="choose another output directory")
    mask = os.umask(0)
    os.umask(mask)
    staged: list[str] = []
    done: list[tuple[Path, Path | None]] = []  # renamed targets, and a link to their old content
    asides: list[str] = []
    current = outputs[0][0]
    try:
        for target, data in outputs:
            current = target
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            staged.append(tmp)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes it private
        for (target, _), tmp in zip(outputs, staged):
            current, old = target, None
            if target.exists():  # kept aside (a hard link) until every rename is done
                asides.append(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
                old = Path(asides[-1]) / "previous"
                try:
                    os.link(target, old)
                except OSError:  # a file system without hard links: a copy
                    shutil.copy2(target, old)
            os.replace(tmp, target)
            done.append((target, old))
    except OSError as exc:
        for target, old in reversed(done):  # put back what was renamed already
            try:
                if old is None:
                    os.unlink(target)
                else:
                    os.replace(old, target)
            except OSError:
                pass
        raise UsageError(f"cannot write {current}: {exc.strerror or exc}") from None
    finally:
        for tmp in staged:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        for aside in asides:
            shutil.rmtree(aside, ignore_errors=True)
