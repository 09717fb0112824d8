"""The networks suite's native floors and limit: oneDNN and OpenBLAS called directly
from C, and the machine's peak FLOP rate.

The C harnesses live in benchmarks/harness/. Each is compiled when the suite runs by
byoc's own toolchain (``runtime.build``: the compiler a backend spec names, ``$CC``
over it, the result cached by content), and the libraries are found the way byoc
finds them for a build: the ``requires:`` of the backend spec that calls the library
(``byoc.spec.requirements``) gives the ``-I``, ``-L``, ``-Wl,-rpath`` and ``-l`` flags.
A library that is not installed makes its harness "not installed" (skipped), like a
peer. All calls go through ctypes, which releases the GIL; each harness function
takes a repeat count so that a tiny call is timed without ctypes' own cost (the
Bench's ``per_call`` divides it out).
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import numpy as np

from . import peers
from .kernel_workloads import System
from .timing import Bench

HARNESS = Path(__file__).resolve().parent / "harness"
FLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")
FMA_FLAGS = ("-O2", "-mavx2", "-mfma", "-pthread", "-Wall", "-Wextra", "-Werror")
LIBRARIES = {"dnnl_direct": "dnnl", "blas_direct": "cblas"}
"""harness -> the backend spec whose ``requires:`` locates the library it calls."""
FMA_ISA = {16: "AVX-512", 8: "AVX2"}
"""The probe's vectors, by their float32 lanes (harness/fma_peak.c picks the widest)."""
FMA_SECONDS = 0.02
"""How long one peak sample runs (on each thread)."""


class NotInstalled(Exception):
    """The library a harness calls is not installed here (the message says why)."""


def compile_harness(name: str) -> ctypes.CDLL:
    """benchmarks/harness/<name>.c compiled and loaded; raises NotInstalled when its
    library is missing, BuildError when it does not compile."""
    from byoc.api import load_backend
    from runtime.build import build_library
    from runtime.toolchain import toolchain

    source = (HARNESS / f"{name}.c").read_text()
    if name not in LIBRARIES:
        chain = toolchain("c", "cc", "gnu11", FMA_FLAGS, link=("-pthread",))
        return ctypes.CDLL(str(build_library({f"{name}.c": source}, f"{name}.c", chain)))
    spec = load_backend(LIBRARIES[name])
    flags = []
    if "cblas_prefix" in spec.options:  # the library's symbol prefix, as the backend uses it
        flags.append(f"-DBENCH_SGEMM={spec.options['cblas_prefix'].default}cblas_sgemm")
    linkages = []
    for req in spec.requires.values():
        try:
            linkages.append(req.locate())
        except Exception as exc:  # requirements.NotFound: the library is not installed
            raise NotInstalled(f"{req.name} is not installed ({exc}); {req.install}") from None
    include = [f for lk in linkages for f in lk.compile_flags]
    link = [f for lk in linkages for f in lk.link_flags]
    compiler = spec.compile.compiler or "cc"
    chain = toolchain("c", compiler, "c99", (*include, *FLAGS, *flags), link=link)
    return ctypes.CDLL(str(build_library({f"{name}.c": source}, f"{name}.c", chain)))


def _ptr(a: np.ndarray | None) -> ctypes.c_void_p:
    return ctypes.c_void_p(None if a is None else a.ctypes.data)


def _repeats(seconds_per_call: float) -> int:
    """Calls per ctypes call: enough that ctypes' own cost (about 1 µs) is noise."""
    return 1 if seconds_per_call > 1e-4 else 1000


# ------------------------------------------------------------------------- oneDNN


