"""Macro bodies in a C file beside the spec (``body: {file: NAME}``, spec/macro_files.py):
the module gets the same text as from an inline body, a compiler error is located at
the C file's line and column, and a malformed or stale file is a SpecError located in
it (or at the spec's ``file:`` when the define is missing)."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from conftest import run_cli

import byoc
from byoc.api import load_backend
from byoc.building import offload
from byoc.errors import BuildError, SpecError
from byoc.generator.pipeline import generate
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS

GRAPH = "graph main(x: float32[8], y: float32[8]) {\n  return add(x, y)\n}\n"

SPEC = """\
version: 1
name: npu
kind: c_source
dtypes: [float32]
ranks: [1]
compile: {language: c}
macros:
  ADD:
    doc: a + b * 2
    inputs: 2
    params: {p_ID_: "${symbol}", p_N_: "${size}"}
    body: BODY
ops:
  add: {macros: {default: ADD}}
"""

KERNELS = """\
/* the npu's kernels */

#define ADD(p_ID_, p_N_) \\
  static void p_ID_(const float* a, const float* b, float* out) {      \\
    for (long k = 0; k < p_N_; ++k) { \\
      out[k] = a[k] + b[k] * 2.0f; \\
    } \\
  }
"""

INLINE = """|
      static void p_ID_(const float* a, const float* b, float* out) {
        for (long k = 0; k < p_N_; ++k) {
          out[k] = a[k] + b[k] * 2.0f;
        }
      }"""


def write(tmp_path, kernels: str = KERNELS, body: str = "{file: npu_kernels.h}"):
    (tmp_path / "npu.yaml").write_text(SPEC.replace("BODY", body))
    (tmp_path / "npu_kernels.h").write_text(kernels)
    return tmp_path


def generated_module(tmp_path) -> str:
    def loader(name):
        return load_backend(name, spec_path=[str(tmp_path)])

    offloaded = offload(byoc.parse(GRAPH, "graph"), "graph", ["npu"], loader)
    return next(
        a.text for a in generate(offloaded, byoc.load_catalog(), loader, {}).artifacts if a.name == "npu.c"
    )


def test_a_body_from_a_file_gives_the_module_an_inline_body_gives(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    for side in ("file", "inline"):
        (tmp_path / side / "npu").mkdir(parents=True)
    from_file = generated_module(write(tmp_path / "file" / "npu"))
    inline = generated_module(write(tmp_path / "inline" / "npu", body=INLINE))
    assert from_file.replace("/file/", "/inline/") == inline
    assert "  for (long k = 0; k < p_N_; ++k) { \\\n" in from_file  # dedented, one backslash
    backend = load_backend("npu", spec_path=[str(tmp_path / "file" / "npu")])
    assert backend.macros["ADD"].body_file == str((tmp_path / "file" / "npu" / "npu_kernels.h").resolve())
    assert backend.macros["ADD"].body_line == 4


def test_a_body_from_a_file_runs(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    model = byoc.build(byoc.parse(GRAPH, "graph"), backends=["npu"], spec_path=[str(write(tmp_path))])
    x, y = np.arange(8, dtype=np.float32), np.linspace(-1, 1, 8, dtype=np.float32)
    (got,) = model(x=x, y=y)
    np.testing.assert_array_equal(got, x + y * np.float32(2))


def test_a_compiler_error_is_at_the_c_files_line_and_column(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    write(tmp_path, KERNELS.replace("b[k] * 2.0f", "b[k] * missing_factor"))
    with pytest.raises(BuildError) as info:
        byoc.build(byoc.parse(GRAPH, "graph"), backends=["npu"], spec_path=[str(tmp_path)])
    kernels = tmp_path / "npu_kernels.h"
    lines = kernels.read_text().splitlines()
    where = info.value.location
    assert (where.file, where.line) == (str(kernels.resolve()), 6)
    assert lines[where.line - 1][where.column - 1 :].startswith("missing_factor")
    assert "in the body of macro ADD" in info.value.message


BAD_FILES = [
    ("", "has no #define ADD(...)", "npu.yaml", None),
    (KERNELS + "\n#define ADD(p_ID_, p_N_) \\\n  x\n", "macro ADD is defined twice", "npu_kernels.h", 10),
    (
        KERNELS.replace("ADD(p_ID_, p_N_)", "ADD(p_ID_, p_N_, p_K_)").replace("2.0f", "p_K_"),
        "parameter p_K_ has no argument",
        "npu_kernels.h",
        3,
    ),
    (
        KERNELS.replace("ADD(p_ID_, p_N_)", "ADD(p_ID_)").replace("p_N_", "8"),
        "#define ADD in npu_kernels.h takes no parameter p_N_",
        "npu.yaml",
        11,
    ),
    (
        KERNELS.replace("ADD(p_ID_, p_N_) \\", "ADD(p_ID_, p_N_) static \\"),
        "the body starts on the next line",
        "npu_kernels.h",
        3,
    ),
    (KERNELS.replace("ADD(p_ID_, p_N_)", "ADD"), "takes no parameter list", "npu_kernels.h", 3),
    (KERNELS.replace("2.0f", "${scale}"), "undefined placeholder ${scale}", "npu_kernels.h", 6),
    (
        KERNELS.replace("    } \\", "    #pragma once \\"),
        "cannot hold a preprocessor directive",
        "npu_kernels.h",
        7,
    ),
    (KERNELS + "\n#define OLD_ADD(p_ID_) \\\n  p_ID_\n", "OLD_ADD is no macro's body", "npu_kernels.h", 10),
]


@pytest.mark.parametrize(("kernels", "message", "file", "line"), BAD_FILES, ids=[b[1] for b in BAD_FILES])
def test_a_bad_macro_file_is_a_spec_error_where_it_is_wrong(
    tmp_path, monkeypatch, kernels, message, file, line
):
    monkeypatch.delenv(ENV_VAR, raising=False)
    write(tmp_path, kernels)
    with pytest.raises(SpecError) as info:
        load_backend("npu", spec_path=[str(tmp_path)])
    assert message in info.value.message
    assert info.value.location.file.endswith(file)
    if line is not None:
        assert info.value.location.line == line
    assert info.value.hint


def test_a_missing_macro_file_is_located_at_the_spec_and_the_cli_has_no_traceback(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv(ENV_VAR, raising=False)
    write(tmp_path)
    (tmp_path / "npu_kernels.h").unlink()
    (tmp_path / "g.graph").write_text(GRAPH)
    rc, _, err = run_cli(capsys, "run", tmp_path / "g.graph", "--backend", "npu", "--spec-path", tmp_path)
    assert rc == 2 and "Traceback" not in err
    assert "npu_kernels.h" in err and f"{tmp_path / 'npu.yaml'}:" in err


def test_the_shipped_dnnl_kernels_are_read_from_their_file(tmp_path):
    """Every dnnl macro takes its body from dnnl_kernels.h, which holds nothing else."""
    spec = load_backend("dnnl")
    kernels = SHIPPED_BACKENDS / "dnnl" / "dnnl_kernels.h"
    assert {m.body_file for m in spec.macros.values()} == {str(kernels.resolve())}
    shutil.copytree(SHIPPED_BACKENDS / "dnnl", tmp_path / "dnnl")
    edited = (tmp_path / "dnnl" / "dnnl_kernels.h").read_text() + "\n#define DNNL_STALE(p_ID_) \\\n  p_ID_\n"
    (tmp_path / "dnnl" / "dnnl_kernels.h").write_text(edited)
    with pytest.raises(SpecError, match="DNNL_STALE is no macro's body"):
        load_backend("dnnl", spec_path=[str(tmp_path)])


def test_the_spec_readme_example_runs(tmp_path, monkeypatch):
    """spec/README.md's example of a body in a C file, completed into a spec, runs."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    text = (SHIPPED_BACKENDS.parent / "README.md").read_text(encoding="utf-8")
    section = text[text.index("#### Macro bodies in a C file") :]
    macros = re.search(r"```yaml\n(.*?)```", section, flags=re.S).group(1)
    kernels = re.search(r"```c\n(.*?)```", section, flags=re.S).group(1)
    head = SPEC[: SPEC.index("macros:\n")]
    (tmp_path / "npu.yaml").write_text(head + macros + "ops:\n  add: {macros: {default: NPU_ADD}}\n")
    (tmp_path / "npu_kernels.h").write_text(kernels)
    model = byoc.build(byoc.parse(GRAPH, "graph"), backends=["npu"], spec_path=[str(tmp_path)])
    x, y = np.arange(8, dtype=np.float32), np.full(8, 0.5, dtype=np.float32)
    (got,) = model(x=x, y=y)
    np.testing.assert_array_equal(got, x + y)


