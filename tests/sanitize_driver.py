"""Run generated C and C++ under AddressSanitizer and UndefinedBehaviorSanitizer.

tests/test_sanitizers.py runs this script in a subprocess whose environment compiles
every generated library with ``-fsanitize=address,undefined -fno-omit-frame-pointer``
(``$CFLAGS`` / ``$CXXFLAGS``, which byoc appends to each spec's flags) into a private
``$BYOC_CACHE_DIR``, and preloads the sanitizer runtimes into Python
(``LD_PRELOAD``; ``ASAN_OPTIONS=detect_leaks=0`` for Python's own allocations,
``UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1``). A report aborts the process,
so a clean run is exit status 0 and a stderr without "runtime error" or
"AddressSanitizer". By hand:

    CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer" CXXFLAGS="$CFLAGS" \\
    CC=gcc CXX=g++ BYOC_CACHE_DIR=/tmp/byoc-asan ASAN_OPTIONS=detect_leaks=0 \\
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \\
    LD_PRELOAD=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so) \\
    .venv/bin/python tests/sanitize_driver.py

What runs, on every compiled backend (ccompiler, engine, and fused when its spec
exists):

* the golden graphs, tests/data/gen/*.graph, with their regions on the backend
  (where the backend's spec supports them), and the two ExampleJSON files of
  examples/, offloaded whole;
* a batch of random graphs per backend (tests/fuzz_strategies.region_graphs:
  broadcasting where the spec allows it), ``--random N`` each (default
  RANDOM_PER_BACKEND).

Every output is checked against the numpy reference. ``--canary asan|ubsan`` instead
runs a deliberately broken library, to show that the sanitizers do report.

The last line printed is ``sanitizer runs: <golden> golden + <random> random``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

RANDOM_PER_BACKEND = {"ccompiler": 6, "engine": 2, "fused": 6}
"""Random graphs per compiled backend in a CI run (one sanitized compile each)."""
COMPILED = ("ccompiler", "engine", "fused")


def compiled_backends() -> list[str]:
    import byoc.spec

    shipped = Path(byoc.spec.__file__).parent / "backends"
    from byoc.spec.search import backend_files

    return [b for b in COMPILED if b in backend_files(shipped)]


def golden_cases() -> list[tuple[str, str, str]]:
    """(name, language, text) of every golden graph; DSL ones hold ``@BACKEND``."""
    cases = []
    for path in sorted((TESTS / "data" / "gen").glob("*.graph")):
        cases.append((path.stem, "graph", path.read_text(encoding="utf-8")))
    for path in sorted((TESTS.parent / "examples").glob("*.examplejson")):
        cases.append((path.stem, "examplejson", path.read_text(encoding="utf-8")))
    return cases


def run_golden(backend: str) -> int:
    """Build and check every golden graph the backend can run; the number run."""
    import numpy as np
    from fuzz_strategies import build_options

    import byoc
    from byoc.building import build
    from byoc.errors import GraphError
    from byoc.generator.lowering import offload_whole

    ran = 0
    for name, language, text in golden_cases():
        if language == "graph":
            program = byoc.parse(text.replace("@BACKEND", f"@{backend}"), "graph", file=f"{name}.graph")
        else:
            program = offload_whole(byoc.parse(text, "examplejson"), backend)
        try:
            model = build(program, options=build_options(backend))
        except GraphError as exc:  # the backend's spec does not take this graph (dtype, rank)
            print(f"  skip {name} on {backend}: {exc.message}")
            continue
        rng = np.random.default_rng(0)
        for fn in program.functions:
            inputs = {p.name: rng.uniform(-3, 3, p.type.shape).astype(p.type.dtype) for p in fn.params}
            got = model.run(fn.name, **inputs)
            want = byoc.evaluate(fn, inputs)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=f"{name} on {backend}")
        ran += 1
        print(f"  ok {name} on {backend}")
    return ran


def run_random(backend: str, n: int) -> int:
    from fuzz_strategies import Caps, assert_matches_reference, build_options, region_graphs
    from hypothesis import HealthCheck, given, settings

    import byoc
    from byoc.building import build

    count = [0]

    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=region_graphs(Caps(backend)))
    def check(case):
        graph, inputs = case
        model = build(byoc.parse(graph), options=build_options(backend))
        assert_matches_reference(graph, inputs, model)
        count[0] += 1

    check()
    print(f"  ok {count[0]} random graphs on {backend}")
    return count[0]


CANARY = {
    "asan": "#include <stdlib.h>\nint canary(int i) { int* p = malloc(4 * sizeof(int)); p[i] = 1; int v = p[0]; free(p); return v; }\n",
    "ubsan": "#include <limits.h>\nint canary(int i) { int x = INT_MAX - 1; return x + i; }\n",
}


def run_canary(which: str, directory: Path) -> None:
    """Compile and call a library with a heap overflow (asan) or a signed overflow
    (ubsan): the sanitizer must report it."""
    import ctypes
    import subprocess

    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"{which}.c"
    source.write_text(CANARY[which])
    library = directory / f"lib{which}.so"
    flags = os.environ.get("CFLAGS", "").split()
    subprocess.run(["gcc", *flags, "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    ctypes.CDLL(str(library)).canary(8)
    print("canary returned: the sanitizer did not stop it")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--random", type=int, default=None, help="random graphs per backend")
    parser.add_argument("--backend", action="append", default=[], help="only this backend (repeatable)")
    parser.add_argument("--canary", choices=sorted(CANARY), help="run a broken library instead")
    args = parser.parse_args(argv)
    # The runtimes are loaded into this process already; compilers need no preload.
    os.environ.pop("LD_PRELOAD", None)
    if "-fsanitize=" not in os.environ.get("CFLAGS", "") or "-fsanitize=" not in os.environ.get(
        "CXXFLAGS", ""
    ):
        print("set CFLAGS and CXXFLAGS to -fsanitize=address,undefined ...", file=sys.stderr)
        return 3
    if args.canary:
        run_canary(args.canary, Path(os.environ.get("BYOC_CACHE_DIR", ".")) / "canary")
        return 0
    golden = random = 0
    for backend in args.backend or compiled_backends():
        print(f"{backend}:")
        golden += run_golden(backend)
        n = args.random if args.random is not None else RANDOM_PER_BACKEND[backend]
        random += run_random(backend, n)
    print(f"sanitizer runs: {golden} golden + {random} random")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
