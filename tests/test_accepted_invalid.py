"""Inputs byoc used to accept, or refuse with a traceback (byoc issue 31).

- a constant's values are range-checked as written, also in a tensor with no elements;
  the float types' largest values, as numpy prints them, are in range, and the next
  float up is not;
- a ``${name}`` in a c_source macro's body (C, copied into the file as is) is a located
  SpecError, where it reached the C compiler before; an engine macro's body, which the
  generator renders, still takes ``${ctype}``;
- an output path or file name too long for the file system, and a path argument that
  is not valid UTF-8, are clean usage errors (exit 2), not OSError or
  UnicodeEncodeError tracebacks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import run_cli
from mini_spec import C_SOURCE

from byoc.api import parse
from byoc.atomic import write_directory, write_file
from byoc.errors import GraphError, SpecError, UsageError
from byoc.spec import load_backend_file

# ------------------------------------------------------------------ constants


def const_graph(dtype: str, dims: str, values: str) -> str:
    return f"graph main() {{\n  k = const {dtype}[{dims}] {values}\n  return k\n}}\n"


@pytest.mark.parametrize(
    ("dtype", "value"),
    [("float32", "1e39"), ("float16", "65520"), ("bfloat16", "3.4e38"), ("int8", "300"), ("uint8", "-1")],
)
@pytest.mark.parametrize("dims", ["0", "2, 0, 3"])
def test_a_constant_with_no_elements_still_checks_its_value(dtype, value, dims):
    with pytest.raises(GraphError, match="out of range") as info:
        parse(const_graph(dtype, dims, value), "graph")
    assert (info.value.location.line, info.value.location.column) == (2, 7)


def test_a_constant_with_no_elements_still_checks_its_words():
    with pytest.raises(GraphError, match="cannot hold nan"):
        parse(const_graph("int32", "0", "nan"), "graph")
    with pytest.raises(GraphError, match="takes true or false"):
        parse(const_graph("bool", "0", "1"), "graph")
    assert parse(const_graph("float32", "0", "1e30"), "graph").functions[0].constants[0].values.size == 0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_the_largest_float_as_numpy_prints_it_is_in_range_and_the_next_is_not(dtype):
    high = ml_dtypes.finfo(dtype).max
    text = str(high) if dtype != "float64" else repr(float(high))
    values = parse(const_graph(dtype, "2", f"[{text}, -{text}]"), "graph").functions[0].constants[0].values
    assert values.tobytes() == np.array([high, -high], dtype).tobytes()
    # the next float up, as a double: half a unit in the last place beyond the largest
    ulp = float(high) - float(np.nextafter(high, np.array(0, dtype)))
    beyond = repr(float(high) + ulp) if dtype != "float64" else "1.8e308"
    with pytest.raises(GraphError, match=f"out of range for {dtype}"):
        parse(const_graph(dtype, "1", f"[{beyond}]"), "graph")


def test_a_literal_that_overflows_is_not_an_infinity_written_as_such():
    assert parse(const_graph("float64", "2", "[inf, -inf]"), "graph")
    for text in ("[inf, 1e400]", "[-1e400, -inf]"):
        with pytest.raises(GraphError, match="out of range for float64"):
            parse(const_graph("float64", "2", text), "graph")


def test_float32s_largest_value_is_accepted_and_3_5e38_is_not():
    assert parse(const_graph("float32", "1", "3.4028235e+38"), "graph")
    for text in ("3.5e38", "-3.5e38", "3.4028236e+38"):
        with pytest.raises(GraphError, match="out of range for float32") as info:
            parse(const_graph("float32", "1", text), "graph")
        assert "write inf or -inf" in info.value.hint


# ------------------------------------------------------------------ macro bodies


@pytest.mark.parametrize("name", ["opt_level", "backend", "symbol_prefix", "symbol", "in0_dim0", "x"])
def test_a_placeholder_in_a_c_source_macro_body_is_refused_at_load(tmp_path, name):
    text = C_SOURCE.replace("out[i] = a[i]", f"out[i] = ${{{name}}} + a[i]")
    path = tmp_path / "mini.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_backend_file(path)
    err = info.value
    assert f"${{{name}}} in the body of macro BIN_1D" in err.message
    assert (err.location.line, err.location.column) == (18, 49)
    assert "p_X_" in err.hint


def test_the_unchanged_c_source_spec_loads(tmp_path):
    path = tmp_path / "mini.yaml"
    path.write_text(C_SOURCE)
    assert "BIN_1D" in load_backend_file(path).macros


def test_an_engine_macro_body_still_renders_ctype():
    root = Path(__file__).resolve().parents[1]
    spec = load_backend_file(root / "spec" / "backends" / "engine" / "engine.yaml")
    assert any("${ctype}" in m.body for m in spec.macros.values())


# ------------------------------------------------------------------ paths


GRAPH = "graph main(x: float32[4], y: float32[4]) {\n  s = @ccompiler {\n    return add(x, y)\n  }\n  return s\n}\n"


@pytest.mark.parametrize(
    ("command", "suffix"), [("gen", ""), ("gen", "/sub"), ("build", ".byoc"), ("run", ".npz")]
)
def test_an_output_path_too_long_for_the_file_system_is_a_usage_error(tmp_path, capsys, command, suffix):
    graph = tmp_path / "g.graph"
    graph.write_text(GRAPH)
    long = tmp_path / ("a" * 300 + suffix)
    argv = [command, graph, "-o", long] if command != "run" else [command, graph, "--save-outputs", long]
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2, err
    assert err.startswith("usage error: ") and "File name too long" in err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_an_artifact_name_too_long_is_a_usage_error_naming_it(tmp_path):
    with pytest.raises(UsageError, match="File name too long") as info:
        write_directory(tmp_path / "out", {"a.c": "x", "b" * 300 + ".graph.json": "{}"})
    assert "b" * 300 in info.value.message and "shorter" in info.value.hint
    assert sorted(os.listdir(tmp_path)) == []  # the staging directory is gone, no partial output
    with pytest.raises(UsageError, match="File name too long"):
        write_file(tmp_path / ("c" * 300), "x")


def test_a_path_argument_that_is_not_utf8_is_a_usage_error(tmp_path):
    """Run in a subprocess: the argument reaches byoc as bytes, as from a shell."""
    raw = os.fsencode(tmp_path) + b"/g\xff.graph"
    with open(raw, "w") as handle:
        handle.write(GRAPH)
    for argv in ([b"run", raw], [b"gen", os.fsencode(tmp_path / "g2.graph"), b"-o", raw + b".out"]):
        done = subprocess.run(
            [os.fsencode(sys.executable), b"-m", b"byoc", *argv], capture_output=True, cwd=tmp_path
        )
        err = done.stderr.decode("utf-8", "replace")
        assert done.returncode == 2, err
        assert "Traceback" not in err
        assert err.startswith("usage error: argument ") and "is not valid UTF-8" in err
        assert "\\xff" in err
