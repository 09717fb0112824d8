"""Fixtures of make_fixtures.py: the valid inputs and the output places of the CLI's flag
cases (a graph, a plain graph, a directory byoc did not write, a FIFO, a bundle)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from make_bundles import valid_bundle
from make_npz_inputs import NPZ_GRAPH
from make_text_inputs import _graph

FIXTURES: dict[str, Callable[[Path], None]] = {}


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


@fixture
def cli_graph(d: Path) -> None:
    """A valid graph with a JSON-runtime region, for the flag cases."""
    (d / "g.graph").write_text(NPZ_GRAPH)


@fixture
def cli_plain_graph(d: Path) -> None:
    """A valid graph with no region: nothing to offload without --backend."""
    (d / "plain.graph").write_text(_graph("  return add(x, x)"))


@fixture
def cli_not_byoc_output(d: Path) -> None:
    """A graph, and an output directory that byoc did not write."""
    (d / "g.graph").write_text(NPZ_GRAPH)
    (d / "out").mkdir()
    (d / "out" / "keep.txt").write_text("mine\n")


@fixture
def cli_directory_named_graph(d: Path) -> None:
    (d / "dir.graph").mkdir()


@fixture
def cli_fifo_output(d: Path) -> None:
    """A graph, and a FIFO where the bundle should go: byoc must not replace a special
    file (as root, a rename over /dev/null would replace the device node)."""
    import os

    (d / "g.graph").write_text(NPZ_GRAPH)
    os.mkfifo(d / "out.byoc")


@fixture
def cli_bundle(d: Path) -> None:
    (d / "model.byoc").write_bytes(valid_bundle())
