"""byoc.runtime.module: compiled libraries loaded through tvm_ffi and called by symbol.

Results are checked against the reference evaluation of each external function;
bad calls must raise a Python exception, never crash the interpreter.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm_ffi
from conftest import DATA, GUIDE_WHOLE_GRAPH, random_array

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build_backend_module
from byoc.errors import ByocError, RuntimeFailure
from byoc.generator.pipeline import generate
from byoc.runtime.interface import Signature, call
from byoc.runtime.module import LibraryModule

GEN = DATA / "gen"
pytestmark = pytest.mark.skipif(
    not (shutil.which("cc") and shutil.which("c++")), reason="needs a C and a C++ compiler"
)
CASES = [
    ("ccompiler", "whole_graph"),
    ("ccompiler", "guide_subgraph"),
    ("ccompiler", "dag"),
    ("ccompiler", "multi_output"),
    ("ccompiler", "constants"),
    ("ccompiler", "float64"),
    ("ccompiler", "nd"),
    ("engine", "whole_graph"),
    ("engine", "guide_subgraph"),
    ("engine", "dag"),
    ("engine", "multi_output"),
    ("engine", "constants"),
]


# ------------------------------------------------------------------ helpers


class Built:
    """A library built from a program, with its external functions."""

    def __init__(self, program, backend: str, cache: Path) -> None:
        generated = generate(program, load_catalog(), load_backend)
        lowered, artifacts = generated.lowered, generated.artifacts
        spec = load_backend(backend)
        self.path = build_backend_module(spec, artifacts, spec.template_values(), cache=cache)
        self.functions = {f.name: f for f in lowered.externals_for(backend)}
        self.signatures = {
            name: Signature(tuple(p.type for p in f.params), f.output_types)
            for name, f in self.functions.items()
        }

    def module(self) -> LibraryModule:
        return LibraryModule(self.path, self.signatures)

    def inputs(self, symbol: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in self.functions[symbol].params}


def program_for(backend: str, name: str):
    text = (GEN / f"{name}.graph").read_text().replace("@BACKEND", f"@{backend}")
    return parse(text, "graph", file=f"tests/data/gen/{name}.graph")


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def guide(shared_cache) -> Built:
    """examples/guide_whole_graph.graph, offloaded to ccompiler."""
    return Built(parse(GUIDE_WHOLE_GRAPH.read_text(), "graph"), "ccompiler", shared_cache)


@pytest.fixture(scope="module")
def engine(shared_cache) -> Built:
    return Built(program_for("engine", "whole_graph"), "engine", shared_cache)


@pytest.fixture(params=["guide", "engine"])
def built(request) -> Built:
    return request.getfixturevalue(request.param)


def arguments(built: Built, rng) -> tuple[str, list[np.ndarray], np.ndarray]:
    """(symbol, inputs, expected output) of the first function of ``built``."""
    symbol = next(iter(built.functions))
    inputs = built.inputs(symbol, rng)
    (want,) = evaluate(built.functions[symbol], inputs)
    return symbol, list(inputs.values()), want


# ------------------------------------------------------------------ results


@pytest.mark.parametrize("backend,name", CASES)
def test_matches_the_reference(backend, name, shared_cache, rng):
    built = Built(program_for(backend, name), backend, shared_cache)
    module = built.module()
    assert module.kind == "library" and set(module.symbols()) == set(built.functions)
    for symbol, fn in built.functions.items():
        inputs = built.inputs(symbol, rng)
        got = call(module, symbol, *inputs.values())
        want = evaluate(fn, inputs)
        assert len(got) == len(want) == len(fn.outputs)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-5 if g.dtype == np.float32 else 1e-12)


def test_guide_whole_graph_functions(guide, rng):
    module = guide.module()
    assert module.symbols() == ("ccompiler_0", "ccompiler_1")
    for symbol in module.symbols():
        inputs = guide.inputs(symbol, rng)
        out = np.full((10, 10), np.nan, dtype="float32")
        assert module.get_function(symbol)(*inputs.values(), out) is None
        (want,) = evaluate(guide.functions[symbol], inputs)
        np.testing.assert_allclose(out, want, rtol=1e-6)


def test_a_real_client(guide, rng):
    """Plain tvm_ffi, no byoc code on the call path."""
    library = tvm_ffi.load_module(str(guide.path))
    f = library["ccompiler_0"]
    x, w0, w1, w2 = (rng.standard_normal((10, 10)).astype("float32") for _ in range(4))
    out = np.empty((10, 10), dtype="float32")
    f(x, w0, w1, w2, out)
    (want,) = evaluate(guide.functions["ccompiler_0"], {"x": x, "w0": w0, "w1": w1, "w2": w2})
    np.testing.assert_allclose(out, want, rtol=1e-6)
    with pytest.raises(TypeError, match="expected 5 arguments"):
        f(x, w0, w1, out)
    with pytest.raises(TypeError, match="must be float32"):
        f(x, w0, w1, w2.astype("float64"), out)
    with pytest.raises(ValueError, match=r"must have shape \[10, 10\], got \[10, 9\]"):
        f(x, w0, w1, w2[:, :9].copy(), out)
    with pytest.raises(ValueError, match="contiguous"):
        f(x, w0, w1, np.asfortranarray(w2), out)


def test_dlpack_tensors_zero_copy(built, rng):
    symbol, inputs, want = arguments(built, rng)
    out = np.zeros(want.shape, want.dtype)

    class Foreign:
        """A DLPack producer that is not numpy."""

        def __init__(self, array: np.ndarray) -> None:
            self.array = array

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    f = built.module().get_function(symbol)
    f(*(Foreign(a) for a in inputs), Foreign(out))
    np.testing.assert_allclose(out, want, rtol=1e-6)  # written through: zero-copy
    out[:] = 0
    f(*(tvm_ffi.from_dlpack(a) for a in inputs), tvm_ffi.from_dlpack(out))
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_read_only_inputs_work(built, rng):
    symbol, inputs, want = arguments(built, rng)
    for a in inputs:
        a.flags.writeable = False
    out = np.empty(want.shape, want.dtype)
    built.module().get_function(symbol)(*inputs, out)
    np.testing.assert_allclose(out, want, rtol=1e-6)


# ------------------------------------------------------------------ bad calls


def bad_calls(inputs: list[np.ndarray], out: np.ndarray):
    """(what, arguments, message fragment) of calls the entry must refuse."""
    first = inputs[0]
    read_only = out.copy()
    read_only.flags.writeable = False
    wide = np.zeros((first.shape[0], 2 * first.shape[1]), first.dtype)
    swapped = first.astype(first.dtype.newbyteorder())
    return [
        ("too few", [*inputs], "expected"),
        ("too many", [*inputs, out, out], "expected"),
        ("no arguments", [], "expected"),
        ("dtype", [first.astype("float64"), *inputs[1:], out], "must be float32"),
        ("int dtype", [first.astype("int32"), *inputs[1:], out], "must be float32"),
        ("shape", [first[:, :-1].copy(), *inputs[1:], out], "must have shape"),
        ("rank", [first.reshape(-1), *inputs[1:], out], "must have rank"),
        ("non-contiguous", [wide[:, ::2], *inputs[1:], out], "contiguous"),
        ("transposed", [first.T, *inputs[1:], out], "contiguous"),
        ("broadcast", [np.broadcast_to(first[0], first.shape), *inputs[1:], out], "contiguous"),
        ("output dtype", [*inputs, out.astype("float64")], "must be float32"),
        ("read-only output", [*inputs, read_only], "read-only"),
        ("not a tensor", [*inputs, [1.0, 2.0]], "must be a tensor"),
        ("None", [None, *inputs[1:], out], "must be a tensor"),
        ("int", [*inputs, 3], "must be a tensor"),
        ("string", [*inputs, "out"], "must be a tensor"),
        ("byte order", [swapped, *inputs[1:], out], "native byte order"),
        ("object array", [first.astype(object), *inputs[1:], out], "DLPack only supports"),
    ]


def test_bad_calls_raise(built, rng):
    symbol, inputs, want = arguments(built, rng)
    out = np.zeros(want.shape, want.dtype)
    f = built.module().get_function(symbol)
    for what, args, fragment in bad_calls(inputs, out):
        with pytest.raises(RuntimeFailure, match=fragment) as info:
            f(*args)
        assert isinstance(info.value, ByocError), what
        assert symbol in str(info.value), (what, str(info.value))
        assert info.value.hint, what
    assert not out.any(), "a refused call wrote its output"
    f(*inputs, out)  # still works afterwards
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_read_only_output_is_never_written(guide, rng):
    symbol, inputs, _ = arguments(guide, rng)
    out = np.zeros((10, 10), "float32")
    out.flags.writeable = False
    with pytest.raises(RuntimeFailure, match=r"argument 4 \(output 0\) is a read-only numpy array"):
        guide.module().get_function(symbol)(*inputs, out)
    assert not out.any()
    with pytest.raises(RuntimeFailure, match="read-only"):
        guide.module().prepare(symbol, *inputs, out)


def test_bad_calls_in_a_subprocess_do_not_crash(guide):
    """Belt and braces: a crash (not an exception) would kill this child, not pytest."""
    script = f"""
