"""byoc.tvm: a byoc backend as a TVM relax external codegen (docs/tvm.md).

A small relax CNN (conv2d + bias + relu, a dense, an elementwise chain) is partitioned
with a backend's generated patterns, compiled by byoc through RunCodegen, run in the
relax VM against numpy, exported with export_library and run again in a process that
cannot import byoc."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest
from libraries import missing_library
from mini_spec import C_SOURCE

import byoc
from byoc.errors import UsageError
from byoc.ir import MAX_NAME_LENGTH
from byoc.spec import ENV_VAR

if importlib.util.find_spec("tvm") is None:
    pytest.skip("could not import 'tvm': pip install apache-tvm", allow_module_level=True)

tvm: Any = None
relax: Any = None


@pytest.fixture(autouse=True, scope="module")
def tvm_imported():
    """Import tvm (and byoc.tvm, which imports it) when this module's first test runs:
    it takes seconds, which pytest's collection of the whole suite would pay on every
    worker, also when no test of this module is selected."""
    global tvm, relax
    tvm = pytest.importorskip("tvm")
    from tvm import relax

    import byoc.tvm  # noqa: F401  (the tests call it as byoc.tvm)


RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 3, 3, 3)).astype("float32")
B = RNG.standard_normal((1, 4, 1, 1)).astype("float32")
WD = RNG.standard_normal((10, 256)).astype("float32")
X = RNG.standard_normal((1, 3, 8, 8)).astype("float32")
BACKENDS = ["ccompiler", "fused", "dnnl"]


def small_cnn() -> tvm.IRModule:
    """conv2d (padding 1) + bias + relu -> reshape -> dense -> (d - 1) * d."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(X.shape, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            c = bb.emit(relax.op.nn.conv2d(x, relax.const(W), padding=1))
            c = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(c, relax.const(B)))))
            f = bb.emit(relax.op.reshape(c, (1, 256)))
            d = bb.emit(relax.op.matmul(f, relax.op.permute_dims(relax.const(WD))))
            out = bb.emit_output(relax.op.multiply(relax.op.subtract(d, relax.const(np.float32(1))), d))
        bb.emit_func_output(out)
    return bb.get()


def numpy_cnn(x: np.ndarray) -> np.ndarray:
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))  # n c h w kh kw
    conv = np.einsum("nchwij,ocij->nohw", windows, W.astype(np.float64))
    d = np.maximum(conv + B, 0).reshape(1, 256) @ WD.T.astype(np.float64)
    return (d - 1) * d


def offloaded_calls(mod: tvm.IRModule) -> int:
    return mod["main"].script().count("call_dps_packed")


def skip_without(backend: str) -> None:
    reason = missing_library(backend) if backend == "dnnl" else None
    if reason:
        pytest.skip(reason)


