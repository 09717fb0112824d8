"""Without the optional library extras (byoc-codegen[dnnl], byoc-codegen[blas]) the suite still passes.

Every test module that names a library backend, or that goes over every shipped
backend spec, runs again in a subprocess in which oneDNN's wheels and OpenBLAS's
module are hidden: the library backends' tests must skip with the install hint, and
everything else must pass. An item parametrised by backends none of which needs a
library (``[fused]``, ``[llama-fused,ccompiler]``, the ONNX suite's
``TestFusedCcompilerReal``) is left out of that run (:func:`needed_without_libraries`):
it builds and runs what it would with the libraries present, which the main run checks;
running it again took most of the nested run's time (20 of its 21 minutes on an AMD
EPYC with AVX2). So is an item that names no backend and whose code cannot reach a
library (:func:`touching`: read from the test's source, with the module-level
definitions, fixtures and helpers it uses), which left 930 of the 1,437 items such a
run used to take."""

from __future__ import annotations

import ast
import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
NESTED = "BYOC_TEST_WITHOUT_LIBRARIES"

HIDE = """\
import importlib.metadata as metadata
import sys

sys.modules["scipy_openblas32"] = None  # the cblas backend's library
_found = metadata.distribution


def _distribution(name):  # the dnnl backend's wheels
    if name.startswith("onednn"):
        raise metadata.PackageNotFoundError(name)
    return _found(name)


metadata.distribution = _distribution
"""

ALL = "*"
"""What :func:`touching` holds for a module whose every test may reach a library."""

TOUCHES_LIBRARIES = re.compile(
    r"dnnl|cblas|missing_library|backends\" ?/|SPECS\.glob|backend_files|list_backends"
)


def backends() -> tuple[frozenset[str], frozenset[str]]:
    """The shipped backends that need a library (``requires:``), and the others."""
    import byoc

    specs = byoc.list_backends()
    return (
        frozenset(s.name for s in specs if s.requires),
        frozenset(s.name for s in specs if not s.requires),
    )


def named_backends(nodeid: str, names: frozenset[str]) -> set[str]:
    """The backends of ``names`` that a test item's id names: a word of its parameters
    (``[mlp-fused,ccompiler]``) or of its class's CamelCase name
    (``TestFusedCcompilerReal``); not its module or function name."""
    words: set[str] = set()
    for part in nodeid.split("::")[1:]:
        params = re.search(r"\[(.*)\]$", part)
        if params:
            words |= set(re.split(r"[-,_\s/]+", params.group(1).lower()))
            part = part[: params.start()]
        if part.startswith("Test"):
            words |= {w.lower() for w in re.findall(r"[A-Z][a-z0-9]*", part)}
    return words & names


def needed_without_libraries(nodeid: str, library: frozenset[str], other: frozenset[str]) -> bool:
    """Whether the nested run runs the item: when it names a backend that needs a
    library (named_backends); when it names only backends that do not, never; when it
    names none, if its code may reach a library (:func:`touching`)."""
    module, _, rest = nodeid.partition("::")
    function = rest.split("::")[0].split("[")[0]
    named = named_backends(nodeid, library | other)
    named = named or set(made_for(TESTS / Path(module).name).get(function, frozenset()) & (library | other))
    if named:
        return bool(named & library)
    found = touching(TESTS / Path(module).name)
    return ALL in found or function in found


@functools.cache
def made_for(module: Path) -> dict[str, frozenset[str]]:
    """The tests of ``module`` that a call makes at module level, one per backend
    (``test_differential_fused = _differential("fused")``): name -> the call's string
    arguments, which name its backends as an item's parameters would."""
    made: dict[str, frozenset[str]] = {}
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            words = frozenset(
                a.value for a in node.value.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
            )
            made.update(
                {t.id: words for t in node.targets if isinstance(t, ast.Name) and t.id.startswith("test")}
            )
    return made


def _touches(node: ast.AST, text: str) -> bool:
    return TOUCHES_LIBRARIES.search(ast.get_source_segment(text, node) or "") is not None


def _is_statement(node: ast.AST) -> bool:
    """Module-level code that runs at import (not a docstring, a definition or an import)."""
    if isinstance(node, ast.Expr):
        return not isinstance(node.value, ast.Constant)
    return isinstance(node, (ast.If, ast.Try, ast.With, ast.For))


def _used_names(node: ast.AST) -> set[str]:
    """The names a definition reads (and, for a function, the fixtures it takes)."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        names |= {a.arg for a in node.args.args + node.args.kwonlyargs}
    return names


@functools.cache
def _helpers() -> dict[str, frozenset[str]]:
    """For each of tests/'s helper modules and conftest.py, its module-level names
    (fixtures, functions, constants) whose code may reach a library, directly or through
    another definition of its own or one it imports from another helper (to a fixed
    point); every name of a helper whose import-time code reaches one."""
    texts = {
        p.stem: p.read_text(encoding="utf-8")
        for p in sorted(TESTS.glob("*.py"))
        if not p.name.startswith("test_")
    }
    found: dict[str, frozenset[str]] = dict.fromkeys(texts, frozenset())
    while True:
        more = {
            stem: frozenset(_touching_definitions(text, _imported(text, found)) - {ALL})
            for stem, text in texts.items()
        }
        if more == found:
            return found
        found = more


def _imported(text: str, helpers: dict[str, frozenset[str]]) -> frozenset[str]:
    """The names by which ``text`` reaches the touching definitions of ``helpers``: those
    it imports from a helper (under their local names), the attributes of a helper it
    imports whole, and conftest.py's (its fixtures reach every test module)."""
    names = set(helpers.get("conftest", ()))
    for node in ast.parse(text).body:
        if isinstance(node, ast.ImportFrom) and node.module in helpers:
            names |= {a.asname or a.name for a in node.names if a.name in helpers[node.module]}
        elif isinstance(node, ast.Import):
            for a in node.names:
                names |= helpers.get(a.name, frozenset())
    return frozenset(names)


