"""The `fused` backend beyond its goldens: the options (loop hints, parallel loops), the
overlap check that its restrict pointers need, fork safety of its parallel loops, the
c_fused spec keys (per-op C expressions) and their validation, and the CLI.

Results are always checked against the numpy reference, never against numbers.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest
from compile_util import compile_library
from conftest import random_array
from shipped_fused import FUSED_YAML, SUPPORT, write_fused_copy
from test_gen_fused import BACKEND, check_against_reference, compile_text, externals_of, generate

from byoc import cli
from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build
from byoc.errors import SpecError
from byoc.generator.lowering import lower
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS, check_spec_file
from byoc.spec.search import backend_files

SHIPPED_SPEC = FUSED_YAML
PARALLEL_CALL = "byoc_parallel_for(fused_0_loop0_, &args, "
"""A nest on the module's thread pool (tests/test_fused_pool.py tests the pool itself)."""


@pytest.fixture(scope="module", autouse=True)
def no_user_specs():
    """Only the shipped specs: no user spec directories from ``$BYOC_SPEC_PATH``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(ENV_VAR, raising=False)
        yield


def big_graph(n: int) -> str:
    return (
        f"graph main(x: float32[{n}], w: float32[{n}]) {{\n"
        "  s = @fused { return multiply(add(x, w), w) }\n  return s\n}\n"
    )


def run_both(program, options, seed: int = 3):
    """The outputs of a build with ``options``, and the reference's."""
    fn = program.functions[0]
    rng = np.random.default_rng(seed)
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    return build(program, options=options)(**inputs), evaluate(fn, inputs)


# ------------------------------------------------------------------------ options


def test_defaults_build_for_this_cpu_and_clone_only_without_host_isa():
    text = generate(externals_of("whole_graph"))
    assert "#pragma" not in text and "_POSIX_C_SOURCE" not in text and "byoc_parallel_ok" not in text
    assert (
        "host_isa=true, target_clones=true, vectorize=false, openmp_threshold=262144, "
        "openmp_reduction_threshold=4194304, block_reductions=true, float32_dots=true." in text
    )
    assert "byoc_simd_clones" not in text  # the build's -march compiles one version
    portable = generate(externals_of("whole_graph"), {"host_isa": "false"})
    clones = '#define byoc_simd_clones __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))'
    assert portable.count(clones) == 1
    assert portable.count("\nbyoc_simd_clones\nstatic void fused_") == 2  # one per region body
    off = generate(externals_of("whole_graph"), {"host_isa": "false", "target_clones": "false"})
    assert "byoc_simd_clones" not in off and "target_clones=false" in off


def test_target_clones_run_the_same(tmp_path, rng):
    externals = externals_of("chain64")
    text = generate(externals, {"host_isa": "false"})
    assert "byoc_simd_clones" in text
    module = compile_text(text, tmp_path)  # compile_util: -O1, no -fopenmp
    check_against_reference(module, externals[0], rng)


def test_vectorize_marks_every_innermost_loop(tmp_path, rng):
    externals = externals_of("broadcast_mix")
    text = generate(externals, {"vectorize": "true"})
    assert text.count("#pragma omp simd\n") == 4  # one per non-empty nest
    assert text.count("#pragma GCC ivdep\n") == 4
    assert "#pragma clang loop vectorize(enable)" in text
    for line in ("#pragma omp simd", "#pragma GCC ivdep"):
        after = text[text.index(line) :].split("\n")
        assert after[after.index("#endif") + 1].lstrip().startswith("for (int64_t i2 = 0;"), "innermost"
    # The hints compile without OpenMP (compile_util passes no -fopenmp) and change nothing.
    module = compile_text(text, tmp_path)
    for fn in externals:
        check_against_reference(module, fn, rng)


def test_openmp_threshold_parallelises_large_loops_only():
    small, large = (
        externals_of("guide_subgraph"),
        lower(parse(big_graph(1 << 20), "graph"), load_backend, load_catalog()).externals_for(BACKEND),
    )
    assert "#pragma" not in generate(large)  # off by default
    text = generate(large, {"openmp_threshold": str(1 << 20)})
    assert PARALLEL_CALL + f"{1 << 20});" in text and "byoc_pool.c" in text  # the pool's file, linked
    assert "for (int64_t i = begin; i < end; ++i) {" in text  # the outlined chunk of the loop
    assert PARALLEL_CALL not in generate(large, {"openmp_threshold": str((1 << 20) + 1)})
    assert PARALLEL_CALL in generate(small, {"openmp_threshold": "100"})
    assert PARALLEL_CALL not in generate(small, {"openmp_threshold": "101"})
    assert "byoc_parallel_for" not in generate(large, {"openmp_threshold": "0"})
    both = generate(small, {"openmp_threshold": "1", "vectorize": "true"})
    assert PARALLEL_CALL in both and "#pragma omp simd\n" in both and "omp parallel" not in both


