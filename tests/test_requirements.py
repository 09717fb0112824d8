"""Libraries declared in backend specs (``requires:``, spec/requirements.py): the four
ways of finding one, the flags they give, the build cache key, bundles that record
them, a library backend added by YAML alone, and no library named in byoc's Python."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, random_array

import byoc
from byoc.api import evaluate, load_backend, parse
from byoc.runtime import load
from byoc.runtime.build import build_artifacts
from byoc.spec.requirements import NotFound, library_file, requirements_from_record
from byoc.spec.yaml_doc import YamlDoc

openblas = pytest.importorskip("scipy_openblas32", reason="these tests use byoc-codegen[blas]")

REPO = Path(__file__).resolve().parent.parent
BLAS_INCLUDE = os.path.realpath(openblas.get_include_dir())
BLAS_LIB = os.path.realpath(openblas.get_lib_dir())
BLAS_FILE = os.path.join(BLAS_LIB, library_file(openblas.get_library()))
MLP = EXAMPLES / "mlp.graph"


def requirement(body: str):
    """The one requirement of a ``requires:`` YAML text."""
    doc = YamlDoc("req.yaml", "requires:\n" + textwrap.indent(textwrap.dedent(body), "  "))
    from byoc.spec.requirements import load_requirements

    (req,) = load_requirements(doc, doc.root).values()
    return req


BLAS_BODY = """\
blas:
  headers: [cblas.h]
  libraries: [scipy_openblas]
  install: pip install scipy-openblas32
  from: {FROM}
"""


def blas(where: str):
    return requirement(BLAS_BODY.replace("{FROM}", where))


# ------------------------------------------------------------------ finding libraries


def test_the_cblas_spec_requires_openblas_from_its_python_module():
    (req,) = load_backend("cblas").requires.values()
    assert (req.name, req.headers, req.libraries, req.finder) == (
        "openblas",
        ("cblas.h",),
        ("scipy_openblas",),
        "python_module",
    )
    assert "byoc-codegen[blas]" in req.install
    linkage = req.locate()
    assert [os.path.realpath(d) for d in linkage.include_dirs] == [BLAS_INCLUDE]
    assert [os.path.realpath(d) for d in linkage.lib_dirs] == [BLAS_LIB]
    assert [os.path.realpath(f) for f in linkage.files] == [os.path.realpath(BLAS_FILE)]
    lib = linkage.lib_dirs[0]
    assert linkage.compile_flags == (f"-I{linkage.include_dirs[0]}",)
    assert linkage.link_flags == (f"-L{lib}", f"-Wl,-rpath,{lib}", "-lscipy_openblas")


def test_distribution_files_find_what_the_module_reports():
    linkage = blas("{python_distributions: [scipy-openblas32]}").locate()
    assert [os.path.realpath(d) for d in linkage.include_dirs] == [BLAS_INCLUDE]
    assert [os.path.realpath(d) for d in linkage.lib_dirs] == [BLAS_LIB]


def test_distribution_files_find_onednn_in_the_environments_data_dirs():
    """oneDNN's wheels (byoc-codegen[dnnl], in the test extra) put libdnnl.so and the headers
    outside site-packages, in the environment's lib/ and include/."""
    req = requirement(
        """\
        dnnl:
          headers: [oneapi/dnnl/dnnl.h]
          libraries: [dnnl]
          install: pip install 'byoc-codegen[dnnl]'
          from: {python_distributions: [onednn-devel-cpu-gomp, onednn-cpu-gomp]}
        """
    )
    linkage = req.locate()
    (include,) = linkage.include_dirs
    assert os.path.isfile(os.path.join(include, "oneapi", "dnnl", "dnnl.h"))
    (lib,) = linkage.files
    assert os.path.basename(lib) == library_file("dnnl") and os.path.isfile(lib)
    assert "site-packages" not in include


def test_pkg_config_gives_the_directories(tmp_path, monkeypatch):
    if not any(os.access(os.path.join(d, "pkg-config"), os.X_OK) for d in os.environ["PATH"].split(":")):
        pytest.skip("no pkg-config")
    (tmp_path / "myblas.pc").write_text(
        f"Name: myblas\nDescription: test\nVersion: 1\nCflags: -I{BLAS_INCLUDE}\nLibs: -L{BLAS_LIB} -lscipy_openblas\n"
    )
    monkeypatch.setenv("PKG_CONFIG_PATH", str(tmp_path))
    linkage = blas("{pkg_config: myblas}").locate()
    assert linkage.include_dirs == (BLAS_INCLUDE,) and linkage.lib_dirs == (BLAS_LIB,)
    with pytest.raises(NotFound, match="pkg-config knows no package nosuchblas"):
        blas("{pkg_config: nosuchblas}").locate()


def test_dirs_given_in_the_spec():
    linkage = blas(f"{{dirs: {{include: [{BLAS_INCLUDE}], lib: [{BLAS_LIB}]}}}}").locate()
    assert linkage.include_dirs == (BLAS_INCLUDE,) and linkage.lib_dirs == (BLAS_LIB,)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("{python_module: no_such_module_xyz}", "cannot import the Python module no_such_module_xyz"),
        (
            "{python_distributions: [no-such-dist-xyz]}",
            "the Python distribution no-such-dist-xyz is not installed",
        ),
        ("{dirs: {include: [/nonexistent/include]}}", "header cblas.h is in none of /nonexistent/include"),
        (
            "{python_module: scipy_openblas32, include_dir: get_include_dir, lib_dir: no_such_function}",
            "scipy_openblas32.no_such_function does not give a directory",
        ),
    ],
)
def test_a_missing_library_says_what_is_missing(where, message):
    with pytest.raises(NotFound, match=re.escape(message)):
        blas(where).locate()


