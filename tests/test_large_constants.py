"""Large constants (more than LARGE_CONSTANT_ELEMENTS elements) never become text in
generated code: C and C++ modules ``.incbin`` a binary artifact, JSON modules name an
``.npz`` member, bundles carry them as members and the source's weights as
``source.npz``. A C-family function writes at most LITERAL_VALUES_PER_FUNCTION values
as literals, smallest constants first, and includes the rest. Goldens show the
declarations (never the values); every backend that takes constants runs the graph
against the numpy reference; a bundle runs after its source directory is gone; the
build cache keys on the binary's bytes."""

from __future__ import annotations

import hashlib
import io
import json
import shutil

import numpy as np
import pytest

import byoc
import byoc.runtime
from byoc import cli
from byoc.api import load_backend, load_catalog, parse
from byoc.building import build_backend_module
from byoc.errors import RuntimeFailure
from byoc.generator import generator_for
from byoc.generator.artifacts import LARGE_CONSTANT_ELEMENTS, Role, weights_artifact
from byoc.generator.lowering import lower
from byoc.ir import Constant, TensorType
from byoc.runtime.json_module import JsonRuntimeModule

SHAPE = (65, 64)
SIZE = SHAPE[0] * SHAPE[1]
BACKENDS = ("ccompiler", "fused", "engine", "json")
"""Every shipped backend whose kind takes constants (ExampleJSON has none)."""


def weights() -> np.ndarray:
    """Distinct values, exact in float32 (eighths), in row-major order."""
    return (((np.arange(SIZE) * 37) % 101) / 8 - 6).astype(np.float32)


def graph_text(backend: str) -> str:
    values = ", ".join(repr(float(v)) for v in weights())
    return (
        f"graph main(x: float32[{SHAPE[0]}, {SHAPE[1]}]) {{\n"
        f"  s = @{backend} {{\n"
        f"    w = const float32[{SHAPE[0]}, {SHAPE[1]}] [{values}]\n"
        "    return multiply(add(x, w), w)\n"
        "  }\n"
        "  return s\n"
        "}\n"
    )


def artifacts(backend: str):
    program = parse(graph_text(backend), "graph", file="large.graph")
    externals = lower(program, load_backend, load_catalog()).externals
    spec = load_backend(backend)
    return generator_for(spec.kind)(externals, spec, load_catalog(), spec.option_values({}))


def reference_inputs() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(5).uniform(-3, 3, SHAPE).astype(np.float32)}


def expected(inputs) -> np.ndarray:
    w = weights().reshape(SHAPE)
    return (inputs["x"] + w) * w


def test_the_threshold_is_above_every_golden_constant():
    assert SIZE > LARGE_CONSTANT_ELEMENTS == 4096


@pytest.mark.parametrize("backend", BACKENDS)
def test_golden_names_the_binary_not_the_values(backend, golden):
    generated = artifacts(backend)
    module = next(a for a in generated if a.role is Role.MODULE)
    (blob,) = [a for a in generated if a.role is Role.WEIGHTS]
    assert blob.backend == backend and blob.text == ""
    suffix = module.name.rsplit(".", 1)[1]
    assert module.text == golden(suffix)
    # the text holds no value: no literal of the constant's distinct values appears
    assert "-5.875" not in module.text and len(module.text) < 20 * SIZE
    if backend == "json":
        assert blob.name == "json.consts.npz"
        document = json.loads(module.text)
        (name,) = document["const_values"]
        assert document["const_values"][name] == {"dtype": "float32", "shape": list(SHAPE), "file": blob.name}
        with np.load(io.BytesIO(blob.data)) as archive:
            np.testing.assert_array_equal(archive[name], weights().reshape(SHAPE))
    else:
        assert blob.data == weights().tobytes()
        assert f'.incbin \\"{blob.name}\\"' in module.text
        assert hashlib.sha256(blob.data).hexdigest() in module.text


