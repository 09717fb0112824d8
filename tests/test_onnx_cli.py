""".onnx as an input language: every command that reads a model takes an ONNX model
directly (imported in memory, ``--shape`` fixing dynamic dimensions), the result is
the same as ``byoc import`` followed by the written graph, and ``byoc run --inputs``
reads ONNX test-data directories (``input_*.pb``, compared with ``output_*.pb``).
Numbers are judged by byoc's numpy reference and by onnxruntime, never written here.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, run_cli

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper, version_converter  # noqa: E402

import byoc  # noqa: E402
from byoc.errors import UsageError  # noqa: E402
from byoc.onnx.model_import import import_program  # noqa: E402

TINY = EXAMPLES / "onnx" / "tiny_cnn.onnx"
TINY_DATA = EXAMPLES / "onnx" / "test_data_set_0"
ONNX_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
RNG = np.random.default_rng(11)


def save(model, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


def dynamic_model(path: Path) -> Path:
    """relu(x) * w for x: float32[N, 3], w a weight: a dynamic batch dimension."""
    w = numpy_helper.from_array(RNG.standard_normal(3).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [w],
    )
    return save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def saved(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


# ------------------------------------------------------------------ direct use = import, then the graph


def test_run_onnx_gives_what_import_then_run_graph_gives(tmp_path, capsys):
    rc, out, err = run_cli(capsys, "import", TINY, "-o", tmp_path)
    assert rc == 0, err
    direct, imported = tmp_path / "direct.npz", tmp_path / "imported.npz"
    common = ["--backend", "ccompiler,json", "--seed", "5"]
    rc, out, err = run_cli(capsys, "run", TINY, *common, "--save-outputs", direct)
    assert rc == 0, out + err
    assert f"wrote {direct} (1 array(s))" in out
    rc, out, err = run_cli(capsys, "run", tmp_path / "tiny_cnn.graph", *common, "--save-outputs", imported)
    assert rc == 0, out + err
    a, b = saved(direct), saved(imported)
    assert list(a) == list(b) == ["output_0"]
    np.testing.assert_array_equal(a["output_0"], b["output_0"])
    # ... and the saved outputs are the ones compared with the reference: a fresh reference agrees
    program = byoc.parse_file(tmp_path / "tiny_cnn.graph")
    image = np.random.default_rng(5).uniform(-2.0, 2.0, size=(1, 3, 16, 16)).astype(np.float32)
    (ref,) = byoc.evaluate(program.functions[0], {"image": image})
    np.testing.assert_allclose(a["output_0"], ref, rtol=1e-5, atol=1e-6)


def test_import_print_parse_round_trips(tmp_path, capsys):
    rc, _, err = run_cli(capsys, "import", TINY, "-o", tmp_path)
    assert rc == 0, err
    in_memory = import_program(TINY)
    text = byoc.print_program(in_memory)
    written = (tmp_path / "tiny_cnn.graph").read_text()
    assert byoc.print_program(byoc.parse_file(tmp_path / "tiny_cnn.graph")) == text
    # the same weights file, by name and digest, as `byoc import` wrote
    assert text.splitlines()[0] == written.splitlines()[1]
    assert text.startswith('weights "tiny_cnn.npz" sha256 ')
    # printed beside the weights that `byoc import` wrote (the same digest), it parses back
    (tmp_path / "again.graph").write_text(text)
    again = byoc.parse_file(tmp_path / "again.graph")
    assert byoc.print_program(again) == text
    image = {"image": np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    for a, b in zip(byoc.evaluate(in_memory.functions[0], image), byoc.evaluate(again.functions[0], image)):
        np.testing.assert_array_equal(a, b)


def test_partition_of_a_model_runs_beside_the_imported_weights(tmp_path, capsys):
    rc, _, err = run_cli(capsys, "import", TINY, "-o", tmp_path)
    assert rc == 0, err
    rc, out, err = run_cli(capsys, "partition", TINY, "--backend", "ccompiler,json")
    assert rc == 0, err
    assert "@ccompiler {" in out and "@json {" in out
    (tmp_path / "partitioned.graph").write_text(out)
    rc, out, err = run_cli(capsys, "run", tmp_path / "partitioned.graph", "--inputs", TINY_DATA)
    assert rc == 0, out + err
    assert "backends: ccompiler, json" in out


def test_backend_list_is_the_same_as_repeated_backends(capsys):
    listed = run_cli(capsys, "partition", TINY, "--backend", "ccompiler,json")
    repeated = run_cli(capsys, "partition", TINY, "--backend", "ccompiler", "--backend", "json")
    assert listed == repeated and listed[0] == 0


def test_every_command_that_reads_a_model_takes_shape(tmp_path, capsys):
    model = dynamic_model(tmp_path / "dyn.onnx")
    shape = ["--shape", "x=4,3"]
    for argv in (
        ["parse", model],
        ["gen", model, "--backend", "json"],
        ["partition", model, "--backend", "json"],
        ["dot", model, "--backend", "json"],
        ["build", model, "--backend", "json", "-o", tmp_path / "dyn.byoc"],
        ["run", model, "--backend", "json"],
    ):
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 2 and "pass --shape x=1,3" in err, (argv, err)
        rc, out, err = run_cli(capsys, *argv, *shape)
        assert rc == 0, (argv, err)
        assert out
    rc, out, err = run_cli(capsys, "run", tmp_path / "dyn.byoc")
    assert rc == 0, err
    assert "[4, 3]" in out
    rc, out, err = run_cli(capsys, "run", tmp_path / "dyn.byoc", *shape)
    assert rc == 2 and "--shape does not apply to a built bundle" in err


def test_parse_reads_a_model_on_standard_input(monkeypatch, capsys):
    import io

    stdin = type("Stdin", (), {"buffer": io.BytesIO(TINY.read_bytes())})()
    monkeypatch.setattr(sys, "stdin", stdin)
    rc, out, err = run_cli(capsys, "parse", "-", "--from", "onnx")
    assert rc == 0, err
    # a model without a file name has its weights file named model.npz
    assert out == byoc.print_program(import_program(TINY)).replace('"tiny_cnn.npz"', '"model.npz"')


def test_python_api_builds_and_parses_a_model(tmp_path):
    model = dynamic_model(tmp_path / "dyn.onnx")
    program = byoc.parse_file(model, shapes={"x": (2, 3)})
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    built = byoc.build(model, backends=["fused"], shapes={"x": (2, 3)})
    (got,) = built.run("main", x=x)
    (want,) = byoc.evaluate(program.functions[0], {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-6)
    from_bytes = byoc.parse(model.read_bytes(), "onnx", file="dyn.onnx", shapes={"x": (2, 3)})
    assert byoc.print_program(from_bytes) == byoc.print_program(program)
    with pytest.raises(UsageError, match="--shape fixes the inputs of an ONNX model"):
        byoc.parse("graph main(x: float32[2]) { return relu(x) }", shapes={"x": (2,)})
    with pytest.raises(UsageError, match="byoc cannot print 'onnx'"):
        byoc.print_program(program, "onnx")


# ------------------------------------------------------------------ ONNX test data


def test_test_data_of_the_example_is_compared(capsys):
    rc, out, err = run_cli(capsys, "run", TINY, "--backend", "fused", "--inputs", TINY_DATA)
    assert rc == 0, out + err
    assert f"against {TINY_DATA}/output_*.pb:" in out
    assert f"result: every output matches the numpy reference and {TINY_DATA}/output_*.pb" in out


def test_a_stored_output_that_differs_exits_1(tmp_path, capsys):
    data = tmp_path / "test_data_set_0"
    shutil.copytree(TINY_DATA, data)
    stored = numpy_helper.to_array(onnx.load_tensor(str(data / "output_0.pb")))
    off = stored + np.float32(0.01)
    (data / "output_0.pb").write_bytes(numpy_helper.from_array(off).SerializeToString())
    rc, out, err = run_cli(capsys, "run", TINY, "--backend", "json", "--inputs", data)
    assert rc == 1, out + err
    assert "MISMATCH" in out
    assert f"result: 1 output(s) differ from {data}/output_*.pb" in out
    assert "numpy reference" not in out.splitlines()[-1]
    # the tolerance flags apply to the stored outputs too
    rc, out, err = run_cli(capsys, "run", TINY, "--backend", "json", "--inputs", data, "--atol", "0.02")
    assert rc == 0, out + err


def test_test_data_inputs_bind_in_order(tmp_path, capsys):
    """y = a - b: input_0.pb feeds a, input_1.pb feeds b; output_0.pb from onnxruntime."""
    import onnxruntime

    graph = helper.make_graph(
        [helper.make_node("Sub", ["a", "b"], ["y"])],
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "sub.onnx")
    a, b = (RNG.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    session = onnxruntime.InferenceSession(model.read_bytes(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"a": a, "b": b})
    data = tmp_path / "data"
    data.mkdir()
    for name, array in (("input_0.pb", a), ("input_1.pb", b), ("output_0.pb", y)):
        (data / name).write_bytes(numpy_helper.from_array(array).SerializeToString())
    rc, out, err = run_cli(capsys, "run", model, "--backend", "json", "--inputs", data)
    assert rc == 0, out + err
    swapped = tmp_path / "swapped"
    shutil.copytree(data, swapped)
    (swapped / "input_0.pb").write_bytes((data / "input_1.pb").read_bytes())
    (swapped / "input_1.pb").write_bytes((data / "input_0.pb").read_bytes())
    rc, out, err = run_cli(capsys, "run", model, "--backend", "json", "--inputs", swapped)
    assert rc == 1, out + err


def test_test_data_keeps_a_scalar_input_scalar(tmp_path, capsys):
    """y = x * s for a rank-0 input s: its input_1.pb is a scalar tensor, read as one
    (it once became shape [1], and the run refused it as of the wrong shape)."""
    import onnxruntime

    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "s"], ["y"])],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "mul.onnx")
    x, s = RNG.standard_normal((2, 3)).astype(np.float32), np.asarray(1.5, np.float32)
    session = onnxruntime.InferenceSession(model.read_bytes(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": x, "s": s})
    data = tmp_path / "data"
    data.mkdir()
    for name, array in (("input_0.pb", x), ("input_1.pb", s), ("output_0.pb", y)):
        (data / name).write_bytes(numpy_helper.from_array(array).SerializeToString())
    rc, out, err = run_cli(capsys, "run", model, "--backend", "json", "--inputs", data)
    assert rc == 0, out + err


def _reshape_by_input(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(model, data, other): y = relu(reshape(x, shape)) with ``shape`` a model input,
    and two test-data directories holding different shapes, with onnxruntime's outputs."""
    import onnxruntime

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Relu", ["r"], ["y"])],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", "cols"])],
    )
    model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "r.onnx")
    session = onnxruntime.InferenceSession(model.read_bytes(), providers=["CPUExecutionProvider"])
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    dirs = []
    for label, shape in (("data", [3, 4]), ("other", [4, -1])):
        shape = np.asarray(shape, np.int64)
        (y,) = session.run(None, {"x": x, "shape": shape})
        d = tmp_path / label
        d.mkdir()
        for name, array in (("input_0.pb", x), ("input_1.pb", shape), ("output_0.pb", y)):
            (d / name).write_bytes(numpy_helper.from_array(array).SerializeToString())
        dirs.append(d)
    return model, dirs[0], dirs[1]


