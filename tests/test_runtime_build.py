"""byoc.runtime.build: compiling generated C/C++ into cached shared libraries.

Compiler invocations are observed through a wrapper script set as $CC / $CXX that
logs its arguments and runs the real compiler. Every test builds into its own
temporary $BYOC_CACHE_DIR.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, GUIDE_WHOLE_GRAPH

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.errors import BuildError
from byoc.generator.pipeline import generate
from byoc.runtime.build import build_artifacts, build_library, cache_dir, support_objects
from byoc.runtime.interface import Signature, call
from byoc.runtime.module import LibraryModule
from byoc.runtime.toolchain import toolchain

GEN = DATA / "gen"
REAL = {"c": shutil.which("cc") or shutil.which("gcc"), "c++": shutil.which("c++") or shutil.which("g++")}
pytestmark = pytest.mark.skipif(not all(REAL.values()), reason="needs a C and a C++ compiler")


# ------------------------------------------------------------------ helpers


def program_for(backend: str, name: str = "whole_graph"):
    text = (GEN / f"{name}.graph").read_text().replace("@BACKEND", f"@{backend}")
    return parse(text, "graph", file=f"tests/data/gen/{name}.graph")


def module_sources(program, backend: str, loader=load_backend) -> tuple[dict[str, str], str, tuple]:
    """(sources, main, external functions) of ``backend``'s module in ``program``: the
    module and its headers (its support sources are :func:`support_sources`)."""
    generated = generate(program, load_catalog(), loader)
    lowered, artifacts = generated.lowered, generated.artifacts
    mine = [a for a in artifacts if a.backend == backend and a.role != "support"]
    main = next(a.name for a in mine if a.role == "module")
    return {a.name: a.content for a in mine}, main, lowered.externals_for(backend)


def support_sources(program, backend: str, loader=load_backend) -> dict[str, str]:
    """The support files of ``backend``'s module in ``program`` (byoc's byoc_entry.c, ...)
    with the headers beside them, as ``byoc.building.compile_modules`` passes them."""
    artifacts = generate(program, load_catalog(), loader).artifacts
    return {a.name: a.text for a in artifacts if a.backend == backend and a.role in ("support", "header")}


def build(program, backend: str, loader=load_backend) -> tuple[Path, tuple]:
    """The library of ``backend``'s module in ``program``, linking its support objects."""
    sources, main, functions = module_sources(program, backend, loader)
    spec = loader(backend)
    values = spec.template_values()
    objects = support_objects(spec, values, files=support_sources(program, backend, loader))
    return build_artifacts(sources, main, spec.compile, values, link_flags=objects), functions


def wrapper(tmp_path: Path, language: str = "c") -> tuple[Path, Path]:
    """A compiler wrapper that appends its arguments to a log, then runs the real one."""
    log = tmp_path / f"{language}.log"
    script = tmp_path / f"logging-{'cxx' if language == 'c++' else 'cc'}"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{REAL[language]}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, log


def compilations(log: Path) -> list[str]:
    """The logged compiler runs that compiled something (not ``--version``)."""
    if not log.exists():
        return []
    return [line for line in log.read_text().splitlines() if "-shared" in line]


def entries(root: Path) -> list[Path]:
    """Every cache entry directory under ``root`` (``<root>/<xx>/<key>``) that holds a
    library (not a support object)."""
    return sorted(p for p in root.glob("??/*") if p.is_dir() and list(p.glob("lib*.so")))


def assert_cache_clean(root: Path, count: int) -> None:
    """``count`` library entries; every entry (a library's, a support object's) holds one
    built file matching its sha256; no leftovers."""
    assert len(entries(root)) == count, entries(root)
    for entry in (p for p in root.glob("??/*") if p.is_dir()):
        built = [*entry.glob("lib*.so"), *entry.glob("*.o")]
        assert len(built) == 1, list(entry.iterdir())
        recorded = (entry / f"{built[0].name}.sha256").read_text().strip()
        assert hashlib.sha256(built[0].read_bytes()).hexdigest() == recorded
    assert not list((root / "tmp").iterdir()) if (root / "tmp").exists() else True


