"""What the engine refuses: calls of a generated entry with bad arguments (nothing is
written), and graphs it cannot run (located errors when generating)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import random_array
from gen_engine_support import GEN, build, empty_outputs, generate, graph_program

from byoc.api import parse
from byoc.errors import GraphError


def line_of(path: Path, fragment: str) -> int:
    """The 1-based line of ``path`` holding ``fragment`` (so tests need no line numbers)."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if fragment in line:
            return number
    raise AssertionError(f"{fragment!r} is not in {path}")


# ------------------------------------------------------------------ calls from Python


@pytest.fixture(scope="module")
def dag_lib(catalog, tmp_path_factory):
    externals, artifacts = generate(graph_program("dag"), catalog)
    return externals[0], build(artifacts, tmp_path_factory.mktemp("dag"))


def test_bad_calls_raise(dag_lib, rng):
    fn, lib = dag_lib
    f = lib[fn.name]
    x, y = (random_array(rng, p.type.shape, p.type.dtype) for p in fn.params)
    out = empty_outputs(fn)[0]
    with pytest.raises(TypeError, match="expected 3 arguments"):
        f(x, y)
    with pytest.raises(ValueError, match=r"must have shape \[4, 4\]"):
        f(x, y, np.zeros((4, 5), "float32"))
    with pytest.raises(TypeError, match="must be float32"):
        f(x.astype("float64"), y, out)
    with pytest.raises(ValueError, match="must have rank 2"):
        f(x, y, np.zeros(16, "float32"))
    with pytest.raises(TypeError, match="must be a tensor"):
        f(x, 1.0, out)
    with pytest.raises(ValueError, match="contiguous"):
        f(np.zeros((4, 8), "float32")[:, ::2], y, out)
    assert np.isnan(out).all()  # nothing was written by the failed calls


# ------------------------------------------------------------------ graphs the engine cannot run


def test_shipped_spec_rejects_float64(catalog):
    with pytest.raises(GraphError) as info:
        generate(graph_program("float64"), catalog)
    loc = info.value.location
    assert loc is not None and loc.file == "tests/data/gen/float64.graph"
    assert loc.line == line_of(GEN / "float64.graph", "return multiply(subtract(x, y), add(x, y))")
    assert "engine" in info.value.message


REJECTED = {
    "broadcast": (
        "graph main(x: float32[2, 3], y: float32[1, 3]) {\n  s = @engine {\n    return add(x, y)\n  }\n  return s\n}\n",
        3,
        "cannot broadcast",
    ),
    "missing op": (
        "graph main(x: float32[2, 3], y: float32[2, 3]) {\n  s = @engine {\n    return concatenate(x, y)\n  }\n  return s\n}\n",
        3,
        "no op 'concatenate'",
    ),
    "rank 9": (
        "graph main(x: float32[1, 1, 1, 1, 1, 1, 1, 2, 2]) {\n  s = @engine {\n    return add(x, x)\n  }\n  return s\n}\n",
        3,
        r"cannot run add on float32\[1, 1, 1, 1, 1, 1, 1, 2, 2\]",
    ),
    "int32": (
        "graph main(x: int32[2, 3], y: int32[2, 3]) {\n  s = @engine {\n    return add(x, y)\n  }\n  return s\n}\n",
        3,
        r"cannot run add on int32\[2, 3\]",
    ),
    "name clash": (
        "graph main(x: float32[2, 3]) {\n  s = @engine as f { return add(x, x) }\n"
        "  t = @engine as f_wrapper { return add(x, x) }\n  return s, t\n}\n",
        3,
        "clashes",
    ),
}


@pytest.mark.parametrize("case", REJECTED)
def test_regions_the_engine_cannot_run(case, catalog):
    text, line, message = REJECTED[case]
    with pytest.raises(GraphError, match=message) as info:
        generate(parse(text, "graph", file="bad.graph"), catalog)
    assert info.value.location is not None
    assert (info.value.location.file, info.value.location.line) == ("bad.graph", line)
