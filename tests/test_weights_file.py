"""External constants: a graph text's weights file (``weights "w.npz" sha256 "..."``)
and constants that name its entries (``const float32[2, 3] weights["k"]``)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import byoc
from byoc.building import build
from byoc.runtime import load

DTYPES = ("float32", "float64", "int32", "int64", "int8", "uint8")


def write_weights(directory: Path, arrays: dict[str, np.ndarray], name: str = "w.npz") -> str:
    """Save ``arrays`` as ``directory/name``; return the file's SHA-256 digest."""
    np.savez(directory / name, **arrays)
    return hashlib.sha256((directory / name).read_bytes()).hexdigest()


def graph_text(digest: str, body: str, params: str = "x: float32[2, 3]") -> str:
    return f'weights "w.npz" sha256 "{digest}"\ngraph main({params}) {{\n{body}\n}}\n'


def test_values_come_from_the_file_and_the_printer_keeps_the_reference(tmp_path):
    k = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    digest = write_weights(tmp_path, {"conv1.weight": k})
    source = tmp_path / "g.graph"
    source.write_text(
        graph_text(digest, '  k = const float32[2, 3] weights["conv1.weight"]\n  return add(x, k)')
    )
    program = byoc.parse_file(source)
    constant = program.functions[0].constants[0]
    assert constant.values.dtype == k.dtype and constant.values.tobytes() == k.tobytes()
    np.testing.assert_array_equal(constant.array, k)
    assert (constant.source.file, constant.source.sha256, constant.source.entry) == (
        "w.npz",
        digest,
        "conv1.weight",
    )
    text = byoc.print_program(program)
    assert text.startswith(f'weights "w.npz" sha256 "{digest}"\n')
    assert 'weights["conv1.weight"]' in text and str(float(k[0, 0])) not in text
    again = byoc.parse(text, file=str(source))
    assert again == program and again.functions[0].constants[0].source == constant.source
    x = np.ones((2, 3), np.float32)
    (got,) = byoc.evaluate(again.functions[0], {"x": x})
    np.testing.assert_array_equal(got, x + k)
    # inlined, the text stands alone: the same program, no reference left
    inline = byoc.print_program(program, inline_weights=True)
    assert "weights" not in inline
    assert byoc.parse(inline) == program


def test_a_weights_file_is_found_next_to_the_graph_not_in_the_working_directory(tmp_path):
    (tmp_path / "models").mkdir()
    digest = write_weights(tmp_path / "models", {"k": np.zeros((2, 3), np.float32)})
    (tmp_path / "models" / "g.graph").write_text(
        graph_text(digest, '  k = const float32[2, 3] weights["k"]\n  return add(x, k)')
    )
    out = subprocess.run(
        [sys.executable, "-m", "byoc", "parse", "models/g.graph"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert 'weights["k"]' in out.stdout


def test_a_region_constant_is_external_too(tmp_path):
    k = np.arange(6, dtype=np.float32).reshape(2, 3)
    digest = write_weights(tmp_path, {"k": k})
    body = (
        '  s = @json {\n    k = const float32[2, 3] weights["k"]\n    return multiply(x, k)\n  }\n  return s'
    )
    program = byoc.parse(graph_text(digest, body), file=str(tmp_path / "g.graph"))
    text = byoc.print_program(program)
    assert text.count("weights") == 2  # the declaration and the region's constant
    assert byoc.parse(text, file=str(tmp_path / "g.graph")) == program


def test_a_bundle_runs_after_the_weights_file_is_deleted(tmp_path):
    rng = np.random.default_rng(1)
    k = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3,)).astype(np.float32)
    digest = write_weights(tmp_path, {"k": k, "b": b})
    body = (
        '  k = const float32[2, 3] weights["k"]\n  b = const float32[3] weights["b"]\n'
        "  s = @json { return add(multiply(x, k), b) }\n  return s, subtract(s, k)"
    )
    source = tmp_path / "g.graph"
    source.write_text(graph_text(digest, body))
    program = byoc.parse_file(source)
    build(source).save(tmp_path / "model.byoc")
    (tmp_path / "w.npz").unlink()
    x = rng.standard_normal((2, 3)).astype(np.float32)
    got = load(tmp_path / "model.byoc").run("main", x=x)
    want = byoc.evaluate(program.functions[0], {"x": x})
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    out = subprocess.run(
        [sys.executable, "-m", "byoc", "run", "model.byoc"], cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(" ok") == 2, out.stdout


@st.composite
def external_constants(draw):
    """Arrays of every dtype and small shapes, some of them inline instead."""
    count = draw(st.integers(1, 4))
    arrays, inline = {}, []
    for k in range(count):
        dtype = draw(st.sampled_from(DTYPES))
        shape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=3)))
        info = np.iinfo(dtype) if dtype[0] in "iu" else None
        if info is not None:
            values = draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=1, max_size=1))
            array = np.full(shape, values[0], dtype)
            array.flat[0] = draw(st.integers(int(info.min), int(info.max)))
        else:
            array = np.asarray(
                draw(
                    st.lists(
                        st.floats(-1e6, 1e6, width=32),
                        min_size=int(np.prod(shape)),
                        max_size=int(np.prod(shape)),
                    )
                ),
                dtype,
            ).reshape(shape)
        arrays[f"w{k}/{dtype}"] = array
        inline.append(draw(st.booleans()))
    return arrays, inline


@settings(max_examples=25, deadline=None)
@given(external_constants())
def test_roundtrip_of_external_and_inline_constants(tmp_path_factory, case):
    arrays, inline = case
    directory = tmp_path_factory.mktemp("weights")
    digest = write_weights(directory, arrays)
    lines = []
    for k, ((entry, array), inlined) in enumerate(zip(arrays.items(), inline)):
        type_ = f"{array.dtype}[{', '.join(map(str, array.shape))}]"
        values = "[" + ", ".join(map(repr, array.ravel().tolist())) + "]"
        lines.append(
            f"  c{k} = const {type_} {values if inlined else f'weights[{entry!r}]'}".replace("'", '"')
        )
    lines.append("  return " + ", ".join(f"c{k}" for k in range(len(arrays))))
    file = str(directory / "g.graph")
    program = byoc.parse(graph_text(digest, "\n".join(lines), params=""), file=file)
    text = byoc.print_program(program)
    again = byoc.parse(text, file=file)
    assert again == program
    assert byoc.print_program(again) == text
    for constant, array, inlined in zip(again.functions[0].constants, arrays.values(), inline):
        assert (constant.source is None) == inlined
        np.testing.assert_array_equal(np.asarray(constant.values, array.dtype).reshape(array.shape), array)