@pytest.mark.parametrize("backend", ["json", "fused"])
def test_run_specialises_to_the_inputs_a_node_needs(tmp_path, capsys, backend):
    """Reshape's shape given as a model input: ``byoc run --inputs DIR`` builds the model
    with that input's value as a constant (and says so), and the result matches
    onnxruntime's stored output; another value builds another model."""
    model, data, other = _reshape_by_input(tmp_path)
    for d, shown in ((data, "[3, 4]"), (other, "[4, -1]")):
        rc, out, err = run_cli(capsys, "run", model, "--backend", backend, "--inputs", d)
        assert rc == 0, out + err
        assert f"specialised: input 'shape' = {shown}" in out
        assert "output_*.pb" in out.splitlines()[-1]


def test_run_without_the_value_a_node_needs_names_the_input(tmp_path, capsys):
    """Random inputs cannot give Reshape's shape: the error names the input."""
    model, _, _ = _reshape_by_input(tmp_path)
    rc, out, err = run_cli(capsys, "run", model, "--backend", "json")
    assert rc != 0
    assert "'shape'" in err and "Traceback" not in err


def test_a_second_run_of_a_model_hits_the_compile_cache(tmp_path, capsys, monkeypatch):
    """The in-memory import leaves no temporary path in the generated code (its text is
    part of the cache key): the second run of the same model compiles nothing."""
    from test_runtime_build import compilations, wrapper

    script, log = wrapper(tmp_path)
    monkeypatch.setenv("CC", str(script))
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    for _ in range(2):
        rc, out, err = run_cli(capsys, "run", TINY, "--backend", "fused", "--inputs", TINY_DATA)
        assert rc == 0, out + err
    assert len(compilations(log)) == 1, "the second run compiled the model again"