import numpy as np
from byoc.errors import RuntimeFailure
from byoc.ir import TensorType
from byoc.runtime.interface import Signature
from byoc.runtime.module import LibraryModule
t = TensorType((10, 10), "float32")
m = LibraryModule({str(guide.path)!r}, {{"ccompiler_0": Signature((t,) * 4, (t,))}})
f = m.get_function("ccompiler_0")
x = np.ones((10, 10), "float32")
bad = [(), (x,) * 4, (x,) * 6, (x, x, x, x, np.ones((0,), "float32")), (x, x, x, None, x),
       (x, x, x, x, np.ones((10, 10, 1), "float32")), (x, x, x, x, np.ones((1, 1), "float32")[:, :])]
for args in bad:
    try:
        f(*args)
    except RuntimeFailure:
        pass
    else:
        raise SystemExit(f"no error for {{len(args)}} arguments")
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


# ------------------------------------------------------------------ prepared calls


def test_prepared_call(built, rng):
    symbol, inputs, want = arguments(built, rng)
    module = built.module()
    out = np.zeros(want.shape, want.dtype)
    run = module.prepare(symbol, *inputs, out)
    assert run() is None
    np.testing.assert_allclose(out, want, rtol=1e-6)
    fresh = built.inputs(symbol, rng)
    for bound, new in zip(inputs, fresh.values()):
        np.copyto(bound, new)
    run()
    (again,) = evaluate(built.functions[symbol], fresh)
    np.testing.assert_allclose(out, again, rtol=1e-6)


