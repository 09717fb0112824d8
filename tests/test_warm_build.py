"""What a cached build of a real model skips, and what it still checks: a model runs
without making the bundle members it never reads; the ONNX checker's pass is
remembered per file; an import in memory hands its arrays to the parser; a cached
library is re-hashed only when its file changed; a weights artifact's digest keys
the compile cache; the C helper scans find byoc's names by their literal text."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc.errors import GraphError, ParseError, RuntimeFailure
from byoc.generator.c.called import CAST_CALL, casts_in, helpers_in, named
from byoc.generator.c.text import c_literals
from byoc.onnx import model_import
from byoc.runtime import load
from byoc.runtime.build import build_library
from byoc.runtime.cache_store import checked_stamp, intact
from byoc.runtime.members import Members
from byoc.runtime.toolchain import Toolchain

WEIGHT_SHAPE = (128, 64)  # 8192 values: above LARGE_CONSTANT_ELEMENTS, so a .bin artifact


def mlp_model(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal(WEIGHT_SHAPE).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(WEIGHT_SHAPE[1]).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WEIGHT_SHAPE[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WEIGHT_SHAPE[1]])],
        [w, b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture
def mlp_file(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp_model(), path)
    return path


def expected(path: Path, x: np.ndarray) -> np.ndarray:
    m = onnx.load(path)
    w, b = (numpy_helper.to_array(t) for t in m.graph.initializer)
    return x @ w + b


# ------------------------------------------------------------------ bundle members


def test_a_build_makes_its_bundle_members_only_when_they_are_read(mlp_file, tmp_path, private_cache):
    model = byoc.build(mlp_file, backends=["fused"])
    lazy = ["libfused.so", "source.graph", "source.npz"]
    assert all(name in model.members for name in lazy)
    assert not any(model.members.made(name) for name in lazy)  # running needs none of them
    x = np.random.default_rng(1).standard_normal((1, WEIGHT_SHAPE[0])).astype(np.float32)
    (y,) = model(x=x)
    np.testing.assert_allclose(y, expected(mlp_file, x), rtol=1e-5, atol=1e-5)
    assert not any(model.members.made(name) for name in lazy)
    model.save(tmp_path / "mlp.byoc")
    assert all(model.members.made(name) for name in lazy)
    (again,) = load(tmp_path / "mlp.byoc")(x=x)
    np.testing.assert_array_equal(again, y)


def test_a_library_the_cache_lost_before_the_save_is_a_clean_error(mlp_file, tmp_path, private_cache):
    model = byoc.build(mlp_file, backends=["fused"])
    (library,) = private_cache.glob("??/*/libfused.so")
    library.unlink()
    with pytest.raises(RuntimeFailure) as info:
        model.save(tmp_path / "mlp.byoc")
    assert str(library) in info.value.message and "build again" in info.value.hint
    assert not (tmp_path / "mlp.byoc").exists()


def test_members_make_each_value_once():
    calls = []
    members = Members({"a": b"A", "b": lambda: calls.append(1) or b"B"})
    assert list(members) == ["a", "b"] and len(members) == 2 and "b" in members
    assert members.made("a") and not members.made("b")
    assert members["b"] == b"B" and members["b"] == b"B" and calls == [1]
    assert Members(members)["b"] == b"B" and calls == [1]  # a copy shares what was made


# ------------------------------------------------------------------ the ONNX checker


def test_the_checkers_pass_is_remembered_per_file(mlp_file, tmp_path, private_cache, monkeypatch):
    checked = []
    real = onnx.checker.check_model
    monkeypatch.setattr(onnx.checker, "check_model", lambda m, *a, **k: checked.append(1) or real(m, *a, **k))
    first = model_import.import_program(mlp_file)
    assert checked == [1] and list((private_cache / "onnx-checked").glob("??/*"))
    again = model_import.import_program(mlp_file)
    assert checked == [1]  # the same bytes: the verdict is remembered
    assert [c.array.tobytes() for c in first.functions[0].constants] == [
        c.array.tobytes() for c in again.functions[0].constants
    ]
    other = tmp_path / "other.onnx"
    onnx.save(mlp_model(seed=1), other)
    model_import.import_program(other)
    assert checked == [1, 1]  # other bytes: checked


def test_a_model_the_checker_refuses_is_refused_every_time(tmp_path, private_cache):
    m = mlp_model()
    m.graph.node[0].input[1] = "nowhere"  # an input no node or initializer defines
    path = tmp_path / "bad.onnx"
    path.write_bytes(m.SerializeToString())
    for _ in range(2):
        with pytest.raises(ParseError, match="is not a valid ONNX model"):
            model_import.import_program(path)
    assert not list((private_cache / "onnx-checked").glob("??/*"))


def test_an_import_from_a_file_leaves_a_callers_model_whole(mlp_file):
    """byoc drops the weights' bytes of a model it read itself; a ModelProto handed in
    is the caller's, and keeps them."""
    m = onnx.load(mlp_file)
    before = m.SerializeToString()
    model_import.import_program(m, where="mlp.onnx")
    assert m.SerializeToString() == before