def test_a_requirement_survives_its_bundle_record():
    (req,) = load_backend("cblas").requires.values()
    record = json.loads(json.dumps({req.name: req.record()}))
    assert requirements_from_record(record, "manifest.json") == (req,)


# ---------------------------------------------------------------- building and bundles


def test_library_flags_are_part_of_the_cache_key(tmp_path):
    spec = load_backend("ccompiler")
    source = {"m.c": "int byoc_answer(void) { return 42; }\n"}
    values = spec.template_values()
    plain = build_artifacts(source, "m.c", spec.compile, values, cache=tmp_path)
    linked = build_artifacts(
        source,
        "m.c",
        spec.compile,
        values,
        link_flags=["-lm"],
        include_flags=["-I/usr/include"],
        cache=tmp_path,
    )
    assert plain != linked
    assert build_artifacts(source, "m.c", spec.compile, values, link_flags=["-lm"], cache=tmp_path) not in (
        plain,
        linked,
    )


def test_the_library_loads_without_ld_library_path(tmp_path):
    """The built library's rpath names OpenBLAS's directory: dlopen in a fresh process,
    without LD_LIBRARY_PATH and without byoc, resolves scipy_cblas_sgemm."""
    model = byoc.build(MLP, backends=["cblas"])
    (entry,) = model.manifest.modules
    lib = tmp_path / "lib.so"
    lib.write_bytes(model.members[entry.file])
    code = f"import ctypes; ctypes.CDLL({str(lib)!r}); print('loaded')"
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "loaded", out.stderr
    readelf = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True)
    if readelf.returncode == 0:
        assert "libscipy_openblas.so" in readelf.stdout and BLAS_LIB in readelf.stdout


def test_a_bundle_records_and_locates_its_libraries(tmp_path, rng):
    model = byoc.build(MLP, backends=["cblas"])
    path = tmp_path / "mlp.byoc"
    model.save(path)
    (entry,) = load(path).manifest.modules
    assert [r.name for r in entry.requires] == ["openblas"]
    fn = parse(MLP.read_text(), "graph").functions[0]
    inputs = {p.name: random_array(rng, p.type.shape, p.type.dtype) for p in fn.params}
    (got,) = load(path)(**inputs)
    (want,) = evaluate(fn, inputs)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


# ----------------------------------------------------------- a library backend by YAML


MYBLAS = """\
version: 1
name: myblas
kind: c_source
description: dense then relu in one kernel, through CBLAS.
dtypes: [float32]
ranks: [2]
requires:
  blas:
    headers: [cblas.h]
    libraries: [scipy_openblas]
    install: pip install scipy-openblas32
    from: {python_distributions: [scipy-openblas32]}
compile: {compiler: cc, language: c, std: c99, flags: [-O2, -Wall, -Wextra, -Werror]}
prelude: |
  #include <stdint.h>
  #include <cblas.h>
macros:
  MYBLAS_DENSE_RELU:
    inputs: 2
    params: {p_ID_: "${symbol}", p_B_: "${in0_dim0}", p_K_: "${in0_dim1}", p_U_: "${in1_dim0}"}
    body: |
      static void p_ID_(const float* x, const float* w, float* out) {
        scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p_B_, p_U_, p_K_, 1, x, p_K_, w, p_K_, 0, out, p_U_);
        for (int64_t k = 0; k < (int64_t)p_B_ * p_U_; ++k) out[k] = out[k] > 0 ? out[k] : 0;
      }
ops:
  dense: {macros: {2: MYBLAS_DENSE_RELU}}
"""

DENSE_RELU = """\
graph main(x: float32[6, 9], w: float32[5, 9]) {
  y = @myblas {
    return dense(x, w)
  }
  return y
}
"""


def test_a_third_library_backend_is_yaml_only(tmp_path, rng):
    (tmp_path / "myblas.yaml").write_text(MYBLAS)
    model = byoc.build(parse(DENSE_RELU, "graph", spec_path=[str(tmp_path)]), spec_path=[str(tmp_path)])
    (entry,) = model.manifest.modules
    assert entry.backend == "myblas" and [r.name for r in entry.requires] == ["blas"]
    x = random_array(rng, (6, 9), "float32")
    w = random_array(rng, (5, 9), "float32")
    (got,) = model(x=x, w=w)
    reference = parse("graph main(x: float32[6, 9], w: float32[5, 9]) { return relu(dense(x, w)) }", "graph")
    (want,) = evaluate(reference.functions[0], {"x": x, "w": w})
    assert (got == 0).any() and (got > 0).any()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


# ---------------------------------------------------------------- no library in Python

LIBRARY_WORDS = re.compile(r"dnnl|cblas|openblas", re.IGNORECASE)


def test_no_python_outside_tests_names_a_library():
    """Libraries are data: spec YAML and C templates, never byoc's Python."""
    offenders = []
    for path in sorted(REPO.rglob("*.py")):
        rel = path.relative_to(REPO)
        if rel.parts[0] in ("tests", "benchmarks") or rel.parts[0].startswith("."):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if LIBRARY_WORDS.search(line):
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert offenders == []
