"""A library's ``dirs`` in a backend spec (``requires:``): relative to the spec file, or
through ``${ENV}`` variables, with a stand-in vendor library built by the test."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import random_array
from standin_support import STANDIN_LINE, standin_sdk, standin_spec

import byoc
from byoc.api import load_backend, parse
from byoc.runtime import load
from byoc.spec.requirements import library_file

pytest.importorskip("scipy_openblas32", reason="these tests use byoc-codegen[blas]")


# ------------------------------------------- dirs relative to the spec file, and ${ENV}


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