@pytest.mark.parametrize("backend", BACKENDS)
def test_runs_on_every_backend_against_the_reference(backend, tmp_path):
    source = tmp_path / "large.graph"
    source.write_text(graph_text(backend))
    program = byoc.parse_file(source)
    inputs = reference_inputs()
    (want,) = byoc.evaluate(program.functions[0], inputs)
    np.testing.assert_allclose(want, expected(inputs), rtol=1e-6)
    (got,) = byoc.build(source).run("main", **inputs)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("backend", ["fused", "json"])
def test_bundle_runs_after_the_sources_are_deleted(backend, tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    (work / "large.graph").write_text(graph_text(backend))
    bundle = tmp_path / "large.byoc"
    assert cli.main(["build", str(work / "large.graph"), "-o", str(bundle)]) == 0
    shutil.rmtree(work)
    model = byoc.runtime.load(bundle)
    inputs = reference_inputs()
    (got,) = model(**inputs)
    np.testing.assert_allclose(got, expected(inputs), rtol=1e-6)
    # the source's values are a member, not text; `byoc run` reads them from it
    assert "source.npz" in model.members and len(model.members["source.graph"]) < 1000
    assert b'weights["main/' in model.members["source.graph"]
    capsys.readouterr()
    assert cli.main(["run", str(bundle)]) == 0
    assert "result: every output matches the numpy reference" in capsys.readouterr().out


def test_a_large_host_constant_is_read_from_the_host_weights_file(golden):
    """A large constant that a host op reads, and that a region captures: the host
    functions name ``main.host.npz``, a member of the model, and the model runs."""
    values = ", ".join(repr(float(v)) for v in weights())
    text = (
        f"graph main(x: float32[{SHAPE[0]}, {SHAPE[1]}]) {{\n"
        f"  w = const float32[{SHAPE[0]}, {SHAPE[1]}] [{values}]\n"
        "  y = add(x, w)\n"
        "  s = @fused {\n    return multiply(y, w)\n  }\n"
        "  return s\n}\n"
    )
    model = byoc.build(parse(text, "graph", file="host.graph"))
    host = model.text("main.host.graph")
    assert host == golden("graph")
    assert 'weights "main.host.npz" sha256 "' in host and "-5.875" not in host
    with np.load(io.BytesIO(model.members["main.host.npz"])) as archive:
        assert archive.files == ["host_0_const/w"]  # one constant shared by two functions: stored once
        np.testing.assert_array_equal(archive["host_0_const/w"], weights().reshape(SHAPE))
    inputs = reference_inputs()
    (got,) = model(**inputs)
    np.testing.assert_allclose(got, expected(inputs), rtol=1e-6)


def test_gen_writes_the_binary_and_the_json_module_reads_it_from_beside(tmp_path):
    source = tmp_path / "large.graph"
    source.write_text(graph_text("json"))
    out = tmp_path / "out"
    assert cli.main(["gen", str(source), "-o", str(out)]) == 0
    assert (out / "json.consts.npz").is_file()
    module = JsonRuntimeModule.from_file(out / "json.json")
    inputs = reference_inputs()
    result = np.zeros(SHAPE, np.float32)
    module.get_function("json_0")(inputs["x"], result)
    np.testing.assert_allclose(result, expected(inputs), rtol=1e-6)
    (out / "json.consts.npz").unlink()
    with pytest.raises(
        RuntimeFailure, match="names the file 'json.consts.npz', which is not beside the module"
    ):
        JsonRuntimeModule.from_file(out / "json.json")


def test_the_build_cache_keys_on_the_binary_bytes(tmp_path):
    generated = artifacts("fused")
    module = next(a for a in generated if a.role is Role.MODULE)
    spec = load_backend("fused")
    values = spec.template_values(spec.option_values({}))
    first = build_backend_module(spec, generated, values, cache=tmp_path)
    blob = next(a for a in generated if a.role is Role.WEIGHTS)
    changed = [
        weights_artifact(a.name, bytes(reversed(a.data)), a.backend) if a is blob else a for a in generated
    ]
    second = build_backend_module(spec, changed, values, cache=tmp_path)
    assert first != second
    # the library holds the bytes: the entry keeps no second copy of them
    assert blob.data in first.read_bytes() and bytes(reversed(blob.data)) in second.read_bytes()
    assert not (first.parent / "src" / blob.name).exists() and (first.parent / "src" / module.name).exists()


def test_constant_equality_compares_dtype_shape_and_bytes():
    t = TensorType((3,), "float32")
    a = Constant("k", t, (0.0, float("nan"), 1.5))
    assert a == Constant("k", t, np.array([0.0, np.nan, 1.5], np.float32))  # the same NaN bits
    assert hash(a) == hash(Constant("k", t, [0.0, float("nan"), 1.5]))
    assert a != Constant("k", t, (-0.0, float("nan"), 1.5))  # -0.0 is another constant
    assert a != Constant("k", TensorType((3,), "float64"), (0.0, float("nan"), 1.5))
    assert not a.values.flags.writeable and a.values.dtype == np.float32 and a.values.shape == (3,)
    with pytest.raises(ValueError):
        a.values[0] = 1


def test_weights_above_the_literal_limit_parse_from_a_weights_file(tmp_path):
    """The 2**24 limit is for literal text only: a weights entry may be larger."""
    big = np.zeros((1 << 24) + 1, np.int8)
    big[-1] = 7
    path = tmp_path / "w.npz"
    np.savez(path, big=big)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    text = (
        f'weights "w.npz" sha256 "{digest}"\n\n'
        f'graph main() {{\n  k = const int8[{big.size}] weights["big"]\n  return k\n}}\n'
    )
    (k,) = parse(text, "graph", file=str(tmp_path / "g.graph")).functions[0].constants
    assert k.values.size == big.size and k.values[-1] == 7 and k.source is not None


BUDGET_PARTS = 5
"""Constants of 1000 values each: four fit a function's literal budget, the fifth not."""


def budget_graph(backend: str) -> str:
    rng = np.random.default_rng(11)
    lines = []
    for k in range(BUDGET_PARTS):
        values = ", ".join(repr(float(v)) for v in (rng.integers(-40, 40, 1000) / 8))
        lines.append(f"    w{k} = const float32[1000] [{values}]")
    total = "x"
    for k in range(BUDGET_PARTS):
        total = f"add({total}, w{k})"
    body = "\n".join(lines)
    return f"graph main(x: float32[1000]) {{\n  s = @{backend} {{\n{body}\n    return {total}\n  }}\n  return s\n}}\n"


def test_literal_constants_fill_the_budget_smallest_first():
    from byoc.generator.artifacts import LITERAL_VALUES_PER_FUNCTION, literal_constants

    assert LITERAL_VALUES_PER_FUNCTION == LARGE_CONSTANT_ELEMENTS
    assert literal_constants([1000] * 5) == {0, 1, 2, 3}
    assert literal_constants([3000, 1, 2000, 1000, 5000]) == {1, 3, 2}
    assert literal_constants([4096, 1]) == {1}  # 4097 values in all: the larger one goes
    assert literal_constants([4097]) == frozenset()
    assert literal_constants([]) == frozenset()


@pytest.mark.parametrize("backend", ["ccompiler", "fused", "engine"])
def test_a_function_past_its_literal_budget_includes_the_rest(backend, tmp_path):
    """Five constants of 1000 values, each under the per-constant limit: four are
    literals, the fifth is included from a binary artifact, and the graph still
    computes the reference's result."""
    source = tmp_path / "budget.graph"
    source.write_text(budget_graph(backend))
    program = byoc.parse_file(source)
    externals = lower(program, load_backend, load_catalog()).externals
    spec = load_backend(backend)
    generated = generator_for(spec.kind)(externals, spec, load_catalog(), spec.option_values({}))
    module = next(a for a in generated if a.role is Role.MODULE)
    blobs = [a for a in generated if a.role is Role.WEIGHTS]
    assert len(blobs) == 1 and len(blobs[0].data) == 4000
    assert module.text.count(".incbin") == 1
    inputs = {"x": np.random.default_rng(3).uniform(-2, 2, 1000).astype(np.float32)}
    (want,) = byoc.evaluate(program.functions[0], inputs)
    (got,) = byoc.build(source).run("main", **inputs)
    np.testing.assert_allclose(got, want, rtol=1e-6)