SHARED = """\
params:
  p_ID_: "${symbol}"
  p_N_: "${size}"
"""


def test_shared_params_give_the_arguments_a_macro_leaves_out(tmp_path, monkeypatch):
    """The spec's shared ``params:`` give an argument by the parameter's name; the
    #define gives their order, so the macro's own ``params`` may be in any order."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    for side in ("own", "shared", "reordered"):
        (tmp_path / side / "npu").mkdir(parents=True)
    own = generated_module(write(tmp_path / "own" / "npu"))
    folder = write(tmp_path / "shared" / "npu")
    spec = (folder / "npu.yaml").read_text()
    spec = spec.replace('    params: {p_ID_: "${symbol}", p_N_: "${size}"}\n', "")
    (folder / "npu.yaml").write_text(spec.replace("macros:\n", SHARED + "macros:\n"))
    shared = generated_module(folder)
    folder = write(tmp_path / "reordered" / "npu")
    spec = (folder / "npu.yaml").read_text()
    (folder / "npu.yaml").write_text(
        spec.replace('{p_ID_: "${symbol}", p_N_: "${size}"}', '{p_N_: "${size}", p_ID_: "${symbol}"}')
    )
    reordered = generated_module(folder)
    assert own.replace("/own/", "/shared/") == shared
    assert own.replace("/own/", "/reordered/") == reordered
    assert "ADD(npu_0_0, 8)" in own


@pytest.mark.parametrize(
    ("shared", "message", "line"),
    [
        ('params:\n  p_ID_: "${symbol}"\n  p_N_: "${size}"\n  p_OLD_: "1"\n', "no macro takes p_OLD_", 10),
        ('params:\n  p_ID_: "${symbol}"\n  p_N_: "${in3_dim0}"\n', "${in3_dim0}", 9),
    ],
    ids=["unused", "input the kernel lacks"],
)
def test_a_bad_shared_param_is_located_at_its_entry(tmp_path, monkeypatch, shared, message, line):
    monkeypatch.delenv(ENV_VAR, raising=False)
    write(tmp_path)
    spec = (tmp_path / "npu.yaml").read_text()
    spec = spec.replace('    params: {p_ID_: "${symbol}", p_N_: "${size}"}\n', "")
    (tmp_path / "npu.yaml").write_text(spec.replace("macros:\n", shared + "macros:\n"))
    assert_spec_error_at(tmp_path, message, line)


def assert_spec_error_at(folder, message: str, line: int) -> None:
    """Loading the npu spec in ``folder`` is a SpecError with ``message``, a hint, and
    the location ``line`` of npu.yaml."""
    with pytest.raises(SpecError) as info:
        load_backend("npu", spec_path=[str(folder)])
    assert message in info.value.message
    assert info.value.location.file.endswith("npu.yaml")
    assert info.value.location.line == line
    assert info.value.hint


def test_the_spec_readme_shared_params_example_runs(tmp_path, monkeypatch):
    """spec/README.md's example of shared arguments, with the kernels its comments
    name, loads and runs."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    text = (SHIPPED_BACKENDS.parent / "README.md").read_text(encoding="utf-8")
    section = text[text.index("#### Shared arguments (`params:`)") :]
    block = re.search(r"```yaml\n(.*?)```", section, flags=re.S).group(1)
    head = SPEC[: SPEC.index("macros:\n")]
    ops = "ops:\n  add: {macros: {default: NPU_ADD}}\n  leaky_relu: {macros: {default: NPU_SCALE}}\n"
    (tmp_path / "npu.yaml").write_text(head + block + ops)
    (tmp_path / "npu_kernels.h").write_text(
        "#define NPU_ADD(p_ID_, p_N_) \\\n"
        "  static void p_ID_(const float* a, const float* b, float* out) { \\\n"
        "    for (long k = 0; k < p_N_; ++k) out[k] = a[k] + b[k]; \\\n"
        "  }\n"
        "#define NPU_SCALE(p_ID_, p_T_, p_N_, p_K_) \\\n"
        "  static void p_ID_(const p_T_* x, p_T_* out) { \\\n"
        "    for (long k = 0; k < p_N_; ++k) out[k] = x[k] > 0 ? x[k] : (p_T_)p_K_ * x[k]; \\\n"
        "  }\n"
    )
    graph = "graph main(x: float32[8], y: float32[8]) {\n  return leaky_relu(add(x, y), alpha=0.25)\n}\n"
    model = byoc.build(byoc.parse(graph, "graph"), backends=["npu"], spec_path=[str(tmp_path)])
    x, y = np.linspace(-2, 2, 8, dtype=np.float32), np.full(8, 0.5, dtype=np.float32)
    (got,) = model(x=x, y=y)
    s = x + y
    np.testing.assert_array_equal(got, np.where(s > 0, s, np.float32(0.25) * s))


