"""Builds for the building CPU (the ``fused`` spec's option ``host_isa``): the x86-64
level byoc finds, the compile flags it fills in, the same results as the portable
clones, and the loader's refusal of a library marked for a level this CPU lacks."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from conftest import random_array

from byoc.api import evaluate, load_backend, parse
from byoc.building import build
from byoc.errors import BuildError, RuntimeFailure
from byoc.runtime import toolchain as runtime_build
from byoc.runtime.cpu import LEVELS, cpu_flags, level_of, x86_64_level
from byoc.runtime.native_load import ISA_HINT, load_now
from byoc.testing.compare import check_close

V2 = LEVELS[2][1]
V3 = V2 | LEVELS[1][1]
V4 = V3 | LEVELS[0][1]


@pytest.mark.parametrize(
    ("flags", "level"),
    [
        (V4, "x86-64-v4"),
        (V3, "x86-64-v3"),
        (V2, "x86-64-v2"),
        (set(), "x86-64"),
        (V4 - {"bmi2"}, "x86-64-v2"),  # AVX-512 without a v3 flag is not v4 (nor v3)
        (V3 - {"popcnt"}, "x86-64"),  # every level below must be whole too
        (V2 | {"avx512f", "avx2"}, "x86-64-v2"),
    ],
)
def test_the_level_is_the_highest_whose_flags_and_those_below_are_all_there(flags, level):
    assert level_of(flags) == level


def test_this_machines_level_is_its_flags_level_and_gcc_knows_it():
    level = x86_64_level()
    if level is None:
        pytest.skip("not an x86-64 Linux machine")
    assert level == level_of(cpu_flags())
    done = subprocess.run(
        ["cc", f"-march={level}", "-x", "c", "-E", "-o", "/dev/null", "-"], input="", capture_output=True
    )
    assert done.returncode == 0, done.stderr


def test_the_build_fills_in_the_level_and_says_what_to_do_without_one(monkeypatch):
    spec = load_backend("fused")
    level = x86_64_level()
    if level is not None:
        chain = runtime_build.spec_toolchain(spec.compile, spec.template_values())
        assert f"-march={level}" in chain.flags and "-mneeded" in chain.flags
    monkeypatch.setattr(runtime_build, "x86_64_level", lambda: None)
    with pytest.raises(BuildError) as caught:
        runtime_build.spec_toolchain(spec.compile, spec.template_values())
    assert "${x86_64_level}" in str(caught.value) and "host_isa=false" in caught.value.hint
    portable = spec.template_values(spec.option_values({"host_isa": "false"}))
    assert not any("march" in f for f in runtime_build.spec_toolchain(spec.compile, portable).flags)


CONV = """graph main(x: float32[1, 8, 12, 12], w: float32[8, 8, 3, 3], b: float32[8]) {
  r = @fused { return tanh(relu(bias_add(conv(x, w, pads=[1, 1, 1, 1]), b))) }
  return r
}
"""


def test_a_build_for_this_cpu_computes_what_the_portable_clones_do(rng):
    program = parse(CONV, "graph", file="conv.graph")
    fn = program.functions[0]
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    (expected,) = evaluate(fn, inputs)
    for floats in ("true", "false"):  # the dot products' float sums (the default), and double sums
        (here,) = build(program, backends=["fused"], options={"float32_dots": floats})(**inputs)
        options = {"host_isa": "false", "float32_dots": floats}
        (portable,) = build(program, backends=["fused"], options=options)(**inputs)
        np.testing.assert_array_equal(here, portable)  # the same operations in the same order
        if floats == "true":
            check_close(here, expected)
        else:
            np.testing.assert_allclose(here, expected, rtol=1e-5, atol=1e-6)


def test_a_library_for_a_higher_level_is_refused_with_a_hint_not_run(tmp_path):
    if x86_64_level() in (None, "x86-64-v4"):
        pytest.skip("needs an x86-64 CPU below x86-64-v4 (this one runs every level)")
    source = tmp_path / "wide.c"
    source.write_text(
        "double wide(const double* a, int n) { double s = 0; for (int i = 0; i < n; ++i) s += a[i]; return s; }\n"
    )
    library = tmp_path / "libwide.so"
    subprocess.run(
        ["cc", "-O3", "-march=x86-64-v4", "-mneeded", "-shared", "-fPIC", str(source), "-o", str(library)],
        check=True,
    )
    with pytest.raises(RuntimeFailure) as caught:
        load_now(library, what="the library of backend fused")
    assert "CPU ISA level is lower than required" in str(caught.value)
    assert caught.value.hint == ISA_HINT


def test_a_compiler_without_the_levels_gets_a_hint_to_turn_host_isa_off(tmp_path, monkeypatch):
    """gcc before 11 knows neither -march=x86-64-v3 nor -mneeded: the error says what to do."""
    if x86_64_level() is None:
        pytest.skip("not an x86-64 Linux machine: the build refuses the flags before compiling")
    old_gcc = tmp_path / "old-gcc"
    old_gcc.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" --version "*) echo "gcc (old) 10.2.1"; exit 0;; esac\n'
        "echo \"gcc: error: unrecognized command-line option '-mneeded'\" >&2\n"
        "exit 1\n"
    )
    old_gcc.chmod(0o755)
    monkeypatch.setenv("CC", str(old_gcc))
    program = parse(CONV, "graph", file="conv.graph")
    with pytest.raises(BuildError) as caught:
        build(program, backends=["fused"])
    assert "-mneeded" in str(caught.value)
    assert "--option host_isa=false" in caught.value.hint