PYTORCH_CONVERTED = [
    "test_Conv2d_groups",
    "test_BatchNorm2d_eval",
    "test_MaxPool2d",
    "test_Linear",
    "test_Softmax",
]


@pytest.mark.parametrize("name", PYTORCH_CONVERTED)
def test_onnx_test_data_of_real_exports(tmp_path, capsys, name):
    """PyTorch exports shipped with onnx (opset 6), as they are and converted to 13 by
    ONNX's version converter, and their test data: byoc's outputs match the stored ones
    and the numpy reference."""
    source = ONNX_DATA / "pytorch-converted" / name
    model = save(version_converter.convert_version(onnx.load(source / "model.onnx"), 13), tmp_path / "m.onnx")
    for path, backend in ((source / "model.onnx", "json"), (model, "fused")):
        rc, out, err = run_cli(
            capsys, "run", path, "--backend", backend, "--inputs", source / "test_data_set_0"
        )
        assert rc == 0, out + err
        assert "output_*.pb" in out.splitlines()[-1]


# ------------------------------------------------------------------ the example


def test_the_example_script_regenerates_the_example(tmp_path):
    import subprocess

    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "onnx" / "make_tiny_cnn.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "tiny_cnn.onnx").read_bytes() == TINY.read_bytes()
    assert (tmp_path / "test_data_set_0" / "input_0.pb").read_bytes() == (
        TINY_DATA / "input_0.pb"
    ).read_bytes()
    # the output is onnxruntime's: equal up to the runtime's rounding
    new, old = (
        numpy_helper.to_array(onnx.load_tensor(str(d / "output_0.pb")))
        for d in (tmp_path / "test_data_set_0", TINY_DATA)
    )
    np.testing.assert_allclose(new, old, rtol=1e-5, atol=1e-7)
    assert TINY.stat().st_size < 50_000


