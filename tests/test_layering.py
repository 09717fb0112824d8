"""The layering of byoc's packages (docs/architecture.md), checked on the source.

Every import of every module is read from its syntax tree, including imports inside
functions and under ``if TYPE_CHECKING:``, with relative imports resolved to the
absolute module they name. The rules:

* ``byoc.runtime`` never imports ``byoc.generator`` (a bundle runs without it);
* ``byoc.grammar`` and ``byoc.spec`` never import ``byoc.generator`` or ``byoc.runtime``;
* ``byoc.grammar`` never imports ``byoc.spec`` (the op catalog is passed in);
* the core (``byoc.*`` outside those four packages) imports them only from the
  orchestration modules (``byoc.api``, ``byoc.building`` with ``byoc.build_records``, the
  ``byoc.cli`` package, the vendor test kit ``byoc.testing``), and only inside functions or for type checking, so that
  importing the core stays light;
* inside ``byoc.generator``, the packages of the C-family codegen kinds
  (``c_source``, ``c_fused``, ``engine``) never import each other, and ``c`` (the C text
  they all write) imports none of them;
* the ONNX front end, ``byoc.onnx``, is imported by no other module at module level
  (only inside the functions that read a model), so that nothing but an import of a
  model loads it.
"""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "byoc": "byoc",
    "grammar": "byoc.grammar",
    "spec": "byoc.spec",
    "generator": "byoc.generator",
    "runtime": "byoc.runtime",
}
"""Source folder -> the package it installs as (``package-dir`` in pyproject.toml)."""
LAYERS = ("byoc.grammar", "byoc.spec", "byoc.generator", "byoc.runtime")
ORCHESTRATION = ("byoc.api", "byoc.building", "byoc.build_records", "byoc.cli", "byoc.testing")
"""Core modules that put the layers together; a package (``byoc.cli``, ``byoc.testing``)
also covers its modules."""
FRONT_END = "byoc.onnx"
"""Imported by other modules only inside functions (or for type checking)."""
MAX_MODULE_LINES = 500
"""No Python file is longer: past that, a file holds more than one responsibility."""

FORBIDDEN = {
    "byoc.runtime": ("byoc.generator",),
    "byoc.grammar": ("byoc.generator", "byoc.runtime", "byoc.spec"),
    "byoc.spec": ("byoc.generator", "byoc.runtime"),
}
"""Layer -> the packages none of its modules may import."""

KINDS = ("byoc.generator.c_source", "byoc.generator.c_fused", "byoc.generator.engine")
"""The generator's packages of one codegen kind each."""
WITHIN_GENERATOR = {
    "byoc.generator.c": KINDS,
    **{kind: tuple(k for k in KINDS if k != kind) for kind in KINDS},
}
"""Package of the generator -> the generator's packages none of its modules may import."""


@dataclass(frozen=True)
class Import:
    line: int
    module: str  # absolute; ``from a import b`` is recorded as ``a.b``
    deferred: bool  # inside a function, or under ``if TYPE_CHECKING:``


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_of(module: str) -> str | None:
    return next((layer for layer in LAYERS if within(module, layer)), None)


