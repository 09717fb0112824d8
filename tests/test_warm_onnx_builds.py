"""A second build of the same ONNX file (byoc/onnx/import_cache.py, byoc/build_records.py):
the import comes from the cache, its weights read from the model file; the build finds
its record and its library, and generates nothing; anything that changes the result
changes the key, and a record whose library is gone is built again."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from build_counting import count_generations
from onnx import TensorProto, helper, numpy_helper
from onnx_import_support import model

import byoc
from byoc.api import evaluate, print_program
from byoc.onnx import import_cache
from byoc.onnx.importer import NeedsValue
from byoc.runtime import cache_store

RNG = np.random.default_rng(11)
WEIGHT = RNG.standard_normal((64, 512)).astype(np.float32)  # 128 KiB: read from the file when found
BIAS = RNG.standard_normal(512).astype(np.float32)


def mlp_file(path: Path, weight: np.ndarray = WEIGHT) -> Path:
    """x[2, 64] -> MatMul(W) + b -> Relu -> Gemm(transB) of the same W (its transpose is a
    constant the file does not hold)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("Gemm", ["r", "w"], ["y"], transB=1),
    ]
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(BIAS, "b")]
    onnx.save(model(nodes, [("x", [2, 64])], ["y"], inits), path)
    return path


def reshape_file(path: Path) -> Path:
    """Reshape whose shape is a model input: the import needs its value."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


class Counting:
    """``make`` for import_file, counting its calls: the Program, and whether the file
    held all of the model."""

    def __init__(self, path: Path, **kwargs) -> None:
        self.path, self.kwargs, self.calls = path, kwargs, 0

    def __call__(self):
        from byoc.onnx.model_import import import_program, read_model

        self.calls += 1
        model = read_model(self.path)
        return import_program(model, **self.kwargs), model.whole


def imported(path: Path, bound=None):
    make = Counting(path, bound=bound)
    program, key = import_cache.import_file(path, make, shapes=None, bound=bound, catalog=byoc.load_catalog())
    return program, key, make.calls


def same_program(a, b) -> None:
    assert print_program(a) == print_program(b)
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    for want, got in zip(evaluate(a.functions[0], {"x": x}), evaluate(b.functions[0], {"x": x})):
        np.testing.assert_array_equal(got, want)


def test_a_second_import_comes_from_the_cache_with_its_weights_read_from_the_file(tmp_path, private_cache):
    path = mlp_file(tmp_path / "mlp.onnx")
    first, key, calls = imported(path)
    assert calls == 1 and key is not None
    second, again, calls = imported(path)
    assert calls == 0 and again == key
    same_program(first, second)
    (entry,) = (private_cache / import_cache.KIND).glob("*/*")
    assert entry.stat().st_size < WEIGHT.nbytes  # W is a place in the file; only its transpose is stored


def test_a_changed_file_is_imported_again(tmp_path, private_cache):
    path = mlp_file(tmp_path / "mlp.onnx")
    _, key, _ = imported(path)
    mlp_file(path, WEIGHT * 2)  # rewritten in place: same name, same size
    changed, other, calls = imported(path)
    assert calls == 1 and other != key
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    (got,) = evaluate(changed.functions[0], {"x": x})
    w = (WEIGHT * 2).astype(np.float64)
    np.testing.assert_allclose(got, np.maximum(x @ w + BIAS, 0) @ w.T, rtol=1e-5, atol=1e-4)


def test_an_entry_whose_file_places_are_wrong_is_imported_again(tmp_path, private_cache, monkeypatch):
    """A constant read short (the file is not what the entry says) is a miss, never an error."""
    path = mlp_file(tmp_path / "mlp.onnx")
    imported(path)
    (entry,) = (private_cache / import_cache.KIND).glob("*/*")
    monkeypatch.setattr(import_cache, "_FileUnpickler", _ShortReads)
    program, _, calls = imported(path)
    assert calls == 1
    same_program(program, byoc.parse_file(path))
    entry.write_bytes(b"not an entry")  # damaged: imported again, and replaced
    monkeypatch.undo()
    _, _, calls = imported(path)
    assert calls == 1


class _ShortReads(import_cache._FileUnpickler):
    def persistent_load(self, pid):
        raise import_cache._Changed


def test_a_needed_input_value_is_remembered_and_the_bound_import_too(tmp_path, private_cache):
    path = reshape_file(tmp_path / "reshape.onnx")
    for expect_calls in (1, 0):
        make = Counting(path)
        with pytest.raises(NeedsValue) as need:
            import_cache.import_file(path, make, shapes=None, bound=None, catalog=byoc.load_catalog())
        assert (need.value.input, need.value.position, make.calls) == ("shape", 1, expect_calls)
    shape = np.array([3, 4], np.int64)
    first, key, calls = imported(path, {"shape": shape})
    assert calls == 1 and key is not None
    second, again, calls = imported(path, {"shape": shape})
    assert calls == 0 and again == key
    assert print_program(first) == print_program(second)
    _, other, calls = imported(path, {"shape": np.array([4, 3], np.int64)})
    assert calls == 1 and other != key


def test_a_model_with_external_data_is_never_remembered(tmp_path, private_cache):
    m = onnx.load(mlp_file(tmp_path / "whole.onnx"))
    path = tmp_path / "split.onnx"
    onnx.save(m, path, save_as_external_data=True, location="split.data", size_threshold=1024)
    from byoc.onnx.model_import import read_model

    assert read_model(tmp_path / "whole.onnx").whole and not read_model(path).whole
    for _ in range(2):
        _, key, calls = imported(path)
        assert key is None and calls == 1
    assert not (private_cache / import_cache.KIND).exists()


def test_the_file_index_finds_initializers_by_their_bytes(tmp_path):
    data = mlp_file(tmp_path / "mlp.onnx").read_bytes()
    index = import_cache._tensor_index(data)
    raw = WEIGHT.view(np.uint8).ravel()
    (offset,) = index[(raw.size, raw[: import_cache.HEAD].tobytes())]
    assert data[offset : offset + raw.size] == raw.tobytes()
    assert import_cache._tensor_index(b"\xff" * 40) == {}  # not protobuf: nothing, no error


# ------------------------------------------------------------------ the build's record


def _members(bundle: Path) -> dict[str, int]:
    with zipfile.ZipFile(bundle) as z:
        return {i.filename: i.CRC for i in z.infolist()}


def test_a_second_build_generates_nothing_and_saves_the_same_bundle(tmp_path, private_cache, monkeypatch):
    path = mlp_file(tmp_path / "mlp.onnx")
    generations = count_generations(monkeypatch)
    cold = byoc.build(path, backends=["fused"])
    assert generations[0] == 1
    warm = byoc.build(path, backends=["fused"])
    assert generations[0] == 1  # the record and the library were found
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    np.testing.assert_array_equal(warm(x=x)[0], cold(x=x)[0])
    cold.save(tmp_path / "cold.byoc")
    warm.save(tmp_path / "warm.byoc")  # its weights files are generated again for the bundle
    assert generations[0] == 2
    assert _members(tmp_path / "warm.byoc") == _members(tmp_path / "cold.byoc")


def test_other_options_or_backends_are_other_records(tmp_path, private_cache, monkeypatch):
    path = mlp_file(tmp_path / "mlp.onnx")
    generations = count_generations(monkeypatch)
    byoc.build(path, backends=["fused"])
    byoc.build(path, backends=["fused"], options={"fused.float32_dots": "false"})
    byoc.build(path, backends=["ccompiler", "fused"])
    assert generations[0] == 3


def test_a_record_whose_library_is_gone_is_built_again(tmp_path, private_cache, monkeypatch):
    path = mlp_file(tmp_path / "mlp.onnx")
    generations = count_generations(monkeypatch)
    cold = byoc.build(path, backends=["fused"])
    for entry in cache_store.entries(private_cache):
        if entry.kind == "build" and any(
            p.suffix == ".so" and "fused" in p.name for p in entry.path.iterdir()
        ):
            cache_store.remove(entry, private_cache)
    again = byoc.build(path, backends=["fused"])
    assert generations[0] == 2
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    np.testing.assert_array_equal(again(x=x)[0], cold(x=x)[0])


def test_cache_info_lists_the_warm_build_kinds(tmp_path, private_cache):
    byoc.build(mlp_file(tmp_path / "mlp.onnx"), backends=["fused"])
    kinds = {e.kind for e in cache_store.entries(private_cache)}
    assert {"digest", "import", "record", "build"} <= kinds
    assert os.path.isdir(private_cache / "build-records")


@pytest.mark.parametrize("form", ["npz", "test_data"])
def test_byoc_run_specialises_a_warm_import_to_its_inputs(tmp_path, private_cache, capsys, form):
    """The second run finds the import's need of 'shape' in the cache, binds it from
    --inputs (by name, or by its place among the model's inputs), and finds the bound
    import and the build's record."""
    from conftest import run_cli

    path = reshape_file(tmp_path / "reshape.onnx")
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    shape = np.array([3, 4], np.int64)
    if form == "npz":
        inputs = tmp_path / "inputs.npz"
        np.savez(inputs, x=x, shape=shape)
    else:
        inputs = tmp_path / "test_data_set_0"
        inputs.mkdir()
        for k, value in enumerate((x, shape)):
            (inputs / f"input_{k}.pb").write_bytes(numpy_helper.from_array(value).SerializeToString())
    outs = []
    for _ in range(2):
        rc, out, err = run_cli(
            capsys,
            "run",
            path,
            "--backend",
            "fused",
            "--inputs",
            inputs,
            "--save-outputs",
            tmp_path / "y.npz",
        )
        assert rc == 0, err
        assert "specialised: input 'shape' = [3, 4]" in out and "every output matches" in out
        outs.append(np.load(tmp_path / "y.npz")["output_0"])
    np.testing.assert_array_equal(outs[0], x.reshape(3, 4))
    np.testing.assert_array_equal(outs[1], outs[0])


def test_the_checker_finds_its_pass_by_the_remembered_digest_as_by_the_bytes(
    tmp_path, private_cache, monkeypatch
):
    """The import cache's lookup remembers the file's digest; the checker's entry is
    keyed by it, and a copy of the file elsewhere (hashed from its bytes) finds it."""
    path = mlp_file(tmp_path / "mlp.onnx")
    checked = []
    real = onnx.checker.check_model
    monkeypatch.setattr(onnx.checker, "check_model", lambda m, *a, **k: checked.append(1) or real(m, *a, **k))
    imported(path)
    assert checked == [1]
    copy = tmp_path / "copy.onnx"
    copy.write_bytes(path.read_bytes())
    from byoc.onnx.model_import import import_program

    import_program(copy)  # no digest remembered for it: the checker's key from its bytes
    assert checked == [1]


def test_a_specs_digest_is_the_same_in_every_process():
    """The record's key digests each spec; its sets (a pattern's constants) must not
    make it differ between processes, whose string hashes differ."""
    import subprocess
    import sys

    code = (
        "from byoc.api import load_backend; from byoc.warm_keys import value_digest; "
        "print([value_digest(load_backend(n)) for n in ('dnnl', 'fused', 'ccompiler')])"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outs) == 1 and "None" not in outs.pop()


def test_a_second_build_on_dnnl_and_fused_generates_nothing(tmp_path, private_cache, monkeypatch):
    from libraries import missing_library

    if missing_library("dnnl"):
        pytest.skip(missing_library("dnnl"))
    path = mlp_file(tmp_path / "mlp.onnx")
    generations = count_generations(monkeypatch)
    cold = byoc.build(path, backends=["dnnl", "fused"])
    warm = byoc.build(path, backends=["dnnl", "fused"])
    assert generations[0] == 1
    assert [m.backend for m in warm.manifest.modules] == [m.backend for m in cold.manifest.modules]
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    np.testing.assert_array_equal(warm(x=x)[0], cold(x=x)[0])
