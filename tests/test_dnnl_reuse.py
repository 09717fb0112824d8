"""The dnnl backend's reusable call state (spec/backends/dnnl/dnnl_support.c, dnnl_byoc_run): each
kernel keeps a stream, one memory object per argument and its scratchpad, made by its
first call; a later call sets the memories' data handles to its own buffers, and a call
made while another holds them makes its own (dnnl_byoc_run_alone).

A stale handle would show as a result computed from an earlier call's inputs or
written into an earlier call's outputs, so every call here brings new arrays and is
compared with the numpy reference. Failures are injected by a copy of the spec whose
helpers fail on chosen calls, as test_kernel_status.py's spec does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tvm_ffi
from conftest import module_library, random_array, run_threads
from dnnl_support import dnnl_copy
from libraries import missing_library

import byoc
from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.generator.partition import partition

if missing_library("dnnl"):
    pytest.skip(missing_library("dnnl"), allow_module_level=True)

RTOL = ATOL = 1e-4

# A kernel of each helper that runs through dnnl_byoc_run, in the regions partitioning
# makes: plain batch_norm, a pool, an eltwise op, dense with a bias and relu, softmax;
# and convolutions (with a bias, a sum post-op and relu; then batch_norm folded per
# call), which make their stream and scratch per call (dnnl_byoc_run_packed) and are
# checked here as the kernels around them.
GRAPH = """\
graph main(x: float32[2, 4, 9, 9], w: float32[6, 4, 3, 3], b: float32[6], r: float32[2, 6, 9, 9],
           s: float32[6], t: float32[6], m: float32[6], v: float32[6], d: float32[3, 12], dw: float32[5, 12],
           db: float32[5]) {
  c1 = relu(bias_add(conv(x, w, pads=[1, 1, 1, 1]), b, axis=1))
  c2 = relu(add(conv(x, w, pads=[1, 1, 1, 1]), r))
  c3 = tanh(conv(x, w, strides=[2, 2]))
  k1 = relu(batch_norm(conv(x, w, pads=[1, 1, 1, 1]), s, t, m, v))
  p1 = max_pool(batch_norm(c1, s, t, m, v), kernel_shape=[3, 3], strides=[2, 2])
  y = softmax(relu(bias_add(dense(d, dw), db, axis=1)), axis=1)
  return c2, c3, k1, p1, y
}
"""


class Regions:
    """The graph's regions, each called as its function of the backend's library."""

    def __init__(self, spec_dir: Path | None, name: str, tmp_path: Path) -> None:
        path = [str(spec_dir)] if spec_dir is not None else None
        program = partition(parse(GRAPH, "graph"), [load_backend(name, path)], load_catalog())
        self.callees = [n.callee for n in program.functions[0].nodes]
        assert all(c is not None and c.backend == name for c in self.callees)
        library = module_library(byoc.build(program, spec_path=path), tmp_path / "lib.so")
        module = tvm_ffi.load_module(str(library))
        self.fns = [module[f"dnnl_{k}"] for k in range(len(self.callees))]  # the spec's symbol_prefix

    def arguments(self, rng: np.random.Generator) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
        """For each region, new inputs (positive variances) and the reference's outputs."""
        calls = []
        for callee in self.callees:
            inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in callee.params}
            if "v" in inputs:
                inputs["v"] = np.abs(inputs["v"]) + 0.5
            calls.append((list(inputs.values()), evaluate(callee, inputs)))
        return calls

    def call(self, calls, outs) -> None:
        for fn, (inputs, _), out in zip(self.fns, calls, outs, strict=True):
            fn(*inputs, *out)


def assert_results(calls, outs) -> None:
    for (_, wants), got in zip(calls, outs, strict=True):
        for g, want in zip(got, wants, strict=True):
            scale = max(1.0, float(np.max(np.abs(want))))
            np.testing.assert_allclose(g, want, rtol=RTOL, atol=ATOL * scale)


def fresh(calls) -> list[list[np.ndarray]]:
    """Output buffers for ``calls``, holding NaN (a result not written stays NaN)."""
    return [[np.full(w.shape, np.nan, np.float32) for w in wants] for _, wants in calls]


def check_calls(regions: Regions, rng: np.random.Generator, times: int) -> None:
    for _ in range(times):
        calls = regions.arguments(rng)
        outs = fresh(calls)
        regions.call(calls, outs)
        assert_results(calls, outs)


