"""The per-thread workspace of the compiled backends' intermediate buffers
(generator/c/workspace.py): allocated once per thread, reused by every call.

Results stay right across repeated calls with new inputs and across threads that call
two functions of one module (so each thread's block grows) at once; a repeated call
touches no fresh memory; an allocation that fails is still a clean MemoryError."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from conftest import random_array

import byoc
from byoc.api import evaluate, load_backend, load_catalog
from byoc.building import build
from byoc.errors import RuntimeFailure
from byoc.generator.lowering import lower

BACKENDS = ("ccompiler", "fused", "cblas")
"""A c_source backend, the c_fused one (its anchored bodies have buffers), and a library
c_source backend."""

TWO_REGIONS = """\
graph main(x: float32[8, 16], y: float32[8, 16], v: float32[128, 256], u: float32[128, 256]) {
  a = @BACKEND {
    return softmax(add(x, y))
  }
  b = @BACKEND {
    h = multiply(v, u)
    return softmax(subtract(add(h, u), v))
  }
  return a, b
}
"""
"""Two functions of one module: `a` needs a small workspace, `b` a larger one, so a
thread that calls `a` first grows its block at its first call of `b`. softmax reads its
input along a row, so even the fused backend stores the sums in buffers."""


def _compiled(backend: str):
    """The lowered functions of the graph's regions and the compiled module holding them."""
    if backend == "cblas":
        pytest.importorskip("scipy_openblas32", reason="the cblas backend needs byoc-codegen[blas]")
    program = byoc.parse(TWO_REGIONS.replace("BACKEND", backend))
    externals = lower(program, load_backend, load_catalog()).externals_for(backend)
    model = build(program)
    (module,) = [m for m in model.modules if set(m.symbols()) == {fn.name for fn in externals}]
    return externals, module


def _check_calls(externals, module, rng: np.random.Generator, calls: int) -> None:
    """Call every function ``calls`` times with fresh inputs; each result must match the
    reference, whatever the previous call left in the workspace."""
    for _ in range(calls):
        for fn in externals:
            inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
            (out,) = (np.full(t.shape, np.nan, t.dtype) for t in fn.output_types)
            module.get_function(fn.name)(*inputs.values(), out)
            (want,) = evaluate(fn, inputs)
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeated_calls_with_new_inputs_match_the_reference(backend, rng):
    externals, module = _compiled(backend)
    _check_calls(externals, module, rng, calls=5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_threads_calling_two_functions_at_once_each_get_their_results(backend):
    externals, module = _compiled(backend)
    threads, errors = 6, []
    barrier = threading.Barrier(threads)

    def worker(seed: int) -> None:
        try:
            barrier.wait()
            # Every other thread starts with the larger function, so blocks are both
            # created large and grown while other threads compute.
            order = externals if seed % 2 else externals[::-1]
            _check_calls(order, module, np.random.default_rng(seed), calls=8)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(seed,)) for seed in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert not errors, errors[:3]


def test_the_bodies_allocate_nothing_per_call():
    """The generated bodies take their buffers from the workspace: no malloc, and no free
    but of the per-call block that a library with no thread-specific key left uses."""
    from byoc.generator.c_fused.generate import module_text as fused_text
    from byoc.generator.c_source.generate import module_text as c_text

    for backend, module_text in (("ccompiler", c_text), ("fused", fused_text)):
        program = byoc.parse(TWO_REGIONS.replace("BACKEND", backend))
        externals = lower(program, load_backend, load_catalog()).externals_for(backend)
        spec = load_backend(backend)
        args = (
            (externals, spec, load_catalog(), {})
            if backend == "ccompiler"
            else (externals, spec, {}, load_catalog())
        )
        text, _, linked = module_text(*args)
        _, functions = text.split(f"/* ---- {externals[0].name}: ", 1)
        assert "byoc_workspace(" in functions and "byoc_workspace" in linked  # byoc_workspace.c
        # The only free is of a workspace of the call's own, when the thread had no key.
        assert "malloc(" not in functions and functions.count("free(") == functions.count("  free(spare);")


FAULTS = textwrap.dedent(
    """
    import ctypes, resource, sys
    import numpy as np
    import byoc
    from byoc.building import build

    # Every malloc of 64 KiB or more maps fresh pages (and a fixed threshold stops glibc
    # from raising it after a free), so a body that allocated its buffers per call
    # would fault on each of their pages at every call.
    assert ctypes.CDLL(None).mallopt(-3, 65536) == 1  # M_MMAP_THRESHOLD
    backend = sys.argv[1]
    text = '''
    graph main(x: float32[512, 512], y: float32[512, 512]) {
      s = @BACKEND {
        return softmax(multiply(add(x, y), y))
      }
      return s
    }
    '''.replace("BACKEND", backend)
    model = build(byoc.parse(text))
    module = model.modules[0]
    (symbol,) = module.symbols()
    x, y = (np.random.default_rng(k).random((512, 512), np.float32) for k in range(2))
    out = np.empty((512, 512), np.float32)
    run = module.prepare(symbol, x, y, out)
    run()  # the first call allocates this thread's workspace
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(10):
        run()
    print(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
    """
)


