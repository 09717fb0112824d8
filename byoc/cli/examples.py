"""``byoc examples``: the shipped example graphs and models, listed or copied out.

The repository's ``examples/`` folder is installed with the package (as
``byoc.examples``), so the commands of ``--help`` and the README, which name
``examples/...``, work from an installed wheel after ``byoc examples -o .``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from ..atomic import default_mode
from ..errors import UsageError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

PACKAGE = "byoc.examples"
EPILOG = """\
examples:
  byoc examples                      # what there is, with the first line of each
  byoc examples -o .                 # ./examples/..., then:
  byoc run examples/guide_whole_graph.graph
  byoc run examples/quantized/cnn_qdq.onnx --backend ccompiler,fused

DIR/examples must not exist yet: the copy writes all of it, or nothing.
"""


def add_commands(sub, parents) -> None:
    p = sub.add_parser(
        "examples",
        parents=parents,
        help="list the shipped example graphs and models, or copy them into a directory",
        description="List byoc's example graphs (.graph, .examplejson) and ONNX models, or copy them "
        "into DIR/examples so that the commands of the documentation run where you are.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-o", "--output", metavar="DIR", help="copy the examples into DIR/examples")
    p.set_defaults(run=_cmd_examples)


def shipped() -> dict[str, Traversable]:
    """Every shipped example file by its path under ``examples/`` (``quantized/cnn_qdq.onnx``)."""
    found: dict[str, Traversable] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name.startswith((".", "__")):
                continue
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            else:
                found[f"{prefix}{child.name}"] = child

    walk(files(PACKAGE), "")
    return found


def _first_line(entry: Traversable) -> str:
    """The first comment line of a graph, or "" (models and data have none)."""
    if not entry.name.endswith(".graph"):
        return ""
    for line in entry.read_text(encoding="utf-8").splitlines():
        return line.lstrip("# ").strip() if line.startswith("#") else ""
    return ""


def _cmd_examples(args: argparse.Namespace) -> int:
    examples = shipped()
    if args.output is None:
        runnable = [name for name in examples if name.endswith((".graph", ".examplejson", ".onnx"))]
        width = max(len(name) for name in runnable)
        for name in runnable:
            sys.stdout.write(f"examples/{name.ljust(width)}  {_first_line(examples[name])}".rstrip() + "\n")
        sys.stdout.write("copy them here with `byoc examples -o .`\n")
        return 0
    root = Path(args.output) / "examples"
    if root.exists():
        raise UsageError(f"{root} exists", hint="copy into another directory, or remove it first")
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".examples.", dir=root.parent))
    except OSError as exc:
        raise UsageError(f"cannot write {root}: {exc.strerror or exc}") from None
    try:  # all of them, or none: built aside, then renamed into place
        for name, entry in examples.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_bytes(entry.read_bytes())
        os.chmod(staging, default_mode(directory=True))  # mkdtemp makes it private
        os.replace(staging, root)
    except OSError as exc:
        raise UsageError(f"cannot write {root}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    sys.stdout.write(f"wrote {len(examples)} files into {root}\n")
    return 0
