"""A c_source spec's support code (``support:``, spec/support.py): C files beside the
spec, in the spec's own folder, that each module includes (headers) or links (sources
compiled once per spec into a cached object). A backend "npu" whose kernels call its
support C runs like the reference; two graphs share one support object; an edit of the
C is seen; `byoc gen` writes the files; bad lists and bad C get located errors."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

import byoc
from byoc.api import load_backend
from byoc.errors import BuildError, SpecError
from byoc.runtime.build import support_objects

SPEC = """\
version: 1
name: npu
kind: c_source
dtypes: [float32]
ranks: [1, 2, 3, 4]
compile: {compiler: cc, language: c, std: c99, flags: [-O1, -Wall, -Wextra, -Werror]}
support: [npu_support.h, npu_support.c]
macros:
  NPU_SCALE:
    inputs: 1
    params: {p_ID_: "${symbol}", p_N_: "${size}", p_K_: "${k}"}
    body: |
      static void p_ID_(const float* a, float* out) { npu_scale(a, out, p_N_, p_K_); }
ops:
  relu: {macros: {default: NPU_SCALE}, vars: {k: "0.0f"}}
  negative: {macros: {default: NPU_SCALE}, vars: {k: "-1.0f"}}
"""

HEADER = """\
#ifndef NPU_SUPPORT_H
#define NPU_SUPPORT_H
#include <stdint.h>
/* out = a * k where a > 0, else a * (k < 0 ? k : 0): relu at k = 0, negative at -1. */
__attribute__((visibility("hidden"))) void npu_scale(const float* a, float* out, int64_t n, float k);
#endif
"""

SOURCE = """\
#include "npu_support.h"

static float npu_one(float x, float k) { return x > 0 ? (k == 0.0f ? x : x * k) : (k < 0 ? x * k : 0.0f); }