def test_calls_with_new_arrays_each_get_their_own_result(tmp_path, rng):
    regions = Regions(None, "dnnl", tmp_path)
    rounds = [regions.arguments(rng) for _ in range(4)]
    outs = [fresh(calls) for calls in rounds]
    for calls, out in zip(rounds, outs):
        regions.call(calls, out)
        assert_results(calls, out)
    # Earlier buffers again, in another order: the handles follow each call's arrays.
    for calls, out in reversed(list(zip(rounds, outs))):
        for o in (o for region in out for o in region):
            o.fill(np.nan)
        regions.call(calls, out)
        assert_results(calls, out)
    for calls, out in zip(rounds, outs):
        assert_results(calls, out)  # no later call wrote into them


def test_threads_calling_one_function_with_their_own_arrays(tmp_path, rng):
    """Concurrent calls: one holds each kernel's reusable state, the others make their own."""
    regions = Regions(None, "dnnl", tmp_path)
    threads, rounds = 4, 6
    work = [[regions.arguments(rng) for _ in range(rounds)] for _ in range(threads)]

    def call(k: int) -> None:
        for calls in work[k]:
            outs = fresh(calls)
            regions.call(calls, outs)
            assert_results(calls, outs)

    run_threads(call, threads)


# Fault injection: a countdown that a helper of the copied spec consults; a call fails
# where the spec's `${hook}` test says so. The library's own counter of calls decides.
HOOKS = {
    # the first call fails after making the memories, before its stream: nothing half-made may stay
    "cache": (
        "  ok = ok && dnnl_stream_create(&p->stream, engine, dnnl_stream_default_flags) == dnnl_success;\n",
        "  ok = ok && atomic_fetch_add(&dnnl_byoc_test_calls, 1) != 0\n"
        "      && dnnl_stream_create(&p->stream, engine, dnnl_stream_default_flags) == dnnl_success;\n",
    ),
    # the first call fails after setting the handles, before executing
    "execute": (
        "  ok = ok && dnnl_primitive_execute(p->prim, p->stream, p->n, p->args) == dnnl_success\n",
        "  ok = ok && atomic_fetch_add(&dnnl_byoc_test_calls, 1) != 0\n"
        "      && dnnl_primitive_execute(p->prim, p->stream, p->n, p->args) == dnnl_success\n",
    ),
    # every other call runs as if another thread held the reusable state
    "alone": (
        "  if (atomic_exchange_explicit(&p->busy, 1, memory_order_acquire) != 0) {\n",
        "  if (atomic_fetch_add(&dnnl_byoc_test_calls, 1) % 2 == 1) {\n"
        "    return dnnl_byoc_run_alone(p->prim, engine, n, kinds, ptrs);\n"
        "  }\n"
        "  if (atomic_exchange_explicit(&p->busy, 1, memory_order_acquire) != 0) {\n",
    ),
}


def hooked_spec(tmp_path: Path, hook: str) -> Path:
    """A copy of the dnnl spec, named dnnlhook, with the fault hook ``hook``."""
    old, new = HOOKS[hook]

    def hooked(text: str) -> str:
        assert text.count(old) == 1, f"the hook {hook} no longer matches dnnl_support.c"
        include = '#include "dnnlhook_support.h"\n'
        return text.replace(old, new).replace(include, include + "static atomic_int dnnl_byoc_test_calls;\n")

    return dnnl_copy(tmp_path / "specs", "dnnlhook", hooked)


@pytest.mark.parametrize("hook", ["cache", "execute"])
def test_calls_after_a_failure_get_their_own_result(tmp_path, rng, hook):
    regions = Regions(hooked_spec(tmp_path, hook), "dnnlhook", tmp_path)
    calls = regions.arguments(rng)
    # dnnl_0_0, the conv, runs on state of its call's own: the batch_norm after it is
    # the first kernel through dnnl_byoc_run
    with pytest.raises(RuntimeError, match=r"dnnl_0: kernel dnnl_0_1 reported a failure"):
        regions.call(calls, fresh(calls))
    check_calls(regions, rng, 3)


def test_calls_alternating_with_calls_on_their_own_state(tmp_path, rng):
    check_calls(Regions(hooked_spec(tmp_path, "alone"), "dnnlhook", tmp_path), rng, 4)
