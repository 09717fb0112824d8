"""Shared fixtures and helpers of the test suite."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from bundle_support import make_bundle

import byoc.spec
from byoc import cli
from byoc.api import parse, print_program
from byoc.catalog import Catalog
from byoc.ir import Program, is_integer

# The suite keeps Python's bytecode even where the environment says not to write it
# (PYTHONDONTWRITEBYTECODE, set on the project's machines): without it pytest rewrote
# the asserts of every test module at each collection (13 of its 18 s), and every
# `byoc` subprocess a test starts compiled byoc's modules again (about a second each).
# The files go to __pycache__/ folders, which git ignores.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

TESTS = Path(__file__).parent
DATA = TESTS / "data"
EXAMPLES = TESTS.parent / "examples"

GUIDE_SUBGRAPH = EXAMPLES / "guide_subgraph.examplejson"
TVM_EXTERNAL_RUNTIME = EXAMPLES / "tvm_external_runtime.examplejson"
GUIDE_WHOLE_GRAPH = EXAMPLES / "guide_whole_graph.graph"


IMPLIES_SLOW = ("network", "sanitizers", "onnx_suite")
"""Markers whose tests are slow too (pyproject.toml registers them all)."""


RUNS_FIRST = "tests/test_without_libraries.py::"
"""The longest item of all (it runs the library-facing modules again in a subprocess)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` the items of IMPLIES_SLOW's markers and of the test functions
    tests/slow_tests.txt lists (measured: tests/slow_tests.py). Run the longest item of
    all first, then the slow items, the long ones of tests/long_items.txt at their head,
    longest first, then the rest: pytest-xdist hands out items in this order, a few at a
    time, so the long ones overlap the many short ones instead of ending the run on one
    busy worker while the other waits. In the run without the libraries
    (test_without_libraries.py), leave out the items it does not need."""
    from slow_tests import function_of, read, read_long

    if os.environ.get("BYOC_TEST_WITHOUT_LIBRARIES"):
        from test_without_libraries import backends, needed_without_libraries

        library, other = backends()
        needed = [needed_without_libraries(item.nodeid, library, other) for item in items]
        left_out = [item for item, keep in zip(items, needed) if not keep]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item, keep in zip(items, needed) if keep]

    measured, long = read(), read_long()
    for item in items:
        if function_of(item.nodeid) in measured or any(item.get_closest_marker(m) for m in IMPLIES_SLOW):
            item.add_marker(pytest.mark.slow)
    items.sort(
        key=lambda item: (
            0 if item.nodeid.startswith(RUNS_FIRST) else 1 if item.get_closest_marker("slow") else 2,
            -long.get(item.nodeid, 0.0),
        )
    )


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return byoc.spec.load_catalog()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240607)


def parse_graph_text(text: str | bytes, catalog: Catalog | None = None) -> Program:
    return parse(text, "graph", catalog=catalog)


def parse_ejson_text(text: str | bytes, catalog: Catalog | None = None) -> Program:
    return parse(text, "examplejson", catalog=catalog)


def roundtrip(program: Program, language: str) -> Program:
    """parse(print(program)) in ``language``."""
    return parse(print_program(program, language), language)


def module_library(model, path: Path) -> Path:
    """The library of ``model``'s one backend module, written to ``path`` (to load it
    with tvm_ffi or ctypes on its own)."""
    (entry,) = model.manifest.modules
    path.write_bytes(model.members[entry.file])
    return path


def run_threads(call, threads: int) -> None:
    """Runs ``call(k)`` in ``threads`` threads at once (k = 0 .. threads - 1, started
    together at a barrier) and fails with what any of them raised."""
    import threading

    start, errors = threading.Barrier(threads), []

    def run(k: int) -> None:
        try:
            start.wait()
            call(k)
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert errors == []


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Random values of ``dtype``; integers avoid 0 so that they can be divisors."""
    if is_integer(dtype):
        values = rng.integers(-50, 50, size=shape)
        values[values == 0] = 7
        return values.astype(dtype)
    values = rng.uniform(-4.0, 4.0, size=shape)
    values[np.abs(values) < 0.1] = 0.5
    return values.astype(dtype)


@pytest.fixture
def golden(snapshot):
    """``golden(suffix)`` is a snapshot assertion writing one ``.suffix`` file per artifact
    under tests/golden/, e.g. ``assert text == golden("c")``."""
    from golden import EXTENSIONS

    return lambda suffix: snapshot.use_extension(EXTENSIONS[suffix])


@pytest.fixture(scope="session", autouse=True)
def cache_dir(tmp_path_factory) -> Iterator[Path]:
    """The compile cache of the whole run: a private ``$BYOC_CACHE_DIR``, inherited by
    subprocesses, so that no test reads or writes the user's cache. Entries are keyed by
    content, so test modules share them safely; so do the workers of one run (``-n 2``):
    a module that tests on both workers build is compiled once (the build cache is made
    for concurrent builders: the first to rename its entry in wins, runtime/build.py),
    and so does the nested run without the libraries (tests/test_without_libraries.py),
    whose builds of the other backends are the same."""
    inherited = os.environ.get("BYOC_CACHE_DIR") if os.environ.get("BYOC_TEST_WITHOUT_LIBRARIES") else None
    if inherited:
        root = Path(inherited)
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.getbasetemp().parent / "byoc-cache"
        root.mkdir(exist_ok=True)
    else:
        root = tmp_path_factory.mktemp("byoc-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BYOC_CACHE_DIR", str(root))
        mp.setenv("BYOC_CACHE_MAX", "0")  # no eviction between tests; test_cache_store.py bounds its own
        yield root


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty compile cache for one test (``$BYOC_CACHE_DIR``, not created yet),
    for tests that look at the cache's entries."""
    root = tmp_path / "cache"
    monkeypatch.setenv("BYOC_CACHE_DIR", str(root))
    return root


def run_cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """``byoc *argv`` in this process: its exit status, stdout and stderr."""
    capsys.readouterr()
    rc = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.fixture(scope="module", params=["ccompiler", "json"])
def bundle(request, tmp_path_factory) -> Path:
    """A .byoc bundle written by ``Model.save`` (tests/test_bundle*.py): with a compiled
    library, or a JSON module."""
    return make_bundle(request.param, tmp_path_factory)


def text_in_fresh_process(module: str, expression: str, hash_seed: str) -> str:
    """The text that ``expression`` gives in a new Python process with this hash seed,
    evaluated with test module ``module`` imported as ``t``: generated code must not
    depend on the order of sets or dicts of strings, which the seed changes."""
    script = f"import sys; sys.path[:0] = [sys.argv[1]]; import {module} as t; sys.stdout.write({expression})"
    out = subprocess.run(
        [sys.executable, "-c", script, str(TESTS)],
        capture_output=True,
        text=True,
        check=True,
        cwd=TESTS.parent.parent,  # outside the checkout: byoc comes from the installed package
        env={**os.environ, "PYTHONHASHSEED": hash_seed},
    )
    return out.stdout