# ------------------------------------------------------------------ weights handed over


def test_an_import_in_memory_parses_to_what_its_written_files_parse_to(mlp_file, tmp_path):
    imported = model_import.import_onnx(mlp_file)
    (tmp_path / "mlp.graph").write_text(imported.text)
    (tmp_path / imported.weights_file).write_bytes(imported.weights)
    written = byoc.parse_file(tmp_path / "mlp.graph")
    in_memory = model_import.parse_imported(imported)
    assert imported.digest == hashlib.sha256(imported.weights).hexdigest()
    for a, b in zip(written.functions[0].constants, in_memory.functions[0].constants, strict=True):
        assert a.type == b.type and a.array.tobytes() == b.array.tobytes()
        assert b.source is not None and b.source.sha256 == imported.digest


def test_handed_over_weights_of_another_digest_are_refused_at_the_declaration(mlp_file):
    from byoc.npz_files import ReadWeights

    imported = model_import.import_onnx(mlp_file)
    with pytest.raises(GraphError) as info:
        byoc.parse(
            imported.text,
            file="m.graph",
            weights_files={imported.weights_file: ReadWeights("0" * 64, imported.arrays)},
        )
    assert info.value.location.file == "m.graph" and "but the graph declares" in info.value.message


# ------------------------------------------------------------------ the compile cache


def small_library(cache: Path, digests=None) -> Path:
    chain = Toolchain(("cc",), ("-O1",), "c", "CC")
    data = np.arange(64, dtype=np.float32).tobytes()
    asm = '__asm__(".pushsection .rodata\\n.globl byoc_blob\\nbyoc_blob:\\n.incbin \\"blob.bin\\"\\n.popsection");\n'
    sources = {"m.c": asm + "int byoc_answer(void) { return 42; }\n", "blob.bin": data}
    return build_library(sources, "m.c", chain, cache=cache, digests=digests)


def test_a_given_digest_keys_the_cache_as_the_bytes_would(tmp_path):
    data = np.arange(64, dtype=np.float32).tobytes()
    plain = small_library(tmp_path)
    assert small_library(tmp_path, {"blob.bin": hashlib.sha256(data).hexdigest()}) == plain
    assert small_library(tmp_path, {"blob.bin": "f" * 64}) != plain  # another digest, another entry


def test_a_cached_library_is_hashed_again_only_when_its_file_changed(tmp_path, monkeypatch):
    library = small_library(tmp_path)
    stamp = library.parent / f"{library.name}.checked"
    digest = (library.parent / f"{library.name}.sha256").read_text().strip()
    assert stamp.read_text() == checked_stamp(library, digest)  # written with the library
    hashed = []
    real = hashlib.sha256
    monkeypatch.setattr(hashlib, "sha256", lambda *a: hashed.append(1) or real(*a))
    assert intact(library) and hashed == []
    stamp.write_text("stale\n")
    assert intact(library) and hashed == [1]  # verified in full, and stamped again
    assert stamp.read_text() == checked_stamp(library, digest)
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0xFF
    library.write_bytes(bytes(data))  # a new modification time: hashed, and refused
    assert not intact(library)


# ------------------------------------------------------------------ text scans


def test_helper_names_are_found_where_a_word_starts():
    text = "y = byoc_cast_float32_int8(x); z = xbyoc_cast_float32_int32(x); byoc_mod_int32(a, b)"
    assert named(CAST_CALL, text) == [("float32", "int8")]
    assert casts_in("byoc_cast_int8_float32(v)" + text) == [("float32", "int8"), ("int8", "float32")]
    assert helpers_in(text) == [("mod", "int32")] and helpers_in("_byoc_mod_int32(") == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(width=32), min_size=1, max_size=40), st.sampled_from(["float32", "float64"]))
def test_float_literals_are_numpys_shortest_digits_and_read_back(values, dtype):
    array = np.array(values, dtype=dtype)
    texts, special = c_literals(values, dtype)
    assert special == (not np.isfinite(array).all())
    for text, v in zip(texts, array.tolist(), strict=True):
        if np.isnan(v):
            assert text == "NAN"
        elif np.isinf(v):
            assert text == ("INFINITY" if v > 0 else "-INFINITY")
        else:
            shown = str(np.float32(v)) + "f" if dtype == "float32" else repr(v)
            assert text == shown and np.array(text.rstrip("f")).astype(dtype) == v  # read as C reads it
