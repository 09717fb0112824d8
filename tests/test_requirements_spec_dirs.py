"""A library's ``dirs`` in a backend spec (``requires:``): relative to the spec file, or
through ``${ENV}`` variables, with a stand-in vendor library built by the test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import random_array

import byoc
from byoc.api import load_backend, parse
from byoc.runtime import load
from byoc.spec.requirements import library_file

pytest.importorskip("scipy_openblas32", reason="these tests use byoc-codegen[blas]")


# ------------------------------------------- dirs relative to the spec file, and ${ENV}

STANDIN_H = (
    "#include <stdint.h>\nvoid NAME_exp(const float* x, float* out, int64_t n);\nextern int64_t NAME_calls;\n"
)
STANDIN_C = """\
#include <math.h>
#include "NAME.h"
int64_t NAME_calls = 0;
void NAME_exp(const float* x, float* out, int64_t n) {
  ++NAME_calls;
  for (int64_t k = 0; k < n; ++k) out[k] = expf(x[k]);
}
"""
STANDIN_SPEC = """\
version: 1
name: NAME
kind: c_source
description: exp through a vendor SDK's library (a stand-in built by the test).
dtypes: [float32]
ranks: [1, 2, 3, 4]
requires:
  sdk:
    headers: [NAME.h]
    libraries: [NAME]
    install: build the stand-in SDK into sdk/
    from: {dirs: {include: [INCLUDE], lib: [LIB]}}
compile: {compiler: cc, language: c, std: c99, flags: [-O2, -Wall, -Wextra, -Werror]}
prelude: |
  #include <stdint.h>
  #include <NAME.h>
macros:
  STANDIN_EXP:
    inputs: 1
    params: {p_ID_: "${symbol}", p_N_: "${size}"}
    body: |
      static void p_ID_(const float* x, float* out) { NAME_exp(x, out, p_N_); }
ops:
  exp: {macros: {default: STANDIN_EXP}}
"""
STANDIN_LINE = 12
"""The line of ``from:`` in STANDIN_SPEC."""


def standin_sdk(root: Path, name: str) -> Path:
    """``root/sdk``: include/NAME.h and lib/libNAME.so, a stand-in vendor library that
    counts its calls, ``name`` for NAME (one name per test: a process reuses a loaded
    library of the same file name, and its symbols)."""
    sdk = root / "sdk"
    (sdk / "include").mkdir(parents=True)
    (sdk / "lib").mkdir()
    (sdk / "include" / f"{name}.h").write_text(STANDIN_H.replace("NAME", name))
    (sdk / f"{name}.c").write_text(STANDIN_C.replace("NAME", name))
    out = subprocess.run(
        [
            "cc",
            "-shared",
            "-fPIC",
            "-O2",
            f"-I{sdk / 'include'}",
            "-o",
            str(sdk / "lib" / library_file(name)),
            str(sdk / f"{name}.c"),
            "-lm",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return sdk


def standin_spec(directory: Path, name: str, include: str, lib: str) -> Path:
    directory.mkdir(parents=True)
    path = directory / f"{name}.yaml"
    path.write_text(
        STANDIN_SPEC.replace("NAME", name).replace("INCLUDE", f'"{include}"').replace("LIB", f'"{lib}"')
    )
    return path


def run_standin(spec_dir: Path, name: str, sdk: Path, tmp_path: Path, rng) -> None:
    """A graph whose kernel calls the stand-in library, built on the backend ``name``
    of ``spec_dir``, matches numpy, through the library; and again from its bundle."""
    import ctypes

    graph = f"graph main(x: float32[4, 6]) {{\n  y = @{name} {{ return exp(x) }}\n  return y\n}}\n"
    model = byoc.build(parse(graph, "graph", spec_path=[str(spec_dir)]), spec_path=[str(spec_dir)])
    (entry,) = model.manifest.modules
    (req,) = entry.requires
    assert req.where["dirs"] == {"include": (str(sdk / "include"),), "lib": (str(sdk / "lib"),)}
    calls = ctypes.c_int64.in_dll(ctypes.CDLL(str(sdk / "lib" / library_file(name))), f"{name}_calls")
    x = random_array(rng, (4, 6), "float32")
    before = calls.value
    (got,) = model(x=x)
    assert calls.value == before + 1  # the kernel called the library
    np.testing.assert_allclose(got, np.exp(x.astype(np.float64)), rtol=1e-6)
    path = tmp_path / f"{name}.byoc"
    model.save(path)
    (again,) = load(path)(x=x)
    assert calls.value == before + 2
    np.testing.assert_array_equal(again, got)


def test_dirs_relative_to_the_spec_file(tmp_path, rng, monkeypatch):
    """sdk/spec/backends/standin.yaml names ../../include and ../../lib: the SDK's own
    directories, wherever the SDK is and whatever the working directory."""
    sdk = standin_sdk(tmp_path, "standin")
    backends = sdk / "spec" / "backends"
    standin_spec(backends, "standin", "../../include", "../../lib")
    monkeypatch.chdir(sdk / "include")  # not the spec's directory: the spec file's decides
    run_standin(backends, "standin", sdk, tmp_path, rng)


def test_dirs_from_an_environment_variable(tmp_path, rng, monkeypatch):
    sdk = standin_sdk(tmp_path, "standin_env")
    specs = tmp_path / "specs"
    standin_spec(specs, "standin_env", "${STANDIN_SDK}/include", "${STANDIN_SDK}/lib")
    monkeypatch.setenv("STANDIN_SDK", str(sdk))
    run_standin(specs, "standin_env", sdk, tmp_path, rng)


def test_an_environment_variable_relative_to_the_spec_file(tmp_path, monkeypatch):
    """A variable that holds a relative path is taken from the spec file's directory
    too, as any relative entry is."""
    spec = standin_spec(tmp_path / "specs", "standin_rel", "${STANDIN_UP}/include", "${STANDIN_UP}/lib")
    monkeypatch.setenv("STANDIN_UP", "../sdk")
    (req,) = load_backend("standin_rel", spec_path=[str(spec.parent)]).requires.values()
    assert req.where["dirs"] == {
        "include": (str(tmp_path / "sdk" / "include"),),
        "lib": (str(tmp_path / "sdk" / "lib"),),
    }


@pytest.mark.parametrize(
    ("entry", "message", "hint"),
    [
        (
            "${STANDIN_UNSET_SDK}/lib",
            "names the environment variable STANDIN_UNSET_SDK, which is not set",
            "set STANDIN_UNSET_SDK",
        ),
        ("${STANDIN_UNSET_SDK/lib", "is not a reference to an environment variable", "${NAME}"),
        ("${}/lib", "is not a reference to an environment variable", "${NAME}"),
    ],
)
def test_an_unset_or_malformed_variable_is_a_located_error(tmp_path, monkeypatch, entry, message, hint):
    from byoc.errors import SpecError

    monkeypatch.delenv("STANDIN_UNSET_SDK", raising=False)
    spec = standin_spec(tmp_path / "specs", "standin_unset", "/usr/include", entry)
    with pytest.raises(SpecError) as info:
        load_backend("standin_unset", spec_path=[str(spec.parent)])
    error = info.value
    assert message in error.message and hint in error.hint
    line = spec.read_text().splitlines()[STANDIN_LINE - 1]
    assert (error.location.file, error.location.line) == (str(spec), STANDIN_LINE)
    assert error.location.column == line.index(f'"{entry}"') + 1
