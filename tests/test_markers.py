"""The test markers: registered, and tests/slow_tests.txt naming real test functions."""

from __future__ import annotations

import re
from pathlib import Path

from slow_tests import FUNCTION_SECONDS, ITEM_SECONDS, MARKED_MODULES, read, slow_functions

REPO = Path(__file__).resolve().parents[1]


def test_the_markers_are_registered():
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")  # tomllib is Python 3.11+
    block = re.search(r"^markers = \[\n(.*?)^\]", text, re.M | re.S)
    assert block is not None
    registered = set(re.findall(r'^ +"([a-z_]+):', block.group(1), re.M))
    assert registered == {"slow", "network", "sanitizers", "onnx_suite"}
    assert re.search(r'^addopts = ".*--strict-markers', text, re.M)


def test_every_listed_slow_function_exists():
    listed = read()
    assert listed, "tests/slow_tests.txt lists no test function"
    for entry in sorted(listed):
        path, *names = entry.split("::")
        text = (REPO / path).read_text(encoding="utf-8")
        name = names[-1]
        assert f"def {name}(" in text or f"\n{name} = " in text, f"{entry}: no such test function"


def test_a_durations_report_gives_the_slow_functions():
    item, total = ITEM_SECONDS, FUNCTION_SECONDS
    report = "\n".join(
        [
            f"{item + 0.01:.2f}s call     tests/test_a.py::test_one_long_item[x]",
            f"{item - 0.5:.2f}s call     tests/test_a.py::test_many_items[1]",
            f"{total - item + 0.6:.2f}s call     tests/test_a.py::test_many_items[2]",
            f"{item - 0.1:.2f}s setup    tests/test_a.py::test_quick",
            f"{item + 5:.2f}s call     {MARKED_MODULES[0]}::test_marked_by_its_module",
            "== 3 passed in 9.00s ==",
        ]
    )
    assert slow_functions(report) == [
        "tests/test_a.py::test_many_items",
        "tests/test_a.py::test_one_long_item",
    ]
