"""Which test functions are ``slow``, and which items are long: measured, then recorded in
tests/slow_tests.txt and tests/long_items.txt.

A test function is slow when one of its items (a parametrization) takes at least
:data:`ITEM_SECONDS`, or all of them together at least :data:`FUNCTION_SECONDS`, in a
full run of the suite. ``tests/conftest.py`` marks the items of every function the file
lists ``slow``, besides those of the ``network``, ``sanitizers`` and ``onnx_suite``
markers, so that ``pytest -m "not slow"`` is a quick loop.

An item is long when it takes at least :data:`LONG_SECONDS` (its setup, call and
teardown). ``tests/conftest.py`` runs the long items first, longest first, so that
pytest-xdist, which hands out items one at a time in that order (``--dist loadgroup``
in pyproject.toml), starts the longest while the rest are still to share: the run ends
when the short items do, not with one worker in a long build while the other waits.

After tests were added or made faster, measure and rewrite both lists::

    .venv/bin/python -m pytest -q --durations=0 > durations.txt
    .venv/bin/python tests/slow_tests.py durations.txt

With ``--keep``, the functions the list names already stay in it (those the tests still
define): a run on a quieter or faster machine then adds the new slow functions without
putting back into the quick loop what a busier run measured slow.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

LIST = Path(__file__).resolve().parent / "slow_tests.txt"
LONG_LIST = Path(__file__).resolve().parent / "long_items.txt"
ITEM_SECONDS = 2.0
FUNCTION_SECONDS = 5.0
LONG_SECONDS = 10.0
DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (?:setup|call|teardown) +(\S+)")
MARKED_MODULES = (
    "tests/test_onnx_backend_suite.py",
    "tests/test_onnx_node_suite.py",
    "tests/test_sanitizers.py",
    "tests/test_e2e_networks.py",
    "tests/test_benchmarks_networks.py",
)
"""Modules whose tests a marker makes slow already (their ``pytestmark``)."""


def function_of(nodeid: str) -> str:
    """``tests/m.py::test_f[param]`` -> ``tests/m.py::test_f``."""
    return nodeid.split("[", 1)[0]


def read() -> set[str]:
    """The test functions tests/slow_tests.txt lists."""
    if not LIST.exists():
        return set()
    lines = (line.strip() for line in LIST.read_text(encoding="utf-8").splitlines())
    return {line for line in lines if line and not line.startswith("#")}


def read_long() -> dict[str, float]:
    """The long items tests/long_items.txt lists, with their measured seconds."""
    if not LONG_LIST.exists():
        return {}
    long: dict[str, float] = {}
    for line in LONG_LIST.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            seconds, nodeid = line.split(maxsplit=1)
            long[nodeid] = float(seconds)
    return long


def item_seconds(report: str) -> dict[str, float]:
    """Each item's setup, call and teardown seconds together, from a ``--durations=0`` report."""
    seconds: dict[str, float] = defaultdict(float)
    for line in report.splitlines():
        m = DURATION.match(line)
        if m is not None:
            seconds[m.group(2)] += float(m.group(1))
    return dict(seconds)


def long_items(report: str) -> list[tuple[float, str]]:
    """The items of at least :data:`LONG_SECONDS` in a ``--durations=0`` report, longest
    first (the same seconds: by node id), with their seconds."""
    timed = item_seconds(report)
    return sorted(((s, i) for i, s in timed.items() if s >= LONG_SECONDS), key=lambda x: (-x[0], x[1]))


def slow_functions(report: str) -> list[str]:
    """The slow test functions of a ``--durations=0`` report."""
    total: dict[str, float] = defaultdict(float)
    longest: dict[str, float] = defaultdict(float)
    for line in report.splitlines():
        m = DURATION.match(line)
        if m is None or m.group(2).startswith(MARKED_MODULES):
            continue
        seconds, function = float(m.group(1)), function_of(m.group(2))
        total[function] += seconds
        longest[function] = max(longest[function], seconds)
    return sorted(f for f in total if longest[f] >= ITEM_SECONDS or total[f] >= FUNCTION_SECONDS)


def defines(nodeid: str, generated: bool = False) -> bool:
    """Whether the module of ``nodeid`` defines its test function (``def``, or a name bound
    to one); with ``generated``, also a module that makes its tests at import (ONNX's
    BackendTest classes, whose functions slow_tests.txt never lists: their marker is slow)."""
    path, *names = nodeid.split("[", 1)[0].split("::")
    module = Path(__file__).resolve().parent.parent / path
    if not module.exists():
        return False
    text = module.read_text(encoding="utf-8")
    name = names[-1]
    return f"def {name}(" in text or f"\n{name} = " in text or (generated and "globals().update(" in text)


def main(argv: list[str]) -> int:
    keep = "--keep" in argv
    argv = [a for a in argv if a != "--keep"]
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    functions = slow_functions(Path(argv[0]).read_text(encoding="utf-8"))
    if keep:
        functions = sorted(set(functions) | {f for f in read() if defines(f)})
    header = (
        "# Test functions marked `slow` (tests/slow_tests.py: an item of at least "
        f"{ITEM_SECONDS:g} s, or {FUNCTION_SECONDS:g} s in all),\n"
        "# measured in full runs; rewrite with tests/slow_tests.py (--keep: add to the list).\n"
    )
    LIST.write_text(header + "".join(f + "\n" for f in functions), encoding="utf-8")
    print(f"wrote {LIST}: {len(functions)} slow test functions")
    long = long_items(Path(argv[0]).read_text(encoding="utf-8"))
    header = (
        f"# Items of at least {LONG_SECONDS:g} s (setup, call and teardown), longest first, with their\n"
        "# seconds in a full run: tests/conftest.py starts them first. Rewrite with tests/slow_tests.py.\n"
    )
    LONG_LIST.write_text(header + "".join(f"{s:.1f} {i}\n" for s, i in long), encoding="utf-8")
    print(f"wrote {LONG_LIST}: {len(long)} long items")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