def operands(kind: str, arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The workload's source and weights: a matmul's a and b, a conv's or dense's x and w."""
    return (arrays["a"], arrays["b"]) if kind == "matmul" else (arrays["x"], arrays["w"])


def dnnl_systems(
    lib: ctypes.CDLL, kind: str, arrays: dict[str, np.ndarray], attrs: dict[str, Any]
) -> list[System]:
    """oneDNN directly: a conv (plain formats, and format_any with reorders), an int8
    conv (format_any with reorders: oneDNN's int8 convolutions want nhwc), a dense (an
    inner product) or a matmul (plain row-major, the batch dims as given)."""
    for make in (lib.bench_dnnl_conv, lib.bench_dnnl_dense, lib.bench_dnnl_matmul):
        make.restype = ctypes.c_void_p
    lib.bench_dnnl_conv.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int,
    ]
    lib.bench_dnnl_dense.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_void_p]
    lib.bench_dnnl_matmul.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 3
    lib.bench_dnnl_conv_q8.restype = ctypes.c_void_p
    lib.bench_dnnl_conv_q8.argtypes = (
        [ctypes.c_void_p, ctypes.c_int]
        + [ctypes.c_void_p] * 3
        + [
            ctypes.c_int,
            ctypes.c_float,
            ctypes.c_int32,
            ctypes.c_float,
            ctypes.c_int32,
        ]
    )
    lib.bench_dnnl_run.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long]
    lib.bench_dnnl_impl.restype = ctypes.c_char_p
    lib.bench_dnnl_impl.argtypes = lib.bench_dnnl_free.argtypes = [ctypes.c_void_p]
    q8 = attrs.get("q8")
    x, w = (arrays["x"], q8["w"]) if q8 else operands(kind, arrays)
    y = np.empty(attrs["out_shape"], attrs.get("out_dtype", np.float32))
    if kind == "conv_q8":
        g = np.asarray(attrs["geometry"], np.int64)
        scales = (float(q8["xs"]), int(q8["xz"]), float(q8["ys"]), int(q8["yz"]))
        handle = lib.bench_dnnl_conv_q8(
            _ptr(g),
            int(x.dtype == np.uint8),
            _ptr(w),
            _ptr(q8["ws"]),
            _ptr(q8["b"]),
            int(attrs["relu"]),
            *scales,
        )
        made = [("oneDNN direct (int8, format_any + reorders)", "dnnl_any", handle)]
    elif kind == "conv":
        g = np.asarray(attrs["geometry"], np.int64)
        variants = [
            (f"oneDNN direct (nchw/oihw{', bias+relu' * attrs['fused']})", "dnnl_plain", 0),
            ("oneDNN direct (format_any + reorders)", "dnnl_any", 1),
        ]
        made = [
            (
                label,
                path,
                lib.bench_dnnl_conv(_ptr(g), any_, _ptr(w), _ptr(arrays.get("b")), int(attrs["relu"])),
            )
            for label, path, any_ in variants
        ]
    elif kind == "matmul":
        rank = max(x.ndim, w.ndim)
        xd, wd = (np.asarray((1,) * (rank - a.ndim) + a.shape, np.int64) for a in (x, w))
        handle = lib.bench_dnnl_matmul(rank, _ptr(xd), _ptr(wd), _ptr(w))
        made = [("oneDNN direct (matmul, row-major)", "dnnl_plain", handle)]
    else:
        made = [
            (
                "oneDNN direct (inner product, nc/oi)",
                "dnnl_plain",
                lib.bench_dnnl_dense(*x.shape, w.shape[0], _ptr(w)),
            )
        ]
    systems = []
    for label, path, handle in made:
        if not handle:
            raise RuntimeError(f"{label}: oneDNN could not make the primitive")
        reps = _repeats(attrs["flops"] / 1e10)
        args = (ctypes.c_void_p(handle), _ptr(x), _ptr(y))

        def once(args=args) -> np.ndarray:
            if lib.bench_dnnl_run(*args, 1):
                raise RuntimeError("oneDNN execution failed")
            return y.copy()

        keep = (x, w, y, arrays, q8)
        bench = Bench("f(*a, n)", {"f": lib.bench_dnnl_run, "a": args, "n": reps, "keep": keep})
        info = {"impl": lib.bench_dnnl_impl(handle).decode(), "per_call": reps}
        caveat = peers.int8_saturation_caveat("oneDNN") if kind == "conv_q8" else None
        if caveat:
            info["caveat"] = caveat
        systems.append(System(label, "native", bench, once, path=path, info=info))
    return systems


# ------------------------------------------------------------------------ OpenBLAS


def gemm_batches(x: np.ndarray, w: np.ndarray, trans_w: bool) -> tuple[tuple[int, ...], int, int, int, int]:
    """How cblas_sgemm computes x @ w.T (``trans_w``: a dense) or numpy's x @ w, as the
    cblas backend does: (the result's shape, batches, m, x's step, w's step). When w
    has no batch dims one product covers all of x's rows; otherwise one per batch,
    an operand without batches (a step of 0) broadcast."""
    (k, n) = (w.shape[1], w.shape[0]) if trans_w else w.shape[-2:]
    if trans_w or w.ndim == 2:
        return (*x.shape[:-1], n), 1, int(np.prod(x.shape[:-1])), 0, 0
    m = x.shape[-2]
    batch_shape = np.broadcast_shapes(x.shape[:-2], w.shape[:-2])
    batches = int(np.prod(batch_shape))
    steps = []
    for a, step in ((x, m * k), (w, k * n)):
        own = int(np.prod(a.shape[:-2]))
        if own not in (1, batches):
            raise NotImplementedError(f"batch dims {a.shape[:-2]} broadcast partly to {batch_shape}")
        steps.append(step if own == batches else 0)
    return (*batch_shape, m, n), batches, m, *steps


def sgemm_system(lib: ctypes.CDLL, kind: str, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> System:
    """OpenBLAS's cblas_sgemm directly: y = x @ w.T for a dense, numpy's a @ b for a
    matmul (one sgemm, or one per batch: see ``gemm_batches``)."""
    lib.bench_sgemm.argtypes = (
        [ctypes.c_int] * 5 + [ctypes.c_long] * 2 + [ctypes.c_void_p] * 3 + [ctypes.c_long]
    )
    x, w = operands(kind, arrays)
    trans_w = kind == "dense"
    shape, batches, m, x_step, w_step = gemm_batches(x, w, trans_w)
    y = np.empty(shape, np.float32)
    k, n = x.shape[-1], shape[-1]
    args = (batches, m, k, n, int(trans_w), x_step, w_step, _ptr(x), _ptr(w), _ptr(y))
    reps = _repeats(attrs["flops"] / 1e10)

    def once() -> np.ndarray:
        lib.bench_sgemm(*args, 1)
        return y.copy()

    bench = Bench("f(*a, n)", {"f": lib.bench_sgemm, "a": args, "n": reps, "keep": (x, w, y)})
    return System("OpenBLAS cblas_sgemm direct", "native", bench, once, path="sgemm", info={"per_call": reps})


# ---------------------------------------------------------------------------- peak


def peak_systems(lib: ctypes.CDLL, threads: tuple[int, ...]) -> list[System]:
    """The FMA microbenchmark on each thread count; info["flops"] is one call's FLOPs."""
    lib.bench_fma.restype = ctypes.c_double
    lib.bench_fma.argtypes = [ctypes.c_long, ctypes.c_int]
    lib.bench_fma_lanes.restype = ctypes.c_int
    isa = FMA_ISA[lib.bench_fma_lanes()]
    probe = 1 << 16
    iterations = max(probe, int(probe * FMA_SECONDS / _seconds(lib, probe)))
    systems = []
    for n in threads:
        flops = lib.bench_fma(iterations, n)
        if flops <= 0:
            raise RuntimeError(f"the FMA microbenchmark could not start {n} threads")
        systems.append(
            System(
                f"peak: {isa} FMA, {n} thread{'s' * (n > 1)}",
                "peak",
                Bench("f(i, n)", {"f": lib.bench_fma, "i": iterations, "n": n}),
                path=f"peak_{n}",
                info={"threads": n, "flops": flops, "isa": isa},
            )
        )
    return systems


def _seconds(lib: ctypes.CDLL, iterations: int) -> float:
    import time

    start = time.perf_counter()
    lib.bench_fma(iterations, 1)
    return max(time.perf_counter() - start, 1e-6)
