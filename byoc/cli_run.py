"""``byoc build`` and ``byoc run``: the main job, end to end."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .cli_gen import add_graph_arguments, parse_options
from .cli_logging import progress_printer
from .cli_partition import add_explain_argument, explanation
from .errors import UsageError
from .ir import is_half, is_integer, numpy_dtype
from .npz_files import read_npz
from .output_steps import output_steps

RUN_EPILOG = """\
examples:
  byoc run examples/guide_whole_graph.graph
  byoc run examples/tvm_external_runtime.examplejson --backend ccompiler
  byoc run model.byoc                          # a bundle from `byoc build`
  byoc run g.graph --inputs data.npz --rtol 1e-6
  byoc run g.graph --option opt_level=3 --seed 7
  byoc run model.onnx --backend fused --shape x=1,3,32,32
  byoc run model.onnx --backend fused --inputs test_data_set_0 --save-outputs out.npz
  byoc run model.onnx --backend ccompiler,fused --profile-trace trace.json

It parses (or imports an ONNX model), generates, compiles (or loads a bundle), runs
every graph on seeded random inputs (or on --inputs, an .npz with one array per graph
input; for several graphs name them GRAPH/INPUT), and compares every output with the
numpy reference.

--inputs may also be an ONNX test-data directory (test_data_set_0/): input_K.pb
feeds the graph's K-th input (for an imported model, its K-th ONNX input). When the
directory holds output_K.pb files, the outputs are also compared with them, with
ONNX's own test tolerances (rtol 1e-3, atol 1e-7; float16 and bfloat16 outputs keep
their defaults) unless --rtol/--atol are given.
--save-outputs writes the outputs as an .npz: output_K (GRAPH/output_K for several
graphs).
--profile builds with profiling (the generated code times each kernel call; a build
without it has no profiling code), runs each graph once more after the checked run
(so without one-time setup: inits, workspaces), timing every region call, kernel call
and host op, and prints after the results a table per graph: name, kind (region,
kernel, host op), backend, calls, total and mean time, and share of the run.
--profile-trace FILE.json does the same and writes the events as a Chrome trace, which
Perfetto (ui.perfetto.dev) and chrome://tracing open. See docs/performance.md.

exit status: 0 when every output matches, 1 on a mismatch, 2 on bad input
"""

BUILD_EPILOG = """\
examples:
  byoc build examples/guide_whole_graph.graph -o guide.byoc
  byoc build examples/tvm_external_runtime.examplejson --backend json -o rt.byoc
  byoc run guide.byoc