@pytest.mark.parametrize("backend", ["ccompiler", "fused"])
def test_a_repeated_call_touches_no_fresh_memory(backend):
    """10 calls with 1 MiB buffers: per-call allocation would take over 2,500 page faults
    (256 pages per buffer, every call); the workspace takes none after the first call."""
    done = subprocess.run(
        [sys.executable, "-c", FAULTS, backend], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    faults = int(done.stdout.split()[-1])
    assert faults < 100, f"{faults} minor page faults in 10 calls"


@pytest.mark.parametrize("backend", ["ccompiler", "fused"])
def test_a_workspace_that_cannot_be_allocated_is_a_memory_error(backend):
    """matmul of [N, 1] by [1, N] makes an N x N intermediate of 2**46 floats (256 TiB, more
    than the address space); the call fails with the C side's MemoryError and the module
    still works."""
    n = 2**23
    text = f"""
    graph main(a: float32[{n}, 1], b: float32[1, {n}], w: float32[1, {n}], x: float32[4, 4]) {{
      s = @{backend} {{
        return dense(matmul(a, b), w)
      }}
      t = @{backend} {{
        return softmax(add(x, x))
      }}
      return s, t
    }}
    """
    program = byoc.parse(textwrap.dedent(text))
    externals = lower(program, load_backend, load_catalog()).externals_for(backend)
    module = build(program).modules[0]
    big, small = (fn.name for fn in externals)
    a, b, w = (np.ones(shape, np.float32) for shape in ((n, 1), (1, n), (1, n)))
    with pytest.raises(RuntimeFailure, match=f"{big}: cannot allocate the intermediate buffers") as raised:
        module.get_function(big)(a, b, w, np.empty((n, 1), np.float32))
    assert isinstance(raised.value.__cause__, MemoryError)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = np.empty((4, 4), np.float32)
    module.get_function(small)(x, out)
    (want,) = evaluate(externals[1], {externals[1].params[0].name: x})
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_fused_buffers_share_the_workspace_by_lifetime(tmp_path, rng):
    """A chain of anchors stores each value for the next nest; by the memory plan the
    third value reuses the first one's bytes (its last reader has run), and the
    results are the reference's."""
    from byoc.generator.c_fused.generate import module_text

    text = textwrap.dedent(
        """
        graph main(x: float32[6, 5]) {
          s = @fused {
            a = softmax(x, axis=0)
            b = softmax(a, axis=1)
            c = softmax(b, axis=0)
            return softmax(c, axis=1)
          }
          return s
        }
        """
    )
    program = byoc.parse(text)
    (fn,) = lower(program, load_backend, load_catalog()).externals_for("fused")
    code, _, _ = module_text([fn], load_backend("fused"), {}, load_catalog())
    places = dict(re.findall(r"float\* const (tmp\d+) = \(float\*\)\(ws \+ (\d+)\); /\* holds ", code))
    assert places == {"tmp0": "0", "tmp1": "128", "tmp2": "0"}, places
    assert "byoc_workspace(256, &spare);" in code
    _check_calls([fn], build(program).modules[0], rng, calls=3)


KEYS = textwrap.dedent(
    """
    import shutil, sys
    import numpy as np
    import tvm_ffi

    # 1,100 copies of one library, each loaded and kept: more than the process's
    # thread-specific keys (PTHREAD_KEYS_MAX, 1024), so the last ones find none left.
    # Every 100th call and the last ten are saved for the parent to check.
    source, scratch, symbol = sys.argv[1:]
    rng = np.random.default_rng(0)
    kept, saved = [], {}
    for i in range(1100):
        path = f"{scratch}/lib{i}.so"
        shutil.copy(source, path)
        kept.append(tvm_ffi.load_module(path))
        x, y = (rng.random((8, 16), np.float32) for _ in range(2))
        out = np.full((8, 16), np.nan, np.float32)
        kept[-1][symbol](x, y, out)
        if i % 100 == 0 or i >= 1090:
            saved.update({f"x{i}": x, f"y{i}": y, f"out{i}": out})
    np.savez(f"{scratch}/saved.npz", **saved)
    """
)


def test_a_library_with_no_thread_key_left_still_computes(tmp_path):
    """Past the process's thread-specific keys a library allocates per call instead."""
    externals, _ = _compiled("ccompiler")
    model = build(byoc.parse(TWO_REGIONS.replace("BACKEND", "ccompiler")))
    (entry,) = model.manifest.modules
    source = tmp_path / "source.so"
    source.write_bytes(model.members[entry.file])
    scratch = tmp_path / "copies"
    scratch.mkdir()
    fn = externals[0]
    done = subprocess.run(
        [sys.executable, "-c", KEYS, str(source), str(scratch), fn.name],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    saved = np.load(scratch / "saved.npz")
    calls = sorted(int(k[3:]) for k in saved.files if k.startswith("out"))
    assert calls[-1] == 1099 and len(calls) == 21
    for i in calls:
        (want,) = evaluate(fn, {fn.params[0].name: saved[f"x{i}"], fn.params[1].name: saved[f"y{i}"]})
        np.testing.assert_allclose(saved[f"out{i}"], want, rtol=1e-5, atol=1e-7)