def test_pthread_flag_follows_the_thresholds():
    spec = load_backend(BACKEND)
    both_off = {"openmp_threshold": "0", "openmp_reduction_threshold": "0"}
    flags = spec.compile.render_flags(spec.template_values(spec.option_values(both_off)))
    assert "-O3" in flags and "-fwrapv" in flags and "-pthread" not in flags
    on = spec.compile.render_flags(spec.template_values(spec.option_values({"openmp_threshold": "65536"})))
    assert on[-1] == "-pthread" and on.count("-pthread") == 1  # the reduction threshold's too, once
    default = spec.compile.render_flags(spec.template_values())
    assert default.count("-pthread") == 1 and "-fopenmp" not in default  # no OpenMP at all
    # host_isa: the machine's level, which only the build fills in (runtime.build)
    assert default[-3:-1] == ("-march=${x86_64_level}", "-mneeded")
    portable = spec.compile.render_flags(spec.template_values(spec.option_values({"host_isa": "false"})))
    assert not any(f.startswith("-march") or f == "-mneeded" for f in portable)


def conv_program(size: int):
    return parse(
        f"graph main(x: float32[1, 8, {size}, {size}], w: float32[8, 8, 3, 3], b: float32[8]) {{\n"
        "  r = @fused { return relu(bias_add(conv(x, w, pads=[1, 1, 1, 1]), b)) }\n  return r\n}\n",
        "graph",
        file="conv.graph",
    )


def test_openmp_reduction_threshold_counts_the_points_of_reduction_nests():
    """A conv nest of 8 * 20 * 20 outputs of 72 points each: 230400 points."""
    externals = lower(conv_program(20), load_backend, load_catalog()).externals_for(BACKEND)
    assert PARALLEL_CALL not in generate(externals)  # below the default
    assert PARALLEL_CALL in generate(externals, {"openmp_reduction_threshold": "230400"})
    assert PARALLEL_CALL not in generate(externals, {"openmp_reduction_threshold": "230401"})
    assert "byoc_parallel_for" not in generate(externals, {"openmp_reduction_threshold": "0"})
    # an elementwise region never counts as a reduction
    text = generate(externals_of("bias_add_relu"), {"openmp_reduction_threshold": "1"})
    assert "byoc_parallel_for" not in text


@pytest.mark.parametrize("options", [{"openmp_reduction_threshold": "1"}, {"block_reductions": "false"}])
def test_parallel_and_plain_conv_nests_give_the_same_bits(options):
    program = conv_program(12)
    got, want = run_both(program, options)
    default, _ = run_both(program, {})
    for g, d, w in zip(got, default, want):
        np.testing.assert_array_equal(g, d)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "options",
    [{"openmp_threshold": "1"}, {"openmp_threshold": "1", "vectorize": "true"}, {"openmp_threshold": "0"}],
)
def test_options_do_not_change_results(options):
    program = parse(externals_source("broadcast_mix"), "graph", file="mix.graph")
    got, want = run_both(program, options)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_parallel_text_compiles_without_extra_flags(tmp_path, rng):
    externals = externals_of("bias_add_relu")
    text = generate(externals, {"openmp_threshold": "1", "vectorize": "true"})
    compile_library({"fused.c": text, **SUPPORT}, "fused.c", tmp_path)
    check_against_reference(compile_text(text, tmp_path / "again"), externals[0], rng)


def _call_in_child(model, inputs, queue) -> None:
    (out,) = model(**inputs)
    queue.put(out)