The bundle holds a manifest (format version, sha256 of every member), the host
graphs, the compiled libraries and their generated sources, and the source graph.
Load it with byoc.runtime.load("guide.byoc"); that needs no code generator.
"""


def add_commands(sub, parents) -> None:
    b = sub.add_parser(
        "build",
        parents=parents,
        help="build a graph into a runnable .byoc bundle",
        description="Generate and compile a graph, and save everything it needs to run in one .byoc file.",
        epilog=BUILD_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_graph_arguments(b)
    b.add_argument(
        "-o", "--output", metavar="FILE", required=True, help="the bundle to write (e.g. model.byoc)"
    )
    b.add_argument(
        "--profile",
        action="store_true",
        help="build with profiling: the compiled code times each kernel call, for "
        "`byoc run BUNDLE --profile` and Model.profile()",
    )
    b.set_defaults(run=_cmd_build)

    r = sub.add_parser(
        "run",
        parents=parents,
        help="build and run a graph, and check it against numpy (the main job)",
        description="Parse, generate, compile, run and compare every output with the numpy reference.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_graph_arguments(r)
    add_explain_argument(r)
    r.add_argument(
        "--inputs",
        metavar="NPZ|DIR",
        help="input arrays: an .npz, or an ONNX test-data directory (input_*.pb, output_*.pb); "
        "default: seeded random inputs",
    )
    r.add_argument("--save-outputs", metavar="NPZ", help="write every graph's outputs into this .npz")
    r.add_argument(
        "--profile",
        action="store_true",
        help="build with profiling, and print the time of each region, kernel and host op after the results",
    )
    r.add_argument(
        "--profile-trace",
        metavar="FILE.json",
        help="as --profile, and write the events as a Chrome trace (Perfetto, chrome://tracing)",
    )
    r.add_argument("--seed", type=_seed, default=0, help="seed of the random inputs (default 0)")
    r.add_argument(
        "--rtol",
        type=_tolerance,
        default=None,
        help="relative tolerance (default: 1e-5 float32, 1e-12 float64, 5e-3 float16, 4e-2 bfloat16; "
        "1e-3 for float32/float64 against output_*.pb; bool and integer outputs must be equal, a "
        "quantize_linear's within 1, its dequantization within one scale)",
    )
    r.add_argument(
        "--atol",
        type=_tolerance,
        default=None,
        help="absolute tolerance (default: 1e-6 float32, 1e-12 float64, 1e-3 float16, 8e-3 bfloat16, "
        "times the output's largest magnitude when above 1; 1e-7 for float32/float64 against output_*.pb)",
    )
    r.set_defaults(run=_cmd_run)


def _seed(text: str) -> int:
    """A --seed: a non-negative integer (numpy's seeds are)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: seeds are non-negative")
    return value


def _tolerance(text: str) -> float:
    """An --rtol or --atol: a finite, non-negative number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid tolerance {text!r}: not a number") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"invalid tolerance {text!r}: tolerances are finite and >= 0")
    return value


def _cmd_build(args: argparse.Namespace) -> int:
    from .building import Timings, build
    from .cli_import import shapes_of

    timings = Timings()
    model = build(
        args.file,
        backends=args.backend,
        options=parse_options(args.option),
        spec_path=args.spec_path,
        language=args.source_language,
        timings=timings,
        shapes=shapes_of(args),
        progress=progress_printer(args),
        profile=args.profile,
    )
    model.save(args.output)
    size = Path(args.output).stat().st_size
    modules = ", ".join(f"{m.backend} ({m.module_format.value})" for m in model.manifest.modules)
    sys.stdout.write(
        f"wrote {args.output}: {len(model.members)} members, {size:,} bytes\n"
        f"  graphs: {', '.join(model.graph_names)}\n  modules: {modules}\n"
    )
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from .api import load_catalog, parse
    from .building import Timings, build
    from .cli_import import shapes_of
    from .generator.explain import placement_summary
    from .reference import evaluate
    from .runtime import load

    timings = Timings()
    profile = bool(args.profile or args.profile_trace)
    given = _read_inputs(args.inputs)  # before any build: a bad --inputs costs no compile
    specialised: dict[str, np.ndarray] = {}
    if str(args.file).endswith(".byoc"):
        if args.backend or args.option or args.explain:
            raise UsageError(
                "--backend, --option and --explain do not apply to a built bundle",
                hint="rebuild it with `byoc build`, or explain its source with `byoc partition --explain`",
            )
        if args.shape:
            raise UsageError(
                "--shape does not apply to a built bundle", hint="its input shapes were fixed by `byoc build`"
            )
        with timings.measure("load"):
            model = load(args.file)  # with the op catalog the bundle was built with
            catalog, source = model.catalog, model.manifest.source
            text, where = model.text(source), f"{args.file}:{source}"
            program = parse(text, "graph", file=where, catalog=catalog, weights_files=model.members)
    else:
        from .api import language_of, parse_file

        options = parse_options(args.option)
        catalog = load_catalog(spec_path=args.spec_path)
        language = language_of(args.file, args.source_language)
        with timings.measure("parse"):
            if language == "onnx" and given is not None and str(args.file) != "-":
                program, specialised = _import_specialised(args, catalog, given)
            else:
                program = parse_file(
                    args.file, language, catalog=catalog, spec_path=args.spec_path, shapes=shapes_of(args)
                )
        if specialised:
            given = _without(given, specialised)
        if args.explain:
            sys.stdout.write(explanation(args, program, catalog) + "\n")
        model = build(
            program,
            backends=args.backend,
            options=options,
            spec_path=args.spec_path,
            language=language,
            catalog=catalog,
            timings=timings,
            progress=progress_printer(args),
            profile=profile,
        )
    if profile:
        model.check_profiling()  # a bundle built without it: say so before running anything
    qualified = len(model.graph_names) > 1
    supplied, origins, stored = _supplied(args.inputs, given, model, program)
    backends = ", ".join(m.backend for m in model.manifest.modules)
    sys.stdout.write(f"byoc run {args.file}  (backends: {backends})\n")
    if model.placement:  # a bundle keeps no record of it
        sys.stdout.write(placement_summary(model.placement) + "\n")
    for name, value in specialised.items():
        sys.stdout.write(
            f"specialised: input {name!r} = {_shown(value)} (built as a constant, from --inputs)\n"
        )
    failed = failed_stored = 0
    graph_inputs = {
        name: _inputs(model.executor(name), name, supplied, origins, args.seed, qualified)
        for name in model.graph_names
    }
    if supplied is not None:
        _check_unused(supplied, model, qualified)
    saved: dict[str, np.ndarray] = {}
    profiles = []
    for name, inputs in graph_inputs.items():
        executor = model.executor(name)
        fn = program.function(name)
        with timings.measure("run"):
            outputs = executor(**inputs)
        if profile:  # a second run, without the first one's setup (inits, workspaces)
            with timings.measure("profile"):
                profiles.append(model.profile(name, **inputs))
        with timings.measure("reference"):
            expected = evaluate(fn, inputs, catalog)
        sys.stdout.write(f"graph {name}: {len(inputs)} input(s), {len(outputs)} output(s)\n")
        steps = output_steps(fn, catalog)
        failed += _report(outputs, expected, args.rtol, args.atol, steps)
        if stored is not None and stored.outputs:
            sys.stdout.write(f"  against {stored.directory}/output_*.pb:\n")
            want = [t.array for t in stored.outputs]
            failed_stored += _report(outputs, want, args.rtol, args.atol, steps, stored=True)
        saved.update(
            (f"{name}/output_{k}" if qualified else f"output_{k}", out) for k, out in enumerate(outputs)
        )
    stages = " · ".join(f"{k} {_ms(v)}" for k, v in timings.stages.items())
    sys.stdout.write(f"stages: {stages}\n")
    if args.save_outputs:
        from .atomic import write_file
        from .npz_files import npz_bytes

        write_file(args.save_outputs, npz_bytes(saved))
        sys.stdout.write(f"wrote {args.save_outputs} ({len(saved)} array(s))\n")
    if failed or failed_stored:
        differ = [f"{failed} output(s) differ from the numpy reference"] if failed else []
        differ += (
            [f"{failed_stored} output(s) differ from {stored.directory}/output_*.pb"] if failed_stored else []
        )
        sys.stdout.write(f"result: {'; '.join(differ)}\n")
    else:
        also = f" and {stored.directory}/output_*.pb" if stored is not None and stored.outputs else ""
        sys.stdout.write(f"result: every output matches the numpy reference{also}\n")
    if profiles:
        _print_profiles(profiles, args.profile_trace)
    return 1 if failed or failed_stored else 0


def _print_profiles(profiles, trace: str | None) -> None:
    """The profile table of each graph, and the Chrome trace of them all when asked."""
    from .runtime.profile import write_chrome_trace

    for p in profiles:
        sys.stdout.write(f"profile of {p.table()}\n")
    if trace:
        write_chrome_trace(profiles, trace)
        events = sum(len(p.events) for p in profiles)
        sys.stdout.write(f"wrote {trace} ({events} events; open it in ui.perfetto.dev or chrome://tracing)\n")


STORED_RTOL, STORED_ATOL = 1e-3, 1e-7
"""The default tolerances against stored output_*.pb files: ONNX's backend tests' own,
for float32 and float64. A float16 or bfloat16 output, whose last place is coarser
than 1e-3, is held to its dtype's defaults (:data:`DEFAULT_TOLERANCES`) instead."""


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _read_inputs(path: str | None):
    """What --inputs holds, read before the build: an .npz's arrays by key, the ONNX
    test data of a directory, or None (no --inputs: random inputs)."""
    if path is None:
        return None
    if not Path(path).is_dir():
        return read_npz(path, f"--inputs {path}", UsageError)
    from .onnx.test_data import read_test_data

    return read_test_data(path)


def _import_specialised(args: argparse.Namespace, catalog, given):
    """``(program, specialised)``: the ONNX model of ``byoc run``, specialised to the
    --inputs values of the inputs that a node needs at build time (Reshape's shape, a
    reduction's axes, TopK's k: :class:`byoc.onnx.importer.NeedsValue`), as
    :mod:`byoc.onnx.backend` does; ``specialised`` maps each such ONNX input to its value."""
    from .cli_import import shapes_of
    from .onnx.model_import import import_program, load_model
    from .onnx.importer import NeedsValue

    model = load_model(args.file)
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    bound: dict[str, np.ndarray] = {}
    while True:
        try:
            program = import_program(
                model,
                shapes_of(args),
                catalog=catalog,
                spec_path=args.spec_path,
                where=str(args.file),
                bound=bound,
            )
            return program, bound
        except NeedsValue as need:
            value = _given_value(given, names, need.input)
            if value is None or need.input in bound:
                raise
            bound[need.input] = value


def _given_value(given, names: list[str], name: str) -> np.ndarray | None:
    """The --inputs value of ONNX input ``name`` (the K-th input's input_K.pb, or the
    .npz array of that name), or None."""
    if isinstance(given, dict):
        return given.get(name)
    k = names.index(name) if name in names else len(given.inputs)
    return given.inputs[k].array if k < len(given.inputs) else None


def _without(given, specialised: dict[str, np.ndarray]):
    """--inputs less the values that the build took as constants."""
    if isinstance(given, dict):
        return {k: v for k, v in given.items() if k not in specialised}
    kept = tuple(t for t in given.inputs if not any(t.array is v for v in specialised.values()))
    return type(given)(given.directory, kept, given.outputs)


def _shown(value: np.ndarray) -> str:
    """A specialised input's value, short: ``[1, 128, 768]``, or its size when large."""
    flat = np.ravel(value)
    return str(flat.tolist()) if flat.size <= 8 else f"{value.dtype}{list(value.shape)}"


def _supplied(path: str | None, given, model, program):
    """``(arrays, origins, test_data)`` of --inputs (``given``, read by :func:`_read_inputs`)
    matched to the built model: the arrays by --inputs key (None: random inputs), where
    each came from (for messages), and the ONNX test data when --inputs is a directory
    (None otherwise)."""
    if given is None:
        return None, {}, None
    if isinstance(given, dict):
        return given, {key: f"--inputs array {key!r}" for key in given}, None
    data = given
    if len(model.graph_names) != 1:
        raise UsageError(
            f"--inputs {path}: an ONNX test-data directory feeds one graph, and this file has "
            f"{len(model.graph_names)}",
            hint="pass an .npz with GRAPH/INPUT arrays",
        )
    (graph,) = model.graph_names
    names = model.executor(graph).input_names
    if len(data.inputs) != len(names):
        raise UsageError(
            f"--inputs {path} holds {len(data.inputs)} input file(s), but graph {graph} takes "
            f"{len(names)} input(s): {', '.join(names)}",
            hint="input_K.pb feeds the graph's K-th input",
        )
    want = program.function(graph).output_types
    if data.outputs and len(data.outputs) != len(want):
        raise UsageError(
            f"--inputs {path} holds {len(data.outputs)} output file(s), but graph {graph} has {len(want)} output(s)"
        )
    for k, (tensor, t) in enumerate(zip(data.outputs, want)):
        _check_array(tensor.array, t, f"--inputs {tensor.file}", f"output {k} of {graph} is")
    arrays = {name: tensor.array for name, tensor in zip(names, data.inputs)}
    origins = {name: f"--inputs {tensor.file} (for input {name})" for name, tensor in zip(names, data.inputs)}
    return arrays, origins, data


def _check_array(array: np.ndarray, t, what: str, wanted: str) -> None:
    """``array`` is of type ``t``, else an error: "WHAT is float64[2], but WANTED float32[2]"."""
    if array.shape != t.shape or array.dtype != np.dtype(t.dtype):
        raise UsageError(f"{what} is {array.dtype}{list(array.shape)}, but {wanted} {t}")


def _inputs(executor, graph: str, supplied, origins, seed: int, qualified: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inputs: dict[str, np.ndarray] = {}
    for name in executor.input_names:
        t = executor.input_type(name)
        if supplied is None:
            inputs[name] = random_array(rng, t)
            continue
        key = f"{graph}/{name}" if qualified else name
        if key not in supplied:
            raise UsageError(
                f"--inputs has no array {key!r}",
                hint=f"graph {graph} takes: {', '.join(executor.input_names)}",
            )
        _check_array(supplied[key], t, origins[key], f"{graph} takes")
        inputs[name] = supplied[key]
    return inputs


def random_array(rng: np.random.Generator, t) -> np.ndarray:
    """Seeded random values of type ``t``: small integers (0 to 100 for the unsigned
    dtypes, -100 to 100 else, within every integer dtype's range), True/False for bool,
    and floats in [-2, 2] rounded to the dtype (every float dtype holds them, float16
    and bfloat16 included)."""
    if t.dtype == "bool":
        return rng.integers(0, 1, size=t.shape, endpoint=True).astype(np.bool_)
    if is_integer(t.dtype):
        info = np.iinfo(t.dtype)
        low, high = max(-100, int(info.min)), min(100, int(info.max))
        return rng.integers(low, high, size=t.shape, endpoint=True).astype(t.dtype)
    return rng.uniform(-2.0, 2.0, size=t.shape).astype(numpy_dtype(t.dtype))


def _check_unused(supplied, model, qualified: bool) -> None:
    """An --inputs array that no graph input takes is a mistake (a misspelt name)."""
    takes = [
        f"{graph}/{name}" if qualified else name
        for graph in model.graph_names
        for name in model.executor(graph).input_names
    ]
    unused = sorted(set(supplied) - set(takes))
    if unused:
        raise UsageError(
            f"--inputs has {len(unused)} array(s) that no graph input takes: {', '.join(map(repr, unused))}",
            hint=f"inputs: {', '.join(takes)}",
        )


def _report(
    outputs,
    expected,
    rtol: float | None,
    atol: float | None,
    steps: list[float] | None = None,
    *,
    stored: bool = False,
) -> int:
    """Print a table of ``outputs`` against ``expected``; the number that differ.
    ``steps``: how far each output may lie, in steps of a quantization
    (:mod:`byoc.output_steps`; default: none). ``stored``: ``expected`` came from
    output_*.pb files (see :data:`STORED_RTOL`)."""
    rows = [("output", "shape", "dtype", "max abs error", "status")]
    failed = 0
    stepped = []
    for k, (got, want, step) in enumerate(zip(outputs, expected, steps or [0.0] * len(outputs))):
        rt, at = (
            (_or(rtol, STORED_RTOL), _or(atol, STORED_ATOL))
            if stored and not is_half(str(got.dtype))
            else (rtol, atol)
        )
        status, error = _compare(got, want, rt, at, step)
        failed += status != "ok"
        if status == "ok" and step and _compare(got, want, rt, at)[0] != "ok":  # the step was needed
            stepped.append(f"{k} (one step: {step:.3g})")
        rows.append((str(k), str(list(got.shape)), str(got.dtype), error, status))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for row in rows:
        sys.stdout.write("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
    if stepped:
        sys.stdout.write(
            f"  within one step of a quantization: output {', '.join(stepped)}; a quantize_linear "
            "rounds a float whose order of summation ONNX leaves to the implementation\n"
        )
    return failed


DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-12, 1e-12),
    "float32": (1e-5, 1e-6),
    "float16": (5e-3, 1e-3),
    "bfloat16": (4e-2, 8e-3),
}
"""``(rtol, atol)`` of each float dtype when --rtol/--atol are not given; the atol is
scaled by the output's largest magnitude above 1 (see :func:`_compare`).

float16 and bfloat16 are computed in float32 and each node's result is rounded once
to the dtype, as the numpy reference rounds its float64 result: the two roundings
start from values a float32 rounding apart, so they land on the same or neighbouring
16-bit values, one unit in the last place (ulp) apart per node, and a chain of nodes
carries its inputs' differences along. A ulp is 2**-10 of a float16 value at most
(11 significant bits: 9.8e-4 relative at 1.0) and 2**-7 of a bfloat16 (8 bits:
7.8e-3), so the relative tolerances allow about 5 ulps (5e-3, 4e-2) and the absolute
ones about one ulp of the output's largest magnitude (1e-3, 8e-3), for an element
where a sum cancels. float32's 1e-5 is about 84 of its ulps (2**-23 = 1.2e-7), for
kernels that sum in their own order. bool and integer outputs must be equal, but for
a quantization's step (:mod:`byoc.output_steps`)."""


def _compare(
    got: np.ndarray, want: np.ndarray, rtol: float | None, atol: float | None, step: float = 0.0
) -> tuple[str, str]:
    """(status, max abs error) of ``got`` against ``want``: integers equal (or within
    ``step``), floats close as their dtype's tolerances say (plus ``step``)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"MISMATCH (expected {want.dtype}{list(want.shape)})", "-"
    if got.size == 0:
        return "ok", "0"
    dtype = str(got.dtype)
    if dtype == "bool" or is_integer(dtype):  # exact; the difference without wrapping (uint64)
        differ = got != want
        if not differ.any():
            return "ok", "0"
        big, small = np.maximum(got[differ], want[differ]), np.minimum(got[differ], want[differ])
        error = max(int(b) - int(s) for b, s in zip(big.tolist(), small.tolist()))
        return ("ok" if error <= step else "MISMATCH"), str(error)
    default_rtol, default_atol = DEFAULT_TOLERANCES[dtype]
    # np.allclose on a bfloat16 array computes in bfloat16: compare doubles
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    if atol is None:
        # A kernel that sums in its own order (a library's blocked conv, a tree
        # reduction) leaves an element where the sum cancels with the rounding of its
        # larger terms: the default allows each element a few units of the output's
        # largest magnitude besides its own relative error.
        finite = np.abs(want64[np.isfinite(want64)])
        largest = float(finite.max()) if finite.size else 0.0
        atol = default_atol * max(1.0, largest)
    atol += step * (1 + 1e-6)  # a step of a dequantized value, and its float32 rounding
    rtol = _or(rtol, default_rtol)
    error = float(np.max(np.abs(got64 - want64)))
    ok = np.allclose(got64, want64, rtol=rtol, atol=atol, equal_nan=True)
    return ("ok" if ok else "MISMATCH"), f"{error:.3g}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"