def test_test_data_without_outputs_compares_with_numpy_only(tmp_path, capsys):
    data = tmp_path / "inputs_only"
    data.mkdir()
    shutil.copy(TINY_DATA / "input_0.pb", data)
    rc, out, err = run_cli(capsys, "run", TINY, "--backend", "json", "--inputs", data)
    assert rc == 0, out + err
    assert "against" not in out
    assert out.splitlines()[-1] == "result: every output matches the numpy reference"


def test_save_outputs_names_the_graph_when_there_are_several(tmp_path, capsys):
    graphs = tmp_path / "two.graph"
    graphs.write_text(
        "graph first(x: float32[3]) {\n  y = @json { return relu(x) }\n  return y\n}\n"
        "graph second(x: float32[2]) {\n  y, z = @json { return exp(x), negative(x) }\n  return y, z\n}\n"
    )
    out_file = tmp_path / "out.npz"
    rc, out, err = run_cli(capsys, "run", graphs, "--seed", "3", "--save-outputs", out_file)
    assert rc == 0, out + err
    outputs = saved(out_file)
    assert sorted(outputs) == ["first/output_0", "second/output_0", "second/output_1"]
    program = byoc.parse_file(graphs)
    for fn in program.functions:  # the seeded inputs `byoc run` draws, one generator per graph
        rng = np.random.default_rng(3)
        inputs = {p.name: rng.uniform(-2.0, 2.0, size=p.type.shape).astype(np.float32) for p in fn.params}
        for k, want in enumerate(byoc.evaluate(fn, inputs)):
            np.testing.assert_allclose(outputs[f"{fn.name}/output_{k}"], want, rtol=1e-6)


def test_ops_onnx_lists_every_imported_op_and_its_catalog_ops(capsys):
    """`byoc ops --onnx`: one row per ONNX op of byoc/onnx/ops.yaml, naming catalog ops
    that exist; docs/languages.md shows the same table."""
    from byoc.api import load_catalog
    from byoc.onnx.ops import onnx_ops

    rc, out, err = run_cli(capsys, "ops", "--onnx")
    assert rc == 0, err
    rows = [line.split(None, 2) for line in out.splitlines()[1:]]
    assert [r[0] for r in rows] == sorted(onnx_ops())
    catalog = load_catalog()
    for name, kind, ops in rows:
        assert kind == onnx_ops()[name].kind
        if kind != "folded" and not ops.startswith("-"):
            assert all(op in catalog for op in ops.split(", ")), (name, ops)
    docs = (EXAMPLES.parent / "docs" / "languages.md").read_text(encoding="utf-8")
    assert out in docs, "paste `byoc ops --onnx` into docs/languages.md's ONNX section"
    rc, _, err = run_cli(capsys, "ops", "--onnx", "relu")
    assert rc == 2 and "takes no op names" in err


def test_import_creates_its_output_directory_only_when_it_writes(tmp_path, capsys):
    out_dir = tmp_path / "new" / "models"
    rc, out, err = run_cli(capsys, "import", TINY, "-o", out_dir)
    assert rc == 0, err
    assert sorted(p.name for p in out_dir.iterdir()) == ["tiny_cnn.graph", "tiny_cnn.npz"]
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    rc, _, err = run_cli(capsys, "import", bad, "-o", tmp_path / "never")
    assert rc == 2 and not (tmp_path / "never").exists()  # a failed import leaves no directory
    blocker = tmp_path / "file"
    blocker.write_text("a file")
    rc, _, err = run_cli(capsys, "import", TINY, "-o", blocker)
    assert rc == 2 and "exists and is not a directory" in err