def test_parallel_loops_survive_fork():
    """A forked child has none of its parent's pool threads: the generated guard runs the
    child's loops serially (tests/test_fused_pool.py forks with os.fork too)."""
    program = parse(big_graph(1 << 16), "graph")
    model = build(program, options={"openmp_threshold": "1"})
    rng = np.random.default_rng(9)
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in program.functions[0].params}
    (want,) = evaluate(program.functions[0], inputs)
    np.testing.assert_array_equal(model(**inputs)[0], want)  # the parent's thread pool now exists
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_call_in_child, args=(model, inputs, queue))
    child.start()
    got = queue.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------- overlap


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    (fn,) = externals_of("multi_output")
    module = compile_text(generate([fn]), tmp_path_factory.mktemp("multi"))
    return module[fn.name]


def test_outputs_may_not_overlap_other_arguments(multi):
    x, y = np.ones((3, 4), np.float32), np.ones((3, 4), np.float32)
    out = np.zeros((3, 4), np.float32)
    for args in ((x, y, x, out), (x, y, out, out), (x, y, out, y)):
        with pytest.raises(ValueError, match="shares memory with another argument"):
            multi(*args)
    big = np.zeros((2, 3, 4), np.float32)
    multi(x, x, big[0], big[1])  # inputs may alias; distinct views of one array are fine
    np.testing.assert_array_equal(big[0], x + x)
    np.testing.assert_array_equal(big[1], (x + x) * (x - x))
    shifted = np.zeros(13, np.float32)
    with pytest.raises(ValueError, match="shares memory"):
        multi(x, y, shifted[:12].reshape(3, 4), shifted[1:].reshape(3, 4))


# ------------------------------------------------------------------- spec keys


def user_spec(tmp_path: Path, old: str, new: str) -> Path:
    text = SHIPPED_SPEC.read_text(encoding="utf-8")
    assert old in text, old
    return write_fused_copy(tmp_path, text.replace(old, new))


def test_an_op_can_give_its_own_c_expression(tmp_path, rng):
    user_spec(
        tmp_path,
        "  relu: {}\n",
        '  relu: {c: "byoc_test_relu_${dtype}(${x0})"}\n',
    )
    path = tmp_path / f"{BACKEND}.yaml"
    path.write_text(
        path.read_text().replace(
            "prelude: |\n",
            "prelude: |\n  static float byoc_test_relu_float32(float v) { return v > 0.0f ? v : (float)0; }\n",
        )
    )
    spec = load_backend(BACKEND, spec_path=[tmp_path])
    assert spec.ops["relu"].expression == "byoc_test_relu_${dtype}(${x0})"
    assert spec.ops["add"].expression == "${x0} + ${x1}"  # the catalog's
    externals = externals_of("bias_add_relu")
    text = generate(externals, spec=spec)
    assert "static float byoc_test_relu_float32(float v)" in text
    assert "const float t1 = byoc_test_relu_float32(t0);" in text
    check_against_reference(compile_text(text, tmp_path / "build"), externals[0], rng)


