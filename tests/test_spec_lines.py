"""A compiler error in a spec's C (a macro's body, the prelude) is located at the spec
file's line and column (byoc/spec_lines.py, runtime/build.py), and the generated text
carries no spec line numbers, so moving the spec's lines does not change it."""

from __future__ import annotations

import shutil

import pytest
from conftest import run_cli
from libraries import missing_library
from ruamel.yaml import YAML

import byoc
from byoc.api import load_backend
from byoc.building import offload
from byoc.errors import BuildError
from byoc.generator.pipeline import generate
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS
from byoc.spec_lines import SpecText, prelude_heading, spec_line

GRAPH = "graph main(x: float32[8], y: float32[8]) {\n  return add(x, y)\n}\n"

SPEC = """\
version: 1
name: npu
kind: c_source
dtypes: [float32]
ranks: [1]
compile: {{language: c}}
prelude: |
  #include <math.h>
  static float npu_scale(float v) {{ return v * {prelude_value}; }}
macros:
  ADD:
    inputs: 2
    params: {{p_ID_: "${{symbol}}", p_N_: "${{size}}"}}
    body: |
      static void p_ID_(const float* a, const float* b, float* out) {{
        for (long k = 0; k < p_N_; ++k) {{
          out[k] = npu_scale(a[k]) + {body_value};
        }}
      }}
ops:
  add: {{macros: {{default: ADD}}}}
"""


def build_error(tmp_path, monkeypatch, **values) -> tuple[BuildError, list[str]]:
    monkeypatch.delenv(ENV_VAR, raising=False)
    spec = tmp_path / "npu.yaml"
    spec.write_text(SPEC.format(**{"prelude_value": "2.0f", "body_value": "b[k]", **values}))
    with pytest.raises(BuildError) as info:
        byoc.build(byoc.parse(GRAPH, "graph"), backends=["npu"], spec_path=[str(tmp_path)])
    return info.value, spec.read_text().splitlines()


def test_an_error_in_a_macro_body_is_at_its_spec_line(tmp_path, monkeypatch):
    error, lines = build_error(tmp_path, monkeypatch, body_value="undefined_name")
    line = next(k for k, text in enumerate(lines, 1) if "undefined_name" in text)
    assert (error.location.file, error.location.line) == (str(tmp_path / "npu.yaml"), line)
    assert lines[line - 1][error.location.column - 1 :].startswith("undefined_name")
    assert f"line {line} of {tmp_path / 'npu.yaml'}, in the body of macro ADD" in error.message
    assert error.hint == f"fix the C at line {line} of {tmp_path / 'npu.yaml'}, in the body of macro ADD"
    assert "generated npu.c, around line" in error.message  # the generated lines are shown too


def test_an_error_in_the_prelude_is_at_its_spec_line(tmp_path, monkeypatch):
    error, lines = build_error(tmp_path, monkeypatch, prelude_value="missing_factor")
    line = next(k for k, text in enumerate(lines, 1) if "missing_factor" in text)
    assert (error.location.line, "prelude" in error.message) == (line, True)
    assert lines[line - 1][error.location.column - 1 :].startswith("missing_factor")


def test_the_command_line_shows_the_spec_line_with_a_caret(tmp_path, monkeypatch, capsys):
    build_error(tmp_path, monkeypatch, body_value="undefined_name")
    (tmp_path / "g.graph").write_text(GRAPH)
    rc, out, err = run_cli(capsys, "run", tmp_path / "g.graph", "--backend", "npu", "--spec-path", tmp_path)
    assert rc == 2 and "Traceback" not in err
    caret = err.splitlines().index(
        next(x for x in err.splitlines() if x.endswith("out[k] = npu_scale(a[k]) + undefined_name;"))
    )
    assert err.splitlines()[caret + 1].rstrip().endswith("^")
    assert f"--> {tmp_path / 'npu.yaml'}:" in err


def test_moving_the_spec_lines_leaves_the_generated_text_as_it_was(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    spec = tmp_path / "npu.yaml"
    program = byoc.parse(GRAPH, "graph")
    texts = []
    for head in ("", "# a comment that moves every line below it\n\n"):
        spec.write_text(head + SPEC.format(prelude_value="2.0f", body_value="b[k]"))
        backend = load_backend("npu", spec_path=[str(tmp_path)])
        assert (
            backend.macros["ADD"].body_line
            == spec.read_text()
            .splitlines()
            .index("      static void p_ID_(const float* a, const float* b, float* out) {")
            + 1
        )

        def loader(name):
            return load_backend(name, spec_path=[str(tmp_path)])

        offloaded = offload(program, "graph", ["npu"], loader)
        texts.append(
            next(
                a.text
                for a in generate(offloaded, byoc.load_catalog(), loader, {}).artifacts
                if a.name == "npu.c"
            )
        )
    assert texts[0] == texts[1]


def test_byocs_own_lines_are_no_spec_line():
    lines = [
        prelude_heading("s.yaml"),
        "#include <math.h>",
        "#define K(a) \\",
        "  a + 1",
        "",
        "static void f(void) {",
        "  g();",
        "}",
    ]
    spec = SpecText("s.yaml", (10, 1), {"K": ("s.yaml", 20)})
    assert spec_line(lines, 2, spec).line == 10 and spec_line(lines, 2, spec).what == "prelude"
    assert spec_line(lines, 4, spec).line == 20 and spec_line(lines, 4, spec).what == "body of macro K"
    assert [spec_line(lines, n, spec) for n in (1, 3, 5, 6, 7, 8, 99)] == [None] * 7


def test_an_older_onednn_is_refused_at_the_dnnl_spec_line_that_says_so(tmp_path, monkeypatch):
    """A oneDNN 2 (Debian's libdnnl-dev) has the header but not the C API the dnnl
    kernels use: the version check of the spec's support header stops the build there,
    and the error is located at that line of the header file, with the install hint."""
    why = missing_library("dnnl")
    if why is not None:
        pytest.skip(why)
    monkeypatch.delenv(ENV_VAR, raising=False)
    shipped = load_backend("dnnl")
    (lib_dir,) = {f[2:] for f in shipped.requires["onednn"].check("dnnl").link_flags if f.startswith("-L")}
    fake = tmp_path / "onednn2" / "include" / "oneapi" / "dnnl"
    fake.mkdir(parents=True)
    (fake / "dnnl.h").write_text("#define DNNL_VERSION_MAJOR 2\n#define DNNL_VERSION_MINOR 6\n")
    yaml = YAML()
    specs = tmp_path / "specs"
    shutil.copytree(SHIPPED_BACKENDS / "dnnl", specs / "dnnl")
    doc = yaml.load(specs / "dnnl" / "dnnl.yaml")
    doc["requires"]["onednn"]["from"] = {
        "dirs": {"include": [str(tmp_path / "onednn2" / "include")], "lib": [lib_dir]}
    }
    with (specs / "dnnl" / "dnnl.yaml").open("w") as out:
        yaml.dump(doc, out)
    graph = "graph main(x: float32[4, 8]) {\n  return relu(x)\n}\n"
    with pytest.raises(BuildError) as info:
        byoc.build(byoc.parse(graph, "graph"), backends=["dnnl"], spec_path=[str(specs)])
    header = specs / "dnnl" / "dnnl_support.h"  # the check is in the spec's support header
    lines = header.read_text().splitlines()
    assert info.value.location.file == str(header)
    assert lines[info.value.location.line - 1].strip().startswith("#error")
    assert "needs oneDNN 3 or later" in info.value.message and "byoc-codegen[dnnl]" in info.value.message
