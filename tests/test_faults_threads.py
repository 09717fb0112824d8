"""Faults: one compiled module, interpreter or model called from several threads at once."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import byoc
from byoc.building import build
from byoc.spec.search import backend_files

THREADS = 8
CALLS = 40

THREAD_GRAPH = """\
graph main(x: float32[64, 33], y: float32[64, 33]) {
  s = @BACKEND {
    k = const float32[64, 33] 0.5
    return multiply(subtract(add(x, y), k), y)
  }
  return s
}
"""
THREAD_BACKENDS = ("ccompiler", "engine", "fused", "json", "examplejson")
"""Modules called from several threads at once: compiled libraries (C, C++, fused C)
and the two interpreters."""


def _hammer(call) -> None:
    """Run ``call(seed)`` from THREADS threads CALLS times each; every result is checked."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def worker(t: int) -> None:
        try:
            barrier.wait()
            for i in range(CALLS):
                call(t * 1000 + i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:3]


def _expected(x, y):
    return ((x + y) - np.float32(0.5)) * y


@pytest.mark.parametrize("backend", THREAD_BACKENDS)
def test_module_functions_from_several_threads(backend, tmp_path):
    if backend not in backend_files(Path(byoc.spec.__file__).parent / "backends"):
        pytest.skip(f"no {backend} backend")
    if backend == "examplejson":  # no constants in ExampleJSON regions
        text = THREAD_GRAPH.replace("    k = const float32[64, 33] 0.5\n", "").replace(", k)", ", y)")
        expected = lambda x, y: ((x + y) - y) * y  # noqa: E731
    else:
        text, expected = THREAD_GRAPH, _expected
    program = byoc.parse(text.replace("BACKEND", backend))
    model = build(program, options={"engine.opt_level": "0"} if backend == "engine" else None)
    (module,) = model.modules[-1:]
    symbol = next(iter(module.symbols()))
    fn = module.get_function(symbol)

    def call(seed: int) -> None:
        rng = np.random.default_rng(seed)
        x, y = (rng.uniform(-2, 2, (64, 33)).astype(np.float32) for _ in range(2))
        out = np.empty((64, 33), np.float32)
        fn(x, y, out)
        np.testing.assert_allclose(out, expected(x, y), rtol=1e-6)

    _hammer(call)


def test_model_calls_from_several_threads(tmp_path):
    """A model (its executor owns the storage) serialises whole calls: each caller gets
    the result for its own inputs."""
    text = THREAD_GRAPH.replace("BACKEND", "ccompiler").replace("return s\n", "return s, add(s, x)\n")
    model = build(byoc.parse(text))

    def call(seed: int) -> None:
        rng = np.random.default_rng(seed)
        x, y = (rng.uniform(-2, 2, (64, 33)).astype(np.float32) for _ in range(2))
        s, t = model(x=x, y=y)
        np.testing.assert_allclose(s, _expected(x, y), rtol=1e-6)
        np.testing.assert_allclose(t, _expected(x, y) + x, rtol=1e-6)

    _hammer(call)