def run_vm(lib, x: np.ndarray) -> np.ndarray:
    return relax.VirtualMachine(lib, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()


def test_the_pattern_table_comes_from_the_spec():
    names = [name for name, *_ in byoc.tvm.patterns("ccompiler")]
    assert all(name.startswith("byoc_ccompiler.") for name in names)
    assert {"byoc_ccompiler.conv", "byoc_ccompiler.dense", "byoc_ccompiler.bias_add"} <= set(names)
    assert "byoc_ccompiler.conv_bias_relu" in names  # a composite pattern of the spec, in relax
    assert names.index("byoc_ccompiler.conv_bias_relu") < names.index("byoc_ccompiler.conv")
    assert "byoc_ccompiler.divide" not in names  # ccompiler maps no divide; fused does
    assert "byoc_fused.divide" in [name for name, *_ in byoc.tvm.patterns("fused")]
    assert all(len(entry) == 4 and callable(entry[3]) for entry in byoc.tvm.patterns("fused"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_small_cnn_offloads_builds_and_runs_against_numpy(backend, tmp_path):
    skip_without(backend)
    mod = byoc.tvm.offload(small_cnn(), backend)
    assert offloaded_calls(mod) >= 1
    ex = tvm.compile(mod, target="llvm")
    path = tmp_path / "model.so"
    ex.export_library(str(path), options=byoc.tvm.link_flags(backend))
    got = run_vm(tvm.runtime.load_module(str(path)), X)
    np.testing.assert_allclose(got, numpy_cnn(X), rtol=1e-4, atol=1e-3)


def test_ccompiler_leaves_what_it_cannot_broadcast_to_tvm():
    """ccompiler does not broadcast: the bias add becomes a bias_add (one value per
    channel), and subtracting a scalar stays in TVM."""
    main = byoc.tvm.offload(small_cnn(), "ccompiler")["main"].script()
    assert "R.subtract(" in main and "R.nn.conv2d(" not in main and "R.matmul(" not in main


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_exported_library_runs_where_byoc_cannot_be_imported(backend, tmp_path):
    skip_without(backend)
    ex = tvm.compile(byoc.tvm.offload(small_cnn(), backend), target="llvm")
    ex.export_library(str(tmp_path / "model.so"), options=byoc.tvm.link_flags(backend))
    np.save(tmp_path / "x.npy", X)
    child = textwrap.dedent(
        """
        import sys

        class NoByoc:
            def find_spec(self, name, path=None, target=None):
                if name == "byoc" or name.startswith("byoc."):
                    raise ImportError("byoc is not available here")

        sys.meta_path.insert(0, NoByoc())
        sys.path = [p for p in sys.path if p not in ("", ".")]
        try:
            import byoc  # noqa: F401
        except ImportError:
            pass
        else:
            sys.exit("byoc was importable")
        import numpy as np
        import tvm
        from tvm import relax

        lib = tvm.runtime.load_module("model.so")
        out = relax.VirtualMachine(lib, tvm.cpu())["main"](tvm.runtime.tensor(np.load("x.npy"))).numpy()
        np.save("out.npy", out)
        print("byoc" in sys.modules)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-c", child], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), numpy_cnn(X), rtol=1e-4, atol=1e-3)


def two_adds() -> tvm.IRModule:
    """add of two vectors, then add of that to a matrix (broadcast)."""
    bb = relax.BlockBuilder()
    a = relax.Var("a", relax.TensorType((5,), "float32"))
    b = relax.Var("b", relax.TensorType((5,), "float32"))
    c = relax.Var("c", relax.TensorType((4, 5), "float32"))
    with bb.function("main", [a, b, c]):
        with bb.dataflow():
            s = bb.emit(relax.op.add(a, b))
            out = bb.emit_output(relax.op.add(c, s))
        bb.emit_func_output(out)
    return bb.get()


def test_a_spec_on_the_spec_path_is_a_relax_codegen(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    (tmp_path / "myvendor.yaml").write_text(
        C_SOURCE.replace("name: mini", "name: myvendor").replace(
            "symbol_prefix: mini", "symbol_prefix: myvendor"
        ),
        encoding="utf-8",
    )
    spec_path = [str(tmp_path)]
    assert [name for name, *_ in byoc.tvm.patterns("myvendor", spec_path=spec_path)] == ["byoc_myvendor.add"]
    mod = byoc.tvm.offload(two_adds(), "myvendor", spec_path=spec_path)
    assert offloaded_calls(mod) == 1  # the vectors' add; its one macro is 1-D
    assert "R.add(c," in mod["main"].script()
    ex = tvm.compile(mod, target="llvm")
    lib = tmp_path / "model.so"
    ex.export_library(str(lib))
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(lib)), tvm.cpu())
    a, b, c = (RNG.standard_normal(s).astype("float32") for s in ((5,), (5,), (4, 5)))
    got = vm["main"](*(tvm.runtime.tensor(v) for v in (a, b, c))).numpy()
    np.testing.assert_array_equal(got, c + (a + b))


def test_relax_names_become_short_distinct_c_names():
    long = "fused_" + "_".join(["relax_nn_conv2d_relax_add_relax_nn_relu"] * 6) + "_byoc_ccompiler"
    assert len(long) > MAX_NAME_LENGTH
    short = byoc.tvm.short_symbol(long)
    assert len(short) <= MAX_NAME_LENGTH and short.isidentifier()
    assert short == byoc.tvm.short_symbol(long)
    assert short != byoc.tvm.short_symbol(long + "1")
    assert short.startswith("tvm_fused_relax_nn_conv2d")


def test_registration_is_idempotent_and_options_reach_byoc():
    name = byoc.tvm.register("ccompiler")
    assert name == byoc.tvm.register("ccompiler") == "relax.ext.byoc_ccompiler"
    assert tvm.get_global_func(name) is not None
    mod = byoc.tvm.offload(small_cnn(), "ccompiler", options={"opt_level": 0})
    ex = tvm.compile(mod, target="llvm")
    assert ex is not None
    with pytest.raises(Exception, match="opt_level") as info:
        byoc.tvm.offload(small_cnn(), "ccompiler", options={"opt_level": 7})
    assert "byoc (byoc_ccompiler)" in str(info.value)


def test_the_regions_object_is_built_once_through_byocs_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    byoc.tvm.offload(small_cnn(), "ccompiler")
    # the build's support objects (byoc_entry.o, ...), and TVM's one object of everything
    objects = sorted((tmp_path / "cache").rglob("tvm_entries.o"))
    assert [o.name for o in objects] == ["tvm_entries.o"]
    built = objects[0].stat().st_mtime_ns
    byoc.tvm.offload(small_cnn(), "ccompiler")
    assert sorted((tmp_path / "cache").rglob("tvm_entries.o")) == objects
    assert objects[0].stat().st_mtime_ns == built  # found, not compiled again
    objects[0].write_bytes(objects[0].read_bytes()[:100])  # a damaged entry is rebuilt
    (objects[0].parent / "tvm_entries.o.sha256").write_text(
        hashlib.sha256(objects[0].read_bytes()).hexdigest() + "\n"
    )
    ex = tvm.compile(byoc.tvm.offload(small_cnn(), "ccompiler"), target="llvm")
    ex.export_library(str(tmp_path / "model.so"))
    got = run_vm(tvm.runtime.load_module(str(tmp_path / "model.so")), X)
    np.testing.assert_allclose(got, numpy_cnn(X), rtol=1e-4, atol=1e-3)


def test_several_backends_share_one_partition_in_order_of_preference(tmp_path):
    """ccompiler first, fused for what it leaves (the scalar subtract it cannot
    broadcast): one FuseOpsByPattern over both tables, options per backend."""
    mod = byoc.tvm.offload(small_cnn(), "ccompiler,fused", options={"fused": {"vectorize": True}})
    main = mod["main"].script()
    assert "R.subtract(" not in main and "R.nn.conv2d(" not in main
    ex = tvm.compile(mod, target="llvm")
    ex.export_library(str(tmp_path / "model.so"), options=byoc.tvm.link_flags(["ccompiler", "fused"]))
    got = run_vm(tvm.runtime.load_module(str(tmp_path / "model.so")), X)
    np.testing.assert_allclose(got, numpy_cnn(X), rtol=1e-4, atol=1e-3)
    with pytest.raises(UsageError, match="not offloaded to"):
        byoc.tvm.offload(small_cnn(), "ccompiler,fused", options={"opt_level": 3})
    with pytest.raises(UsageError, match="named twice"):
        byoc.tvm.offload(small_cnn(), "fused,fused")
    with pytest.raises(UsageError, match="no backend"):
        byoc.tvm.offload(small_cnn(), " , ")
