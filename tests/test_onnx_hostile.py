"""Hostile ONNX models: every one ends in a located ByocError (naming the model file,
and the ONNX node where there is one) or imports and runs correctly.

* File names are data: a name holding a line break, a quote or a backslash can
  neither add a graph to the imported text nor break it.
* Errors the parser finds in the imported text name the model and the node, never a
  temporary file.
* Initializers named like ``np.savez``'s own arguments (``file``, ``allow_pickle``)
  import and run.
* ``byoc import`` writes NAME.graph and NAME.npz together or not at all.

The same hostile models run through the CLI in tests/data/bad/cases.yaml; here they
run through the API, and the hint is checked too.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, run_cli

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import byoc  # noqa: E402
from byoc.cli import onnx_import  # noqa: E402
from byoc.errors import ByocError, GraphError, ParseError, UsageError  # noqa: E402
from byoc.onnx.model_import import dsl_string, import_program, max_opset  # noqa: E402

RNG = np.random.default_rng(5)


def _fixtures():
    spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "bad" / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FIXTURES


FIXTURES = _fixtures()


def add_model(w: np.ndarray, weight_name: str = "w"):
    """y = x + w for x: float32 of w's shape, w an initializer named ``weight_name``."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", weight_name], ["y"], name="add")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(w.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(w.shape))],
        [numpy_helper.from_array(w, weight_name)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def save(model, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


W = RNG.standard_normal((3, 4)).astype(np.float32)  # 12 values: a weights-file entry, not inline
X = RNG.standard_normal((3, 4)).astype(np.float32)


def outputs_of(program, x: np.ndarray = X) -> np.ndarray:
    (y,) = byoc.evaluate(program.functions[0], {"x": x})
    return np.asarray(y)


# ------------------------------------------------------------------ file names are data

INJECTION = "m\ngraph evil(a: float32[1]) { return a }\n#.onnx"


def test_a_file_name_cannot_add_a_graph(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = save(add_model(W), tmp_path / INJECTION)
    out = tmp_path / "out"
    out.mkdir()
    rc, _, err = run_cli(capsys, "import", model, "-o", out)
    assert rc == 0, err
    stem = INJECTION.removesuffix(".onnx")
    graph = out / f"{stem}.graph"
    text = graph.read_text(encoding="utf-8")
    assert not any(line.startswith("graph evil") for line in text.splitlines()), text
    assert [line.split("(")[0] for line in text.splitlines() if line.startswith("graph ")] == ["graph main"]
    program = byoc.parse_file(graph)
    assert [fn.name for fn in program.functions] == ["main"]
    np.testing.assert_array_equal(outputs_of(program), X + W)
    rc, out_text, err = run_cli(capsys, "run", graph, "--backend", "json")
    assert rc == 0, err
    assert "graph main:" in out_text and "graph evil:" not in out_text  # one graph ran: main
    direct = import_program(model)
    assert [fn.name for fn in direct.functions] == ["main"]


@pytest.mark.parametrize(
    "name",
    ['q"uote.onnx', "back\\slash.onnx", "tab\there.onnx", "caf\u00e9 \u2028line.onnx", 'all"\\\r\n.onnx'],
    ids=["quote", "backslash", "tab", "unicode-line-separator", "quote-backslash-crlf"],
)
def test_odd_file_names_import_and_run(tmp_path, capsys, name):
    model = save(add_model(W), tmp_path / name)
    program = import_program(model)  # in memory (byoc run/gen/parse MODEL.onnx)
    np.testing.assert_array_equal(outputs_of(program), X + W)
    out = tmp_path / "out"
    out.mkdir()
    rc, _, err = run_cli(capsys, "import", model, "-o", out)
    assert rc == 0, err
    stem = name.removesuffix(".onnx")
    assert sorted(p.name for p in out.iterdir()) == sorted([f"{stem}.graph", f"{stem}.npz"])
    graph = out / f"{stem}.graph"
    assert f"weights {dsl_string(stem + '.npz')} sha256" in graph.read_text(encoding="utf-8")
    np.testing.assert_array_equal(outputs_of(byoc.parse_file(graph)), X + W)


def test_dsl_string_escapes_everything_that_ends_a_string_or_line():
    for text in ['a"b', "a\\b", "a\nb", "a\rb", "a\x0cb", "a\u2028b", "a\x00b", 'x"\n graph evil']:
        literal = dsl_string(text)
        assert "\n" not in literal and "\r" not in literal and "\u2028" not in literal
        inner = literal[1:-1]
        assert '"' not in inner.replace('\\"', "")
        assert bytes(inner, "utf-8").decode("unicode_escape") == text  # what the parser decodes


# ------------------------------------------------------------------ errors name the model and the node


def test_an_error_in_the_imported_text_names_the_model_and_node(tmp_path, capsys):
    FIXTURES["onnx_conv_zero_stride"](tmp_path)
    model = tmp_path / "m.onnx"
    with pytest.raises(GraphError) as info:
        import_program(model)
    error = info.value
    assert error.location is None  # the text is never shown: it is nobody's file
    assert str(error).startswith(f"{model}: ONNX node 0 (Conv 'c', opset 13): conv(")
    assert "strides[0] = 0 must be positive" in str(error)
    assert "byoc-onnx-" not in error.render() and "m.graph" not in error.render()
    rc, _, err = run_cli(capsys, "import", model, "-o", tmp_path)
    assert rc == 2
    assert "ONNX node 0 (Conv 'c', opset 13)" in err and "m.graph" not in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


# ------------------------------------------------------------------ weights named like savez's arguments


@pytest.mark.parametrize("weight_name", ["file", "allow_pickle", "arr_0", "args", "kwds", "x.npy"])
def test_initializers_named_like_savez_arguments(tmp_path, capsys, weight_name):
    model = save(add_model(W, weight_name), tmp_path / "m.onnx")
    np.testing.assert_array_equal(outputs_of(import_program(model)), X + W)
    rc, _, err = run_cli(capsys, "import", model, "-o", tmp_path)
    assert rc == 0, err
    with np.load(tmp_path / "m.npz", allow_pickle=False) as data:
        assert data.files == [weight_name]
        np.testing.assert_array_equal(data[weight_name], W)
    np.testing.assert_array_equal(outputs_of(byoc.parse_file(tmp_path / "m.graph")), X + W)


def test_npz_bytes_is_what_savez_writes():
    """The mapping-based writer keeps the archives' bytes (and so their digests)."""
    import io

    from byoc.npz_files import npz_bytes

    arrays = {"w": W, "b": np.arange(5, dtype=np.int64), "flag": np.array([True, False])}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    assert npz_bytes(arrays) == buffer.getvalue()


# ------------------------------------------------------------------ each hostile model: a located error with a hint

HOSTILE = [
    ("onnx_external_offset_negative", ParseError, "at offset '-4', which is not a number of bytes"),
    ("onnx_external_offset_not_a_number", ParseError, "at offset 'abc', which is not a number of bytes"),
    ("onnx_external_offset_overflow", ParseError, "past the end of the file (24 bytes)"),
    ("onnx_external_length_negative", ParseError, "at length '-1', which is not a number of bytes"),
    ("onnx_external_length_overflow", ParseError, "at bytes 0..99999999999999999999999, past the end"),
    ("onnx_external_data_directory", ParseError, "keeps its data in 'data', which is not a regular file"),
    ("onnx_external_data_no_location", ParseError, "keeps its data in another file, but names none"),
    ("onnx_external_data_nul_in_location", ParseError, "which is not a file name (it holds a NUL character)"),
    (
        "onnx_raw_data_not_whole_elements",
        ParseError,
        "tensor 'w' (2x3) has data that does not fill its shape",
    ),
    (
        "onnx_non_utf8_node_name",
        ParseError,
        "the string graph.node[0].name (b'N\\xff\\xfeENAME') is not UTF-8",
    ),
    (
        "onnx_non_utf8_input_name",
        ParseError,
        "the string graph.node[0].input[0] (b'X\\xff\\xfePUT') is not UTF-8",
    ),
    ("onnx_non_utf8_initializer_name", ParseError, "(b'W\\xff\\xfeGHTS') is not UTF-8 text"),
    ("onnx_non_utf8_attribute", GraphError, "ONNX node 0 (Pad 'n0', opset 13): its attribute 'mode'"),
    (
        "onnx_same_upper_zero_stride",
        GraphError,
        "ONNX node 0 (Conv 'c', opset 13): strides [0, 0] with auto_pad",
    ),
    ("onnx_same_lower_zero_stride_pool", GraphError, "ONNX node 0 (MaxPool 'c', opset 13): strides [1, 0]"),
    ("onnx_conv_kernel_shape_mismatch", GraphError, "its kernel_shape [2, 2] disagrees with its weights 'W'"),
    (
        "onnx_cast_unknown_type",
        GraphError,
        "ONNX node 0 (Cast 'n0', opset 13): byoc does not support a Cast to 77",
    ),
    ("onnx_cast_unknown_type_folded", GraphError, "a Cast to 77, an element type ONNX does not define"),
    (
        "onnx_split_axis_out_of_range",
        GraphError,
        "(Split 'n0', opset 11): axis 5 is out of range for an input of rank 2",
    ),
    (
        "onnx_split_axis_out_of_range_num_outputs",
        GraphError,
        "(Split 'n0', opset 18): axis -3 is out of range",
    ),
    ("onnx_clip_empty_bound", GraphError, "(Clip 'n0', opset 13): its Clip min input holds 0 values"),
    ("onnx_clip_bound_of_two_values", GraphError, "its Clip max input holds 2 values (shape [2]), not one"),
    ("onnx_pad_empty_value", GraphError, "(Pad 'n0', opset 13): its Pad constant_value input holds 0 values"),
    (
        "onnx_expand_scalar_shape",
        GraphError,
        "(Expand 'n0', opset 13): its shape input is of rank 0, not a 1-D",
    ),
    ("onnx_softmax_axis_out_of_range", GraphError, "(Softmax 'n0', opset 11): axis 5 is out of range"),
    ("onnx_opset_too_new", GraphError, "uses ONNX opset 99; byoc imports opsets 6 to"),
    # earlier cases, whose messages now name the model first too
    ("onnx_complex_input", GraphError, "input 'x' has dtype complex64, which byoc does not support"),
    ("onnx_sequence_input", GraphError, "input 'x' is a sequence, not a tensor"),
    (
        "onnx_unsupported_op",
        GraphError,
        "ONNX node 1 (Unique 'hm', opset 13): byoc does not support this op",
    ),
]


@pytest.mark.parametrize(("fixture", "kind", "fragment"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_model_is_a_located_error(tmp_path, fixture, kind, fragment):
    FIXTURES[fixture](tmp_path)
    model = tmp_path / "m.onnx"
    with pytest.raises(ByocError) as info:
        import_program(model)
    error = info.value
    assert type(error) is kind, error.render()
    assert str(error).startswith(f"{model}"), str(error)  # names the model file first
    assert fragment in str(error)
    assert error.hint, error.render()


def test_opset_too_new_names_the_opsets_byoc_reads(tmp_path):
    FIXTURES["onnx_opset_too_new"](tmp_path)
    with pytest.raises(GraphError, match=rf"byoc imports opsets 6 to {max_opset()}$"):
        import_program(tmp_path / "m.onnx")
    assert max_opset() == onnx.defs.onnx_opset_version()


def test_external_data_in_a_fifo_is_never_opened(tmp_path):
    """A FIFO would block the reader until a writer comes: a subprocess with a timeout."""
    FIXTURES["onnx_external_data_fifo"](tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "byoc", "import", "m.onnx"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "keeps its data in 'pipe', which is not a regular file" in proc.stderr
    assert "missing" not in proc.stderr and "Traceback" not in proc.stderr


def test_external_data_within_the_file_still_loads(tmp_path):
    """The checks of offset and length refuse nothing valid: an explicit extent."""
    data = np.arange(12, dtype=np.float32)
    (tmp_path / "w.bin").write_bytes(b"\0" * 8 + data.tobytes())
    model = add_model(W)
    w = model.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("offset", "8"), ("length", str(data.nbytes))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    program = import_program(save(model, tmp_path / "m.onnx"))
    np.testing.assert_array_equal(outputs_of(program), X + data.reshape(3, 4))


# ------------------------------------------------------------------ what the new checks still accept


def test_in_range_axes_and_matching_kernel_shape_still_import(tmp_path):
    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node(
            "Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], auto_pad="SAME_UPPER", strides=[2, 2]
        ),
        helper.make_node("Split", ["c"], ["a", "b"], axis=-1, split=[1, 2]),
        helper.make_node("Softmax", ["b"], ["y"], axis=-3),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 3, 2])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    onnxruntime = pytest.importorskip("onnxruntime")
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"x": x})
    (got,) = byoc.evaluate(import_program(model).functions[0], {"x": x})
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ byoc import: both files or neither


def test_a_failed_import_writes_nothing(tmp_path, capsys):
    FIXTURES["onnx_conv_zero_stride"](tmp_path)  # fails when the imported text is parsed
    out = tmp_path / "out"
    out.mkdir()
    rc, _, err = run_cli(capsys, "import", tmp_path / "m.onnx", "-o", out)
    assert rc == 2, err
    assert list(out.iterdir()) == []


def test_a_failed_reimport_keeps_the_earlier_import(tmp_path, capsys):
    model = save(add_model(W), tmp_path / "m.onnx")
    rc, _, err = run_cli(capsys, "import", model, "-o", tmp_path)
    assert rc == 0, err
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for fixture in ("onnx_conv_zero_stride", "onnx_conv_kernel_shape_mismatch"):
        FIXTURES[fixture](tmp_path)  # a bad m.onnx over the good one
        rc, _, err = run_cli(capsys, "import", model, "-o", tmp_path)
        assert rc == 2, err
        after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "m.onnx"}
        assert after == {k: v for k, v in before.items() if k != "m.onnx"}
    np.testing.assert_array_equal(outputs_of(byoc.parse_file(tmp_path / "m.graph")), X + W)


def test_an_unwritable_graph_path_leaves_the_weights_alone(tmp_path, capsys):
    model = save(add_model(W), tmp_path / "m.onnx")
    out = tmp_path / "out"
    (out / "m.graph").mkdir(parents=True)
    rc, _, err = run_cli(capsys, "import", model, "-o", out)
    assert rc == 2
    assert "cannot write" in err and "m.graph" in err
    assert sorted(p.name for p in out.iterdir()) == ["m.graph"]


def test_write_together_puts_back_the_first_file_when_the_second_rename_fails(tmp_path, monkeypatch):
    first, second = tmp_path / "m.npz", tmp_path / "m.graph"
    first.write_bytes(b"old weights")
    second.write_bytes(b"old graph")
    real_replace, calls = os.replace, []

    def failing_replace(src, dst):
        calls.append(Path(dst).name)
        if Path(dst) == second:
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(UsageError, match="cannot write .*m.graph: No space left on device"):
        onnx_import.write_together([(first, b"new weights"), (second, b"new graph")])
    assert calls[:2] == ["m.npz", "m.graph"]
    assert first.read_bytes() == b"old weights" and second.read_bytes() == b"old graph"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.graph", "m.npz"]  # no temporaries left


def test_write_together_removes_a_new_first_file_when_the_second_fails(tmp_path, monkeypatch):
    first, second = tmp_path / "m.npz", tmp_path / "m.graph"
    real_replace = os.replace

    def failing_replace(src, dst):
        if Path(dst) == second:
            raise OSError(13, "Permission denied")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(UsageError):
        onnx_import.write_together([(first, b"new weights"), (second, b"new graph")])
    assert list(tmp_path.iterdir()) == []


def test_write_together_without_hard_links(tmp_path, monkeypatch):
    """Where the file system has no hard links, the old file is kept aside as a copy."""
    first, second = tmp_path / "m.npz", tmp_path / "m.graph"
    first.write_bytes(b"old weights")
    real_replace = os.replace

    def no_link(src, dst, **kwargs):
        raise OSError(1, "Operation not permitted")

    def failing_replace(src, dst):
        if Path(dst) == second:
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "link", no_link)
    onnx_import.write_together([(first, b"new weights"), (second, b"new graph")])
    assert first.read_bytes() == b"new weights" and second.read_bytes() == b"new graph"
    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(UsageError):
        onnx_import.write_together([(first, b"newer weights"), (second, b"newer graph")])
    assert first.read_bytes() == b"new weights" and second.read_bytes() == b"new graph"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.graph", "m.npz"]


def test_shape_of_an_input_too_large_for_an_array_is_a_located_error(tmp_path):
    """Shape of an input whose static dims multiply past 2**63 (a fuzzer's mutant: one
    dim of 2**62) folds through no array: the node is named, numpy's ValueError is not
    what the user sees."""
    node = helper.make_node("Shape", ["x"], ["s"], name="shape_of_x")
    graph = helper.make_graph(
        [node],
        "huge",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 2**62])],
        [helper.make_tensor_value_info("s", TensorProto.INT64, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(GraphError) as info:
        import_program(model.SerializeToString(), where=str(tmp_path / "huge.onnx"))
    assert "shape_of_x" in info.value.message and f"{[2, 4, 2**62]} is too large" in info.value.message
    assert "huge.onnx" in info.value.message and info.value.hint