BODIES = "bodies: {file: npu_kernels.h}\n"


def test_the_spec_bodies_file_gives_every_macro_without_a_body_its_define(tmp_path, monkeypatch):
    """``bodies: {file: NAME}`` at the top level: a macro that gives no ``body`` takes
    the ``#define`` of its name there, the same text as ``body: {file: NAME}``; a macro
    with its own inline body keeps it."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    for side in ("own", "bodies"):
        (tmp_path / side / "npu").mkdir(parents=True)
    own = generated_module(write(tmp_path / "own" / "npu"))
    folder = write(tmp_path / "bodies" / "npu")
    spec = (folder / "npu.yaml").read_text().replace("    body: {file: npu_kernels.h}\n", "")
    inline_too = '  UNUSED:\n    inputs: 1\n    params: {p_ID_: "${symbol}"}\n    body: |\n      int p_ID_;\n'
    spec = spec.replace("ops:\n", inline_too + "ops:\n")
    (folder / "npu.yaml").write_text(spec.replace("macros:\n", BODIES + "macros:\n"))
    assert own.replace("/own/", "/bodies/") == generated_module(folder)
    backend = load_backend("npu", spec_path=[str(folder)])
    assert backend.macros["ADD"].body_file == str((folder / "npu_kernels.h").resolve())
    assert backend.macros["UNUSED"].body_file is None


@pytest.mark.parametrize(
    ("kernels", "bodies", "message", "line"),
    [
        (
            KERNELS.replace("#define ADD(", "#define ADDS("),
            BODIES,
            "npu_kernels.h has no #define ADD(...)",
            9,
        ),
        (KERNELS, "bodies: {file: missing.h}\n", "missing.h", 7),
        (KERNELS, "bodies: npu_kernels.h\n", "bodies must name a C file", 7),
    ],
    ids=["define missing", "file missing", "not a file mapping"],
)
def test_a_bad_bodies_file_is_located_in_the_spec(tmp_path, monkeypatch, kernels, bodies, message, line):
    monkeypatch.delenv(ENV_VAR, raising=False)
    write(tmp_path, kernels)
    spec = (tmp_path / "npu.yaml").read_text().replace("    body: {file: npu_kernels.h}\n", "")
    (tmp_path / "npu.yaml").write_text(spec.replace("macros:\n", bodies + "macros:\n"))
    assert_spec_error_at(tmp_path, message, line)


def test_the_comment_above_a_define_is_the_macros_doc(tmp_path, monkeypatch):
    """A macro without a doc in the spec takes the comment right above its #define
    (a block or // lines, on one line); a blank line between, or the spec's own doc,
    leaves it out; the module shows the doc above the macro."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    cases = {
        "/* adds b, doubled,\n   to a */\n": "adds b, doubled, to a",
        "// adds b\n// twice\n": "adds b twice",
        "/* adds b\n * with a margin\n */\n": "adds b with a margin",
        "/* a note */\n\n": "",
        "x = 1; /* trailing */\n": "",
    }
    for k, (above, want) in enumerate(cases.items()):
        folder = tmp_path / str(k)
        folder.mkdir()
        write(folder, KERNELS.replace("#define ADD(", above + "#define ADD("))
        spec = (folder / "npu.yaml").read_text().replace("    doc: a + b * 2\n", "")
        (folder / "npu.yaml").write_text(spec)
        assert load_backend("npu", spec_path=[str(folder)]).macros["ADD"].doc == want, above
    write(tmp_path, KERNELS.replace("#define ADD(", "/* from the file */\n#define ADD("))
    assert load_backend("npu", spec_path=[str(tmp_path)]).macros["ADD"].doc == "a + b * 2"
    spec = (tmp_path / "npu.yaml").read_text().replace("    doc: a + b * 2\n", "")
    (tmp_path / "npu.yaml").write_text(spec)
    assert "/* from the file */\n#define ADD(" in generated_module(tmp_path)
