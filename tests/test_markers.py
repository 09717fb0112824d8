"""The test markers: registered, and tests/slow_tests.txt and tests/long_items.txt naming real tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from slow_tests import (
    FUNCTION_SECONDS,
    ITEM_SECONDS,
    LONG_SECONDS,
    MARKED_MODULES,
    defines,
    long_items,
    read,
    read_long,
    slow_functions,
)

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
        assert defines(entry), f"{entry}: no such test function"


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


def test_every_listed_long_item_is_a_test_function_of_the_suite():
    long = read_long()
    assert long, "tests/long_items.txt lists no item"
    assert list(long.values()) == sorted(long.values(), reverse=True), "longest first"
    for nodeid in long:
        assert defines(nodeid, generated=True), f"{nodeid}: no such test function"


def test_a_durations_report_gives_the_long_items_longest_first():
    half = LONG_SECONDS / 2
    report = "\n".join(
        [
            f"{half + 0.1:.2f}s setup    tests/test_a.py::test_build[x]",
            f"{half:.2f}s call     tests/test_a.py::test_build[x]",  # long only with its setup
            f"{LONG_SECONDS + 9:.2f}s call     tests/test_a.py::test_longest",
            f"{LONG_SECONDS - 0.1:.2f}s call     tests/test_a.py::test_short",
        ]
    )
    found = long_items(report)
    assert [nodeid for _, nodeid in found] == [
        "tests/test_a.py::test_longest",
        "tests/test_a.py::test_build[x]",
    ]
    assert [seconds for seconds, _ in found] == pytest.approx([LONG_SECONDS + 9, half * 2 + 0.1])


def test_keep_adds_to_the_slow_list_and_drops_what_no_longer_exists(tmp_path, monkeypatch):
    import slow_tests

    listed = tmp_path / "slow_tests.txt"
    listed.write_text(
        "# header\ntests/test_markers.py::test_the_markers_are_registered\ntests/test_markers.py::test_gone\n"
    )
    monkeypatch.setattr(slow_tests, "LIST", listed)
    monkeypatch.setattr(slow_tests, "LONG_LIST", tmp_path / "long_items.txt")
    report = tmp_path / "durations.txt"
    report.write_text(
        f"{ITEM_SECONDS + 1}s call     tests/test_markers.py::test_every_listed_slow_function_exists\n"
    )
    assert slow_tests.main([str(report), "--keep"]) == 0
    kept = {line for line in listed.read_text().splitlines() if not line.startswith("#")}
    assert kept == {
        "tests/test_markers.py::test_the_markers_are_registered",  # kept: still defined
        "tests/test_markers.py::test_every_listed_slow_function_exists",  # measured slow
    }
    assert slow_tests.main([str(report)]) == 0  # without --keep: the report alone
    assert {line for line in listed.read_text().splitlines() if not line.startswith("#")} == {
        "tests/test_markers.py::test_every_listed_slow_function_exists"
    }