void npu_scale(const float* a, float* out, int64_t n, float k) {
  for (int64_t i = 0; i < n; ++i) out[i] = npu_one(a[i], k);
}
"""

RELU = "graph main(x: float32[4, 8]) {\n  y = @npu { return relu(x) }\n  return y\n}\n"
NEGATIVE = "graph main(x: float32[2, 3, 5]) {\n  y = @npu { return negative(x) }\n  return y\n}\n"


def npu_folder(root: Path, spec: str = SPEC, header: str = HEADER, source: str = SOURCE) -> Path:
    folder = root / "npu"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "npu.yaml").write_text(spec)
    (folder / "npu_support.h").write_text(header)
    (folder / "npu_support.c").write_text(source)
    return root


def run(graph: str, specs: Path, rng: np.random.Generator) -> None:
    program = byoc.parse(graph, "graph")
    model = byoc.build(program, spec_path=[str(specs)])
    shape = program.functions[0].params[0].type.shape
    x = rng.standard_normal(shape).astype(np.float32)
    (got,) = model.run(x=x)
    np.testing.assert_array_equal(got, byoc.evaluate(program.functions[0], {"x": x})[0])


def test_kernels_calling_the_support_code_match_the_reference(tmp_path, rng, private_cache):
    specs = npu_folder(tmp_path / "specs")
    spec = load_backend("npu", [str(specs)])
    assert spec.display_path == "npu/npu.yaml (from --spec-path)"
    assert [(f.name, f.is_header) for f in spec.support] == [
        ("npu_support.h", True),
        ("npu_support.c", False),
    ]
    run(RELU, specs, rng)
    run(NEGATIVE, specs, rng)


def test_two_graphs_share_one_support_object_and_an_edit_makes_another(tmp_path, rng, private_cache):
    specs = npu_folder(tmp_path / "specs")
    run(RELU, specs, rng)
    objects = sorted(private_cache.rglob("npu_support.o"))
    assert len(objects) == 1
    run(NEGATIVE, specs, rng)  # another module, the same support object
    assert sorted(private_cache.rglob("npu_support.o")) == objects
    assert len(list(private_cache.rglob("libnpu.so"))) == 2
    spec = load_backend("npu", [str(specs)])
    assert support_objects(spec, spec.template_values()) == [str(objects[0])]
    # an edit of the support source (a later modification time) loads the spec again
    source = specs / "npu" / "npu_support.c"
    source.write_text(SOURCE.replace("return x > 0 ?", "return (x > 0) ?"))
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    run(RELU, specs, rng)
    assert len(list(private_cache.rglob("npu_support.o"))) == 2


def test_gen_writes_the_support_files_beside_the_module(tmp_path, capsys):
    specs = npu_folder(tmp_path / "specs")
    graph = tmp_path / "relu.graph"
    graph.write_text(RELU)
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "gen", graph, "--spec-path", specs, "-o", out)
    assert code == 0, err
    assert (out / "npu_support.h").read_text() == HEADER
    assert (out / "npu_support.c").read_text() == SOURCE
    module = (out / "npu.c").read_text()
    assert '#include "npu_support.h"\n' in module
    assert "npu_support.c compiled once per spec and linked" in module


def test_an_error_in_the_support_source_is_located_in_that_file(tmp_path, private_cache):
    broken = SOURCE.replace("out[i] = npu_one(a[i], k);", "out[i] = npu_one(a[i], k)")
    specs = npu_folder(tmp_path / "specs", source=broken)
    with pytest.raises(BuildError) as info:
        byoc.build(byoc.parse(RELU, "graph"), spec_path=[str(specs)])
    path = specs / "npu" / "npu_support.c"
    assert info.value.location.file == str(path)
    line = path.read_text().splitlines()[info.value.location.line - 1]
    assert "npu_one(a[i], k)" in line or line.strip() == "}"
    assert not list(private_cache.rglob("npu_support.o"))  # nothing half-built is cached


@pytest.mark.parametrize(
    ("listed", "message", "hint"),
    [
        (
            "[npu_support.h, npu_extra.c]",
            "cannot read support file npu_extra.c",
            "put npu_extra.c beside npu.yaml",
        ),
        ("[npu_support.hpp]", "is neither C nor a header", ".h: a header"),
        ("[support.h]", "does not start with the backend's name, npu_", "rename it npu_support.h"),
        ("[npu_support.h, npu_support.h]", "is listed twice", None),
        ("[../npu_support.h]", "is not a plain file name", "spec file's own folder"),
        ("[7]", "each item is a file name", None),
        ("npu_support.h", "support must be", None),
    ],
)
def test_a_bad_support_list_is_a_located_spec_error(tmp_path, listed, message, hint):
    spec = SPEC.replace("support: [npu_support.h, npu_support.c]", f"support: {listed}")
    specs = npu_folder(tmp_path / "specs", spec=spec)
    with pytest.raises(SpecError) as info:
        load_backend("npu", [str(specs)])
    assert message in info.value.message
    assert info.value.location.file == str(specs / "npu" / "npu.yaml")
    assert info.value.location.line == 7
    if hint is not None:
        assert hint in (info.value.hint or "")


def test_a_support_file_may_not_take_the_name_of_one_of_byocs_own(tmp_path):
    """byoc writes byoc_module.h, byoc_entry.c, ... beside every module: a backend named
    byoc may not list a support file of those names."""
    folder = tmp_path / "specs" / "byoc"
    folder.mkdir(parents=True)
    spec = SPEC.replace("name: npu", "name: byoc").replace("npu_support.h, npu_support.c", "byoc_entry.c")
    (folder / "byoc.yaml").write_text(spec)
    (folder / "byoc_entry.c").write_text(SOURCE)
    with pytest.raises(SpecError, match="has the name of one of byoc's own support files") as info:
        load_backend("byoc", [str(tmp_path / "specs")])
    assert (info.value.location.file, info.value.location.line) == (str(folder / "byoc.yaml"), 7)
    assert "byoc_module, byoc_entry" in info.value.hint


def test_a_support_file_that_is_not_utf8_is_refused_at_its_list_item(tmp_path):
    specs = npu_folder(tmp_path / "specs")
    (specs / "npu" / "npu_support.c").write_bytes(b"int x = 1; /* \xff */\n")
    with pytest.raises(SpecError, match="npu_support.c is not UTF-8") as info:
        load_backend("npu", [str(specs)])
    assert (info.value.location.file, info.value.location.line) == (str(specs / "npu" / "npu.yaml"), 7)


def test_a_kind_without_support_files_refuses_the_key(tmp_path):
    shipped = Path(byoc.spec.SHIPPED_BACKENDS) / "engine"
    specs = tmp_path / "specs"
    shutil.copytree(shipped, specs / "engine")
    with (specs / "engine" / "engine.yaml").open("a") as spec:
        spec.write("support: [engine_support.h]\n")
    with pytest.raises(SpecError, match="support"):
        load_backend("engine", [str(specs)])


def test_a_backend_defined_as_a_file_and_as_a_folder_is_refused(tmp_path):
    specs = npu_folder(tmp_path / "specs")
    shutil.copy(specs / "npu" / "npu.yaml", specs / "npu.yaml")
    with pytest.raises(SpecError, match="backend npu is defined twice") as info:
        load_backend("npu", [str(specs)])
    assert info.value.location.file == str(specs / "npu" / "npu.yaml")


def test_check_compiles_the_support_c_once_and_locates_its_errors(tmp_path, capsys, private_cache):
    specs = npu_folder(tmp_path / "specs")
    spec_file = specs / "npu" / "npu.yaml"
    code, out, err = run_cli(capsys, "check", specs)
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"{spec_file}: ok, its support C (npu_support.c) compiled"]
    objects = list(private_cache.rglob("npu_support.o"))
    assert len(objects) == 1
    code, out, _ = run_cli(capsys, "check", spec_file)  # again: the cached object
    assert code == 0 and list(private_cache.rglob("npu_support.o")) == objects
    source = specs / "npu" / "npu_support.c"
    source.write_text(SOURCE.replace("int64_t i = 0;", "int64_t i = 0"))
    code, out, err = run_cli(capsys, "check", spec_file)
    assert code == 2 and out == ""
    assert f"--> {source}:" in err and "Traceback" not in err
    code, out, err = run_cli(capsys, "check", "--no-compile", spec_file)
    assert (code, out, err) == (0, f"{spec_file}: ok\n", "")


# ------------------------------------------------------------ templates read from files

PRELUDE = "/* the prelude of backend ${backend} */\n#include <stdint.h>\n"


def test_a_template_may_be_read_from_a_file_beside_the_spec(tmp_path, rng, private_cache):
    spec = SPEC.replace(
        "support: [npu_support.h, npu_support.c]",
        "prelude: {file: npu_prelude.h.in}\nsupport: [npu_support.h, npu_support.c]",
    )
    specs = npu_folder(tmp_path / "specs", spec=spec)
    (specs / "npu" / "npu_prelude.h.in").write_text(PRELUDE)
    assert load_backend("npu", [str(specs)]).templates["prelude"] == PRELUDE
    run(RELU, specs, rng)
    graph = tmp_path / "relu.graph"
    graph.write_text(RELU)
    from byoc.cli import main

    assert main(["gen", str(graph), "--spec-path", str(specs), "-o", str(tmp_path / "out")]) == 0
    assert "/* the prelude of backend npu */" in (tmp_path / "out" / "npu.c").read_text()


@pytest.mark.parametrize(
    ("value", "text", "message", "where"),
    [
        (
            "{file: npu_prelude.h.in}",
            "int a;\n  ${nonsense} b;\n",
            "undefined placeholder ${nonsense} in prelude",
            (2, 3),
        ),
        ("{file: npu_prelude.h.in}", "int a; ${unclosed\n", "prelude", (1, 8)),
        ("{file: missing.h.in}", None, "cannot read prelude's file missing.h.in", None),
        ("{file: ../npu_prelude.h.in}", None, "is not a plain file name", None),
        ("{path: npu_prelude.h.in}", None, "a mapping without `file`", None),
    ],
)
def test_a_bad_template_file_is_a_located_error(tmp_path, value, text, message, where):
    spec = SPEC.replace(
        "support: [npu_support.h, npu_support.c]",
        f"prelude: {value}\nsupport: [npu_support.h, npu_support.c]",
    )
    specs = npu_folder(tmp_path / "specs", spec=spec)
    if text is not None:
        (specs / "npu" / "npu_prelude.h.in").write_text(text)
    with pytest.raises(SpecError) as info:
        load_backend("npu", [str(specs)])
    assert message in info.value.message
    if where is None:  # at the spec's key
        assert (info.value.location.file, info.value.location.line) == (str(specs / "npu" / "npu.yaml"), 7)
    else:  # in the template's own file
        loc = info.value.location
        assert (loc.file, loc.line, loc.column) == (str(specs / "npu" / "npu_prelude.h.in"), *where)


def test_editing_a_template_file_is_seen_at_the_next_load(tmp_path):
    spec = SPEC.replace(
        "support: [npu_support.h, npu_support.c]",
        "prelude: {file: npu_prelude.h.in}\nsupport: [npu_support.h, npu_support.c]",
    )
    specs = npu_folder(tmp_path / "specs", spec=spec)
    template = specs / "npu" / "npu_prelude.h.in"
    template.write_text(PRELUDE)
    assert load_backend("npu", [str(specs)]).templates["prelude"] == PRELUDE
    template.write_text("/* edited */\n")
    stat = template.stat()
    os.utime(template, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert load_backend("npu", [str(specs)]).templates["prelude"] == "/* edited */\n"