def check_module(lib: Path, functions, rng) -> None:
    """Every function of the library matches the reference evaluation of its callee."""
    module = LibraryModule(
        lib, {f.name: Signature(tuple(p.type for p in f.params), f.output_types) for f in functions}
    )
    for fn in functions:
        inputs = {p.name: rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in fn.params}
        got = call(module, fn.name, *inputs.values())
        for g, want in zip(got, evaluate(fn, inputs), strict=True):
            np.testing.assert_allclose(g, want, rtol=1e-6)


@pytest.fixture(autouse=True)
def default_toolchain(private_cache, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here starts from an empty cache and the specs' own compilers and flags."""
    for var in ("CC", "CXX", "CFLAGS", "CXXFLAGS"):
        monkeypatch.delenv(var, raising=False)


# ------------------------------------------------------------------ building


@pytest.mark.parametrize("backend", ["ccompiler", "engine"])
def test_builds_guide_whole_graph(backend, private_cache, rng):
    lib, functions = build(program_for(backend), backend)
    assert lib.is_relative_to(private_cache) and lib.name == f"lib{backend}.so"
    assert len(functions) == 2
    check_module(lib, functions, rng)
    assert_cache_clean(private_cache, 1)
    assert sorted(p.name for p in (lib.parent / "src").iterdir()) == sorted(
        module_sources(program_for(backend), backend)[0]
    )


def test_builds_the_example_file(rng):
    program = parse(GUIDE_WHOLE_GRAPH.read_text(), "graph")
    lib, functions = build(program, "ccompiler")
    check_module(lib, functions, rng)


def test_cache_dir_precedence(tmp_path):
    assert cache_dir({"BYOC_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert cache_dir({"XDG_CACHE_HOME": "/xdg"}) == Path("/xdg/byoc")
    assert cache_dir({"BYOC_CACHE_DIR": "", "XDG_CACHE_HOME": "/xdg"}) == Path("/xdg/byoc")
    assert cache_dir({}) == Path(os.path.expanduser("~")) / ".cache" / "byoc"


def test_toolchain_environment():
    chain = toolchain(
        "c", "cc", "c99", ["-O2"], {"CC": "ccache gcc", "CFLAGS": "-O0 -DX=1", "CXXFLAGS": "-DY"}
    )
    assert chain.compiler == ("ccache", "gcc")
    assert chain.flags == ("-std=c99", "-O2", "-O0", "-DX=1")  # $CFLAGS last, so it wins
    cxx = toolchain("c++", "c++", "c++17", [], {"CC": "gcc", "CXX": "clang++", "CXXFLAGS": "-DY"})
    assert (cxx.compiler, cxx.flags, cxx.language) == (("clang++",), ("-std=c++17", "-DY"), "c++")
    assert toolchain("c", "cc", None, [], {}).compiler == ("cc",)
    assert (chain.env_var, cxx.env_var) == ("CC", "CXX")  # as the spec's languages declare them
    with pytest.raises(BuildError, match="'json' is not a compiled language"):
        toolchain("json", "cc", None, [], {})


# ------------------------------------------------------------------ cache


@pytest.mark.parametrize("backend,language", [("ccompiler", "c"), ("engine", "c++")])
def test_second_build_hits_the_cache(backend, language, tmp_path, monkeypatch):
    script, log = wrapper(tmp_path, language)
    monkeypatch.setenv("CXX" if language == "c++" else "CC", str(script))
    first, _ = build(program_for(backend), backend)
    assert len(compilations(log)) == 1  # $CC / $CXX is the compiler used
    second, _ = build(program_for(backend), backend)
    assert second == first
    assert len(compilations(log)) == 1, "the second build ran the compiler"


def test_cflags_are_honoured_and_part_of_the_key(tmp_path, monkeypatch, private_cache, rng):
    script, log = wrapper(tmp_path)
    monkeypatch.setenv("CC", str(script))
    monkeypatch.setenv("CFLAGS", "-DBYOC_TEST_MARK=42 -O1")
    lib, functions = build(program_for("ccompiler"), "ccompiler")
    (line,) = compilations(log)
    assert "-DBYOC_TEST_MARK=42" in line.split()
    assert line.split().index("-O1") > line.split().index("-O2")  # after the spec's flags
    check_module(lib, functions, rng)
    monkeypatch.setenv("CFLAGS", "-DBYOC_TEST_MARK=43")
    other, _ = build(program_for("ccompiler"), "ccompiler")
    assert other != lib and len(compilations(log)) == 2
    assert_cache_clean(private_cache, 2)


def test_options_change_the_flags(tmp_path, monkeypatch):
    script, log = wrapper(tmp_path)
    monkeypatch.setenv("CC", str(script))
    sources, main, _ = module_sources(program_for("ccompiler"), "ccompiler")
    spec = load_backend("ccompiler")
    values = spec.template_values(spec.option_values({"opt_level": "0", "fast_math": "true"}))
    objects = support_objects(spec, values, files=support_sources(program_for("ccompiler"), "ccompiler"))
    build_artifacts(sources, main, spec.compile, values, link_flags=objects)
    (line,) = compilations(log)
    assert (
        "-O0" in line.split() and "-fassociative-math" in line.split() and "-ffast-math" not in line.split()
    )


def test_corrupted_entry_is_rebuilt(tmp_path, monkeypatch, private_cache, rng):
    script, log = wrapper(tmp_path)
    monkeypatch.setenv("CC", str(script))
    lib, functions = build(program_for("ccompiler"), "ccompiler")
    good = lib.read_bytes()
    lib.write_bytes(b"\x7fELF" + b"\0" * 100)  # never loaded before: safe to overwrite
    again, _ = build(program_for("ccompiler"), "ccompiler")
    assert again == lib and len(compilations(log)) == 2
    assert again.read_bytes() == good
    assert_cache_clean(private_cache, 1)
    check_module(again, functions, rng)


def test_missing_checksum_is_rebuilt(tmp_path, monkeypatch, private_cache):
    script, log = wrapper(tmp_path)
    monkeypatch.setenv("CC", str(script))
    lib, _ = build(program_for("ccompiler"), "ccompiler")
    (lib.parent / f"{lib.name}.sha256").unlink()
    build(program_for("ccompiler"), "ccompiler")
    assert len(compilations(log)) == 2
    assert_cache_clean(private_cache, 1)


CHILD = """
import sys
from pathlib import Path
import numpy as np
from byoc.ir import TensorType
from byoc.runtime.build import build_library
from byoc.runtime.toolchain import toolchain
from byoc.runtime.interface import Signature, call
from byoc.runtime.module import LibraryModule

source, support, symbol, inputs, output = sys.argv[1:]
text = open(source).read()
files = {p.name: p.read_text() for p in Path(support).iterdir()}
plain = toolchain("c", "cc", "c99", ["-O2", "-Wall"])
objects = [str(build_library(files, n, plain, object_file=True)) for n in files if n.endswith(".c")]
chain = toolchain("c", "cc", "c99", ["-O2", "-Wall"], link=objects)
lib = build_library({**files, "ccompiler.c": text}, "ccompiler.c", chain)
arrays = list(np.load(inputs).values())
t = TensorType((10, 10), "float32")
module = LibraryModule(lib, {symbol: Signature((t,) * len(arrays), (t,))})
np.save(output, call(module, symbol, *arrays)[0])
print(lib)
"""


def test_eight_processes_build_the_same_source(tmp_path, private_cache, rng):
    sources, main, functions = module_sources(program_for("ccompiler", "guide_subgraph"), "ccompiler")
    (fn,) = functions
    source = tmp_path / "ccompiler.c"
    source.write_text(sources[main])
    (tmp_path / "support").mkdir()
    for name, text in support_sources(program_for("ccompiler", "guide_subgraph"), "ccompiler").items():
        (tmp_path / "support" / name).write_text(text)
    inputs = {p.name: rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in fn.params}
    np.savez(tmp_path / "inputs.npz", **inputs)
    (want,) = evaluate(fn, inputs)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD,
                str(source),
                str(tmp_path / "support"),
                fn.name,
                str(tmp_path / "inputs.npz"),
                str(tmp_path / f"out{k}.npy"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(8)
    ]
    libs = set()
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        libs.add(out.strip())
    assert len(libs) == 1
    for k in range(8):
        np.testing.assert_allclose(np.load(tmp_path / f"out{k}.npy"), want, rtol=1e-6)
    assert_cache_clean(private_cache, 1)


# ------------------------------------------------------------------ errors


def test_c_error_in_a_spec_macro_shows_message_and_source(tmp_path, private_cache):
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    text = _shipped("ccompiler").read_text()
    broken = "out[k] = a[k] p_OP_ b[k]\n"
    assert text.count("out[k] = a[k] p_OP_ b[k];\n") == 2
    (spec_dir / "ccompiler.yaml").write_text(text.replace("out[k] = a[k] p_OP_ b[k];\n", broken))

    def loader(name: str):
        return load_backend(name, spec_path=[spec_dir])

    with pytest.raises(BuildError) as info:
        build(program_for("ccompiler"), "ccompiler", loader)
    err = info.value
    assert "failed on the generated ccompiler.c" in err.message
    assert "ccompiler.c:" in err.message and "error" in err.message  # the compiler's own words
    assert "generated ccompiler.c, around line" in err.message
    marked = [line for line in err.message.splitlines() if line.startswith(">")]
    assert len(marked) == 1 and "CSOURCE_BINARY_OP_2D" in err.message
    assert str(private_cache) not in err.message  # staging paths are stripped
    assert "byoc gen" in (err.hint or "")
    assert "build error" in err.render()
    assert entries(private_cache) == []
    assert not list((private_cache / "tmp").iterdir())


def _shipped(name: str) -> Path:
    import byoc.spec

    return Path(byoc.spec.__file__).parent / "backends" / f"{name}.yaml"


def test_error_in_a_header_shows_the_header_lines(private_cache):
    sources = {
        "main.cc": '#include "engine.h"\nint f() { return g(); }\n',
        "engine.h": "// line 1\n// line 2\ninline int g() { return undeclared_name; }\n// line 4\n",
    }
    with pytest.raises(BuildError) as info:
        build_library(sources, "main.cc", toolchain("c++", "c++", "c++17", []))
    message = info.value.message
    assert "undeclared_name" in message
    assert "generated engine.h, around line 3:" in message
    assert ">    3 | inline int g() { return undeclared_name; }" in message
    assert entries(private_cache) == []


@pytest.mark.parametrize("backend,var", [("ccompiler", "CC"), ("engine", "CXX")])
def test_missing_compiler(backend, var, monkeypatch, private_cache):
    monkeypatch.setenv(var, "/nonexistent/cc")
    with pytest.raises(BuildError) as info:
        build(program_for(backend), backend)
    err = info.value
    assert "/nonexistent/cc" in err.message and "not found" in err.message
    assert "apt-get install build-essential" in err.hint and f"${var}" in err.hint
    assert not private_cache.exists() or entries(private_cache) == []


def test_unusable_cache_dir(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("BYOC_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(BuildError) as info:
        build(program_for("ccompiler", "guide_subgraph"), "ccompiler")
    assert "BYOC_CACHE_DIR" in info.value.hint


def test_bad_requests():
    chain = toolchain("c", "cc", "c99", [])
    with pytest.raises(BuildError, match="no source"):
        build_library({"a.c": ""}, "b.c", chain)
    with pytest.raises(BuildError, match="plain file name"):
        build_library({"../a.c": ""}, "../a.c", chain)
    spec = load_backend("examplejson")
    with pytest.raises(BuildError, match="interpreted"):
        build_artifacts({"x.examplejson": ""}, "x.examplejson", spec.compile, spec.template_values())
    spec = load_backend("ccompiler")
    with pytest.raises(BuildError, match="compile flags"):
        build_artifacts({"a.c": ""}, "a.c", spec.compile, {})