def test_prepared_call_checks_bindings(built, rng):
    symbol, inputs, want = arguments(built, rng)
    module = built.module()
    out = np.zeros(want.shape, want.dtype)
    for what, args, fragment in bad_calls(inputs, out):
        with pytest.raises(RuntimeFailure, match=fragment) as info:
            module.prepare(symbol, *args)
        assert symbol in str(info.value), what
    ro = [a.copy() for a in inputs]
    for a in ro:
        a.flags.writeable = False
    module.prepare(symbol, *ro, out)()
    np.testing.assert_allclose(out, want, rtol=1e-6)


# ------------------------------------------------------------------ loading


def test_loading_errors(guide, tmp_path):
    t = guide.signatures["ccompiler_0"]
    with pytest.raises(RuntimeFailure, match="has no function 'missing'"):
        LibraryModule(guide.path, {"missing": t})
    garbage = tmp_path / "libgarbage.so"
    garbage.write_bytes(b"\x7fELF" + b"\x01" * 200)
    with pytest.raises(RuntimeFailure, match="cannot load the library"):
        LibraryModule(garbage, {"ccompiler_0": t})
    with pytest.raises(RuntimeFailure, match="cannot load the library"):
        LibraryModule(tmp_path / "absent.so", {"ccompiler_0": t})
    module = LibraryModule(guide.path, {"ccompiler_0": (t.inputs, t.outputs)})  # plain pairs work too
    assert module.signature("ccompiler_0") == t
    for bad in (
        lambda: module.get_function("nope"),
        lambda: module.signature("nope"),
        lambda: module.prepare("nope"),
    ):
        with pytest.raises(RuntimeFailure, match="no function 'nope'") as info:
            bad()
        assert "ccompiler_0" in info.value.hint
    assert "ccompiler_0" in repr(module)


def test_get_function_is_cached(guide):
    module = guide.module()
    assert module.get_function("ccompiler_0") is module.get_function("ccompiler_0")
    assert module.get_function("ccompiler_0").__name__ == "ccompiler_0"


def test_runtime_does_not_import_the_generator():
    code = (
        "import sys\n"
        "import byoc.runtime.build, byoc.runtime.module\n"
        "loaded = sorted(m for m in sys.modules if m == 'byoc.generator' or m.startswith('byoc.generator.'))\n"
        "print(loaded)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