def _touching_definitions(text: str, known: frozenset[str]) -> set[str]:
    """The module-level definitions of ``text`` whose code matches TOUCHES_LIBRARIES or
    uses such a definition (of this module, or one of ``known``), to a fixed point, with
    ``known``; :data:`ALL` and every definition when code that runs at import does."""
    definitions: dict[str, ast.AST] = {}
    at_import = False  # a mark of every test (a skipif on a library), or a module-level skip
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            definitions[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            at_import |= "pytestmark" in names and _touches(node, text)
            definitions.update(dict.fromkeys(names, node))
        elif _is_statement(node):
            at_import |= _touches(node, text)
    if at_import:
        return {ALL, *definitions, *known}
    touching = set(known) | {name for name, node in definitions.items() if _touches(node, text)}
    uses = {name: _used_names(node) for name, node in definitions.items()}
    while True:
        more = {name for name in definitions if name not in touching and uses[name] & touching}
        if not more:
            return touching
        touching |= more


@functools.cache
def touching(module: Path) -> frozenset[str]:
    """The test functions and classes of ``module`` whose code may reach a library: it
    names one (dnnl, cblas), asks whether one is missing, or goes over the shipped
    backends, itself or through a module-level definition, fixture or helper it uses.
    A test that does none of this builds and runs what it would with the libraries."""
    text = module.read_text(encoding="utf-8")
    return frozenset(_touching_definitions(text, _imported(text, _helpers())))


def modules() -> list[str]:
    here = Path(__file__).name
    return sorted(
        p.name for p in TESTS.glob("test_*.py") if p.name != here and TOUCHES_LIBRARIES.search(p.read_text())
    )


def test_the_suite_passes_with_the_libraries_hidden(tmp_path):
    if os.environ.get(NESTED):  # the nested run does not run itself again
        return
    (tmp_path / "sitecustomize.py").write_text(HIDE)
    names = modules()
    assert {"test_gen_dnnl.py", "test_gen_cblas.py", "test_fuzz.py", "test_requirements.py"} <= set(names)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), NESTED: "1"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rfs",  # failures and skips in the summary: the report names what failed
            *(f"tests/{n}" for n in names),
        ],
        cwd=TESTS.parent,
        env=env,
        capture_output=True,
        text=True,
    )
    failed = [line for line in out.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    report = "\n".join(failed) + "\n" + out.stdout[-2500:]
    assert out.returncode == 0, report
    assert re.search(r"\d+ passed", report), report
    # the skip reasons, searched in the whole output: the report shows only its tail
    assert "needs onednn" in out.stdout and "pip install 'byoc-codegen[dnnl]'" in out.stdout, report
    assert "needs openblas" in out.stdout and "pip install 'byoc-codegen[blas]'" in out.stdout, report


@pytest.mark.parametrize(
    "nodeid, needed",
    [
        ("tests/test_sweep.py::test_every_shipped_backend_passes_the_sweep[fused]", False),
        ("tests/test_onnx_zoo.py::test_zoo_model_matches_onnxruntime[llama-fused,ccompiler]", False),
        ("tests/test_onnx_zoo.py::test_zoo_model_matches_onnxruntime[llama-dnnl,fused]", True),
        ("tests/test_onnx_backend_suite.py::TestFusedCcompilerReal::test_resnet50_cpu", False),
        ("tests/test_onnx_backend_suite.py::TestDnnlFusedNode::test_abs_cpu", True),
        ("tests/test_onnx_backend_suite.py::TestCblasFusedNode::test_abs_cpu", True),
        ("tests/test_fuzz.py::test_fuzz_spec_loader", True),  # names no backend: it may go over all
        ("tests/test_fuzz.py::test_differential_fused", False),  # made by _differential("fused")
        ("tests/test_fuzz.py::test_differential_dnnl", True),  # made by _differential("dnnl")
        ("tests/test_roundtrip_hypothesis.py::test_dsl_round_trip", False),  # parses and prints
        # names no backend (a function's name is not a parameter) and its code reaches no library
        ("tests/test_fused_options.py::test_fused_threads", False),
        ("tests/test_fused_options.py::test_check_and_backends_list_fused", True),  # goes over the backends
        ("tests/test_e2e_dtypes.py::test_half_mlp_is_within_an_ulp_of_the_reference[float16]", False),
        ("tests/test_layouts_dnnl.py::test_golden", True),  # the module skips without oneDNN
        ("tests/test_gen_dnnl.py::test_golden[net_mlp]", True),
    ],
)
def test_the_nested_run_leaves_out_only_items_of_backends_without_libraries(nodeid, needed):
    library, other = backends()
    assert library == {"dnnl", "cblas"} and {"fused", "json", "ccompiler"} <= other
    assert needed_without_libraries(nodeid, library, other) is needed
