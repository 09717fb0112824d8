"""``byoc build`` and ``byoc run``: the main job, end to end."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..errors import UsageError
from ..output_steps import output_steps
from .compare import report
from .gen import add_graph_arguments, parse_options
from .logs import progress_printer
from .partition import add_explain_argument, explanation
from .run_inputs import (
    check_unused,
    import_specialised,
    inputs_for,
    read_inputs,
    supplied_inputs,
    without_specialised,
)

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
  byoc build model.onnx --backend fused --option host_isa=false -o any_x86.byoc

The bundle holds a manifest (format version, sha256 of every member), the host
graphs, the compiled libraries and their generated sources, and the source graph.
Load it with byoc.runtime.load("guide.byoc"); that needs no code generator.
A `fused` library is compiled for this CPU's x86-64 level (option host_isa): a CPU
below it refuses to load the bundle, with a hint. For a bundle that runs on every
x86-64 CPU, pass --option host_isa=false (SIMD clones, chosen when loaded).
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
        help="relative tolerance (default: 1e-4 float32, 1e-12 float64, 5e-3 float16, 4e-2 bfloat16; "
        "1e-3 for float32/float64 against output_*.pb; bool and integer outputs must be equal, a "
        "quantize_linear's within 1, its dequantization within one scale)",
    )
    r.add_argument(
        "--atol",
        type=_tolerance,
        default=None,
        help="absolute tolerance (default: 1e-5 float32, 1e-12 float64, 1e-3 float16, 8e-3 bfloat16, "
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
    from ..building import Timings, build
    from .onnx_import import shapes_of

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
    from ..api import load_catalog, parse
    from ..building import Timings, build
    from ..generator.placement import placement_summary
    from ..reference import evaluate
    from ..runtime import load
    from .onnx_import import shapes_of

    timings = Timings()
    profile = bool(args.profile or args.profile_trace)
    given = read_inputs(args.inputs)  # before any build: a bad --inputs costs no compile
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
        from ..api import language_of, parse_source

        options = parse_options(args.option)
        catalog = load_catalog(spec_path=args.spec_path)
        language = language_of(args.file, args.source_language)
        with timings.measure("parse"):  # the key of the source names its build's record
            if language == "onnx" and str(args.file) != "-":
                program, specialised, source_key = import_specialised(args, catalog, given)
            else:
                program, source_key = parse_source(
                    args.file, language, catalog=catalog, spec_path=args.spec_path, shapes=shapes_of(args)
                )
        if specialised:
            given = without_specialised(given, specialised)
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
            source_key=source_key,
        )
    if profile:
        model.check_profiling()  # a bundle built without it: say so before running anything
    qualified = len(model.graph_names) > 1
    supplied, origins, stored = supplied_inputs(args.inputs, given, model, program)
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
        name: inputs_for(model.executor(name), name, supplied, origins, args.seed, qualified)
        for name in model.graph_names
    }
    if supplied is not None:
        check_unused(supplied, model, qualified)
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
        failed += report(outputs, expected, args.rtol, args.atol, steps)
        if stored is not None and stored.outputs:
            sys.stdout.write(f"  against {stored.directory}/output_*.pb:\n")
            want = [t.array for t in stored.outputs]
            failed_stored += report(outputs, want, args.rtol, args.atol, steps, stored=True)
        saved.update(
            (f"{name}/output_{k}" if qualified else f"output_{k}", out) for k, out in enumerate(outputs)
        )
    stages = " · ".join(f"{k} {_ms(v)}" for k, v in timings.stages.items())
    sys.stdout.write(f"stages: {stages}\n")
    if args.save_outputs:
        from ..atomic import write_file
        from ..npz_files import npz_bytes

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
    from ..runtime.profile import write_chrome_trace

    for p in profiles:
        sys.stdout.write(f"profile of {p.table()}\n")
    if trace:
        write_chrome_trace(profiles, trace)
        events = sum(len(p.events) for p in profiles)
        sys.stdout.write(f"wrote {trace} ({events} events; open it in ui.perfetto.dev or chrome://tracing)\n")


def _shown(value: np.ndarray) -> str:
    """A specialised input's value, short: ``[1, 128, 768]``, or its size when large."""
    flat = np.ravel(value)
    return str(flat.tolist()) if flat.size <= 8 else f"{value.dtype}{list(value.shape)}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"