@pytest.mark.parametrize(
    "old, new, message, at",
    [
        ("  relu: {}\n", '  relu: {c: "${x0} + ${x1}"}\n', "undefined placeholder ${x1}", "${x1}"),
        ("  copy: {}\n", '  copy: {c: "${x0};"}\n', "must be a C expression, not a statement", ";"),
        ("  copy: {}\n", '  copy: {c: "  "}\n', "the C expression is empty", '"  "'),
        ("  copy: {}\n", "  copy: {token: cp}\n", "unknown key 'token'", "token"),
        (
            '  sum:\n    reduce: {total: {init: "0", update: "${total} + ${x0}"}}\n    result: "${total}"\n',
            '  sum: {c: "${x0}"}\n',
            "c does not apply to a reduce op",
            "c",
        ),
        (
            "  dense: *dot\n",
            '  dense: {reduce: {acc: {init: "0", update: "${acc} + ${x2}"}}, result: "${acc}"}\n',
            "undefined placeholder ${x2}",
            "${x2}",
        ),
        (
            "  dense: *dot\n",
            '  dense: {reduce: {acc: {init: "0", update: "${acc}"}}, result: "${x0}"}\n',
            "undefined placeholder ${x0} in op dense: the result",
            "${x0}",
        ),
        (
            "  vectorize:\n",
            "  x0: {type: int, default: 0}\n  vectorize:\n",
            "option name 'x0' is taken",
            None,
        ),
        (
            "  vectorize:\n    type: bool",
            "  vectorize:\n    type: int",
            "reads vectorize as bool, not int",
            None,
        ),
        (
            "  block_reductions:\n    type: bool",
            "  block_reductions:\n    type: int",
            "reads block_reductions as bool, not int",
            None,
        ),
        (
            "  float32_dots:\n    type: bool",
            "  float32_dots:\n    type: int",
            "reads float32_dots as bool, not int",
            None,
        ),
        (
            '        float_update: "fused_maddf(${acc}, ${x0}, ${x1})"\n',
            '        float_update: "fused_maddf(${acc}, ${x0}, ${x2})"\n',
            "undefined placeholder ${x2} in op conv: the float_update of accumulator acc",
            "${x2}",
        ),
        (
            '        float_update: "fused_maddf(${acc}, ${x0}, ${x1})"\n',
            '        float_update: "${acc} + ${x0} * ${x1};"\n',
            "must be a C expression, not a statement",
            ";",
        ),
        (
            '        float_update: "fused_maddf(${acc}, ${x0}, ${x1})"\n',
            '        float_updte: "fused_maddf(${acc}, ${x0}, ${x1})"\n',
            "unknown key 'float_updte' in op conv: accumulator acc",
            "float_updte",
        ),
        (
            "    openmp_threshold: [-pthread]",
            "    openmp_threshold: [-pthread]\n    label: [-DX]",
            "not a boolean or int option",
            None,
        ),
    ],
    ids=[
        "placeholder",
        "statement",
        "empty",
        "key",
        "c_on_reduce",
        "update",
        "result",
        "x0_option",
        "option_type",
        "block_type",
        "float32_dots_type",
        "float_update_placeholder",
        "float_update_statement",
        "float_update_key",
        "str_flags",
    ],
)
def test_bad_c_fused_specs_are_located_errors(tmp_path, old, new, message, at):
    path = user_spec(tmp_path, old, new)
    if "label" in new:
        path.write_text(
            path.read_text().replace("options:\n", "options:\n  label: {type: str, default: a}\n")
        )
    with pytest.raises(SpecError) as info:
        check_spec_file(path)
    assert message in info.value.message
    if at is not None:  # located at the first occurrence of `at` on the edited line
        lines = path.read_text().splitlines()
        row = next(i for i, line in enumerate(lines) if line.startswith(new.split("\n")[-2]))
        assert (info.value.location.line, info.value.location.column) == (row + 1, lines[row].index(at) + 1)


def test_option_flags_take_int_options(tmp_path):
    """An int option's flags are added when it is not 0 (openmp_threshold's -pthread)."""
    spec = load_backend(BACKEND)
    assert spec.compile.option_flags == {
        "host_isa": ("-march=${x86_64_level}", "-mneeded"),  # a bool option's
        "openmp_threshold": ("-pthread",),
        "openmp_reduction_threshold": ("-pthread",),
    }
    catalog, rules = load_catalog(), spec.kind.shape_rules
    computed = sum(1 for op in catalog.values() if op.shape_rule in rules)  # every op its kind computes
    assert check_spec_file(SHIPPED_SPEC) == f"backend fused (c_fused, {computed} ops)"


# ------------------------------------------------------------------------ CLI


def test_check_and_backends_list_fused(capsys):
    specs = sorted(str(p) for p in backend_files(SHIPPED_BACKENDS).values())
    assert cli.main(["check", *specs]) == 0
    out = capsys.readouterr().out
    assert f"{SHIPPED_SPEC}: ok" in out and out.count(": ok") == len(specs)
    assert cli.main(["backends"]) == 0
    listing = capsys.readouterr().out.split("\n\n")[0]  # the table, before the libraries
    rows = {line.split()[0]: line.split() for line in listing.splitlines()[1:]}
    assert rows[BACKEND][1:3] == ["c_fused", "float32,"] and "divide," in rows[BACKEND]
    assert cli.main(["backends", BACKEND]) == 0
    detail = capsys.readouterr().out
    flags = "-O3 -fwrapv -ffp-contract=off -fno-trapping-math --param=max-completely-peel-times=1 -Wall -Wextra -Werror"
    assert f"cc -std=c99 {flags} -march=${{x86_64_level}} -mneeded -pthread" in detail
    assert "add: C ${x0} + ${x1}" in detail and "openmp_threshold: int = 262144" in detail


def externals_source(case: str) -> str:
    from test_gen_fused import source_of

    return source_of(case)[0]