def module_name(root: Path, folder: str, path: Path) -> tuple[str, bool]:
    """(absolute module name, whether it is a package's ``__init__``) of the source file
    ``path`` in ``root / folder``."""
    parts = list(path.relative_to(root / folder).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join([FOLDERS[folder], *parts]), is_package


def imports(source: str, module: str, is_package: bool = False) -> list[Import]:
    """Every import in ``source``, the text of ``module``."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[Import] = []

    def resolve(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        return ".".join([*base, *([node.module] if node.module else [])])

    def visit(node: ast.AST, deferred: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(node.lineno, a.name, deferred) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(node)
            found.extend(
                Import(node.lineno, base if a.name == "*" else f"{base}.{a.name}", deferred)
                for a in node.names
            )
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, deferred)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            deferred = True
        for child in ast.iter_child_nodes(node):
            visit(child, deferred)

    visit(ast.parse(source), False)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def violations(source: str, module: str, is_package: bool = False, label: str = "") -> list[str]:
    """The layering rules ``source`` breaks, one ``label:line: message`` each."""
    label = label or module
    out = []
    mine = layer_of(module)
    for imp in imports(source, module, is_package):
        if within(imp.module, FRONT_END) and not within(module, FRONT_END) and not imp.deferred:
            out.append(
                f"{label}:{imp.line}: {module} imports the ONNX front end {imp.module} at module level"
            )
        for package, forbidden in WITHIN_GENERATOR.items():
            if within(module, package) and any(within(imp.module, f) for f in forbidden):
                out.append(f"{label}:{imp.line}: {package} imports {imp.module}")
        target = layer_of(imp.module)
        if target is None or target == mine:
            continue
        if mine in FORBIDDEN and target in FORBIDDEN[mine]:
            out.append(f"{label}:{imp.line}: {mine} imports {imp.module}")
        elif mine is None and not any(within(module, o) for o in ORCHESTRATION):
            out.append(f"{label}:{imp.line}: core module {module} imports {imp.module}")
        elif mine is None and not imp.deferred:
            out.append(f"{label}:{imp.line}: {module} imports {imp.module} at module level")
    return sorted(set(out))


def scan(root: Path) -> list[str]:
    """Every violation in the source folders under ``root``."""
    out = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            module, is_package = module_name(root, folder, path)
            label = path.relative_to(root).as_posix()
            out += violations(path.read_text(encoding="utf-8"), module, is_package, label)
    return out


def test_the_source_keeps_the_layering():
    assert scan(ROOT) == []


PYTHON_FOLDERS = (*FOLDERS, "tests", "benchmarks", "examples")
"""Every folder of the repository's Python: the sources, the tests, their data scripts,
the benchmarks and the examples."""


def test_no_python_file_is_over_the_line_limit():
    long = {
        path.relative_to(ROOT).as_posix(): lines
        for folder in PYTHON_FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "__pycache__" not in path.parts
        if (lines := path.read_text(encoding="utf-8").count("\n")) > MAX_MODULE_LINES
    }
    assert long == {}, f"split these files by responsibility (at most {MAX_MODULE_LINES} lines each)"


def test_the_scan_reads_the_real_tree():
    """The scan is not vacuous: it finds the files and the imports the layering allows."""
    edges = set()
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            module, is_package = module_name(ROOT, folder, path)
            for imp in imports(path.read_text(encoding="utf-8"), module, is_package):
                edges.add((layer_of(module), layer_of(imp.module)))
    assert {("byoc.generator", "byoc.spec"), ("byoc.generator", "byoc.grammar")} <= edges
    assert {("byoc.runtime", "byoc.grammar"), (None, "byoc.generator"), (None, "byoc.runtime")} <= edges


def test_imports_are_resolved_and_found_everywhere():
    source = """\
from typing import TYPE_CHECKING
import byoc.ir
from . import sibling
from ..spec import backend as b
if TYPE_CHECKING:
    from byoc.generator.artifacts import Artifact
else:
    import byoc.runtime
class C:
    def f(self):
        import byoc.grammar.graph_printer
"""
    got = {(i.line, i.module, i.deferred) for i in imports(source, "byoc.generator.lowering")}
    assert (2, "byoc.ir", False) in got
    assert (3, "byoc.generator.sibling", False) in got
    assert (4, "byoc.spec.backend", False) in got
    assert (6, "byoc.generator.artifacts.Artifact", True) in got
    assert (8, "byoc.runtime", False) in got
    assert (11, "byoc.grammar.graph_printer", True) in got
    assert [i.module for i in imports("from .. import runtime", "byoc.spec", is_package=True)] == [
        "byoc.runtime"
    ]
    assert [i.module for i in imports("from .x import *", "byoc.spec.search")] == ["byoc.spec.x"]


def test_the_onnx_front_end_is_imported_only_where_a_model_is_read():
    assert violations("from byoc.onnx.ops import onnx_ops\n", "byoc.cli.ops") == [
        "byoc.cli.ops:1: byoc.cli.ops imports the ONNX front end byoc.onnx.ops.onnx_ops at module level"
    ]
    assert violations("def f():\n    from .onnx.ops import onnx_ops\n", "byoc.cli.ops") == []
    assert violations("from .ops import onnx_ops\n", "byoc.onnx.importer") == []  # within the package


def test_the_codegen_kinds_do_not_import_each_other():
    assert violations("from ..c_source.values import input_values\n", "byoc.generator.c_fused.nests") == [
        "byoc.generator.c_fused.nests:1: byoc.generator.c_fused imports byoc.generator.c_source.values.input_values"
    ]
    assert violations("def f():\n    from ..engine import plan\n", "byoc.generator.c.text") == [
        "byoc.generator.c.text:2: byoc.generator.c imports byoc.generator.engine.plan"
    ]
    assert violations("from ..c.text import c_value\n", "byoc.generator.engine.generate") == []
    assert violations("from .values import c_value\n", "byoc.generator.c_source.kernels") == []


def test_checker_reports_planted_imports():
    assert violations("def f():\n    from byoc.generator import pipeline\n", "byoc.runtime.model") == [
        "byoc.runtime.model:2: byoc.runtime imports byoc.generator.pipeline"
    ]
    assert violations("from ..generator.lowering import lower\n", "byoc.runtime.model") == [
        "byoc.runtime.model:1: byoc.runtime imports byoc.generator.lowering.lower"
    ]
    assert violations("from byoc import runtime\n", "byoc.spec.search") == [
        "byoc.spec.search:1: byoc.spec imports byoc.runtime"
    ]
    assert violations("import byoc.spec.backend as b\n", "byoc.grammar.graph_parser") == [
        "byoc.grammar.graph_parser:1: byoc.grammar imports byoc.spec.backend"
    ]
    assert (
        violations("from . import generator\n", "byoc.grammar", is_package=True) == []
    )  # byoc.grammar.generator
    assert violations("from .. import generator\n", "byoc.grammar", is_package=True) == [
        "byoc.grammar:1: byoc.grammar imports byoc.generator"
    ]
    assert violations("from .spec import load_catalog\n", "byoc.reference") == [
        "byoc.reference:1: core module byoc.reference imports byoc.spec.load_catalog"
    ]
    assert violations("def f():\n    import byoc.generator\n", "byoc.catalog") == [
        "byoc.catalog:2: core module byoc.catalog imports byoc.generator"
    ]
    assert violations("from byoc.runtime import Model\n", "byoc.cli.run") == [
        "byoc.cli.run:1: byoc.cli.run imports byoc.runtime.Model at module level"
    ]


def test_checker_allows_the_permitted_directions():
    assert violations("from byoc.grammar.graph_parser import parse_graph\n", "byoc.runtime.host_module") == []
    assert violations("from byoc.spec.backend import BackendSpec\n", "byoc.generator.lowering") == []
    assert violations("from byoc.grammar import graph_printer\n", "byoc.generator.host_graph") == []
    assert violations("def f():\n    from byoc.generator import pipeline\n", "byoc.building") == []
    assert (
        violations(
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .spec.backend import BackendSpec\n",
            "byoc.api",
        )
        == []
    )
    assert violations("from byoc.errors import ParseError\n", "byoc.grammar.graph_parser") == []


def test_a_bad_import_planted_in_a_copy_of_the_tree_fails(tmp_path):
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "runtime" / "model.py"
    lines = target.read_text(encoding="utf-8").count("\n")
    with target.open("a", encoding="utf-8") as f:
        f.write("\n\ndef _planted():\n    from ..generator import pipeline  # noqa\n")
    assert scan(tmp_path) == [f"runtime/model.py:{lines + 4}: byoc.runtime imports byoc.generator.pipeline"]
