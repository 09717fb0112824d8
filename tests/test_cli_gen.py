"""`byoc gen`: artifacts on stdout or in a directory, written atomically, deterministic."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import EXAMPLES

from byoc.atomic import MARKER
from byoc.cli import main
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS

WHOLE = EXAMPLES / "guide_whole_graph.graph"


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_the_c_module(capsys):
    code, out, err = run(["gen", WHOLE], capsys)
    assert code == 0, err
    assert "__tvm_ffi_ccompiler_0" in out and "__tvm_ffi_ccompiler_1" in out
    assert "CSOURCE_BINARY_OP_2D(ccompiler_0_0, +, 10, 10, float)" in out


def test_writes_every_artifact(tmp_path, capsys):
    out_dir = tmp_path / "out"
    code, out, err = run(["gen", WHOLE, "-o", out_dir], capsys)
    assert code == 0, err
    names = sorted(p.name for p in out_dir.iterdir())
    support = ["byoc_module.h", "byoc_entry.c", "byoc_workspace.c"]
    assert names == sorted([MARKER, "ccompiler.c", *support, "main.graph.json", "main.host.graph"])
    assert out.count("wrote ") == 6


def test_two_modules_share_one_copy_of_byocs_support_and_build_by_hand(tmp_path, capsys):
    """byoc's support files that two backends' modules both link are written once, and
    the written files build as docs/architecture.md says: each module with them."""
    import tvm_ffi.libinfo
    from compile_util import WARNINGS

    out_dir = tmp_path / "out"
    code, out, err = run(
        ["gen", WHOLE, "--backend", "ccompiler", "--backend", "fused", "-o", out_dir], capsys
    )
    assert code == 0, err
    assert (
        "byoc_entry.c  (support, ccompiler, fused)" in out and "byoc_workspace.c  (support, ccompiler)" in out
    )
    assert out.count("byoc_module.h") == 1
    include = tvm_ffi.libinfo.find_include_path()
    libdir = tvm_ffi.libinfo.find_libtvm_ffi().rsplit("/", 1)[0]
    for module in ("ccompiler.c", "fused.c"):
        text = (out_dir / module).read_text()
        linked = text.split('#include "byoc_module.h" /* byoc\'s support: ', 1)[1].split(" beside", 1)[0]
        files = [module, *linked.split(", ")]
        cmd = ["cc", "-std=c99", *WARNINGS, "-shared", "-fPIC", f"-I{include}", *files]
        cmd += ["-o", f"lib{module[:-2]}.so", f"-L{libdir}", "-ltvm_ffi"]
        proc = subprocess.run(cmd, cwd=out_dir, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("backend", ["ccompiler", "engine", "examplejson", "json"])
def test_examplejson_offloads_every_subgraph(backend, tmp_path, capsys):
    code, out, err = run(
        ["gen", EXAMPLES / "tvm_external_runtime.examplejson", "--backend", backend, "-o", tmp_path / "o"],
        capsys,
    )
    assert code == 0, err
    names = {p.name for p in (tmp_path / "o").iterdir()}
    assert {"json_rt_0.graph.json", "json_rt_1.graph.json"} <= names


def test_regenerating_replaces_only_byoc_output(tmp_path, capsys):
    out_dir = tmp_path / "out"
    assert run(["gen", WHOLE, "-o", out_dir], capsys)[0] == 0
    (out_dir / "stale.txt").write_text("left from an earlier run")
    assert run(["gen", WHOLE, "-o", out_dir], capsys)[0] == 0
    assert not (out_dir / "stale.txt").exists()

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("precious")
    code, _, err = run(["gen", WHOLE, "-o", foreign], capsys)
    assert code == 2 and "refusing to replace" in err
    assert (foreign / "notes.txt").read_text() == "precious"


def test_error_leaves_no_output(tmp_path, capsys):
    bad = tmp_path / "bad.graph"
    bad.write_text("graph main(x: float32[4]) {\n  s = @ccompiler { return negative(x) }\n  return s\n}\n")
    code, out, err = run(["gen", bad, "-o", tmp_path / "out"], capsys)
    assert code == 2 and out == ""
    assert "backend ccompiler has no op 'negative'" in err and "bad.graph:2:" in err
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.graph"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--option", "nonsense"], "is not KEY=VALUE"),
        (["--option", "opt_level=7"], "opt_level"),
        (["--option", "unknown_key=1"], "no backend of this build has that option"),
        (["--option", "json.indent=2"], "backend 'json' is not used by this build"),
        (["--backend", "nosuch"], "nosuch"),
    ],
)
def test_bad_flags_are_usage_errors(argv, message, capsys):
    code, out, err = run(["gen", WHOLE, *argv], capsys)
    assert code == 2 and out == ""
    assert message in err and "Traceback" not in err


def test_options_reach_the_generator(tmp_path, capsys):
    code, out, _ = run(["gen", EXAMPLES / "guide_subgraph.examplejson", "--option", "indent=0"], capsys)
    assert code == 0
    assert out.splitlines()[1] == "input 0 10 10"


def test_output_is_identical_in_another_process(tmp_path):
    first = tmp_path / "a"
    second = tmp_path / "b"
    for out_dir in (first, second):
        subprocess.run(
            [sys.executable, "-m", "byoc", "gen", str(WHOLE), "-o", str(out_dir)],
            check=True,
            capture_output=True,
        )
    for f in first.iterdir():
        assert f.read_bytes() == (second / f.name).read_bytes(), f.name


def test_unwritable_output_is_a_clear_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a directory")
    code, out, err = run(["gen", WHOLE, "-o", blocker / "sub" / "out"], capsys)
    assert code == 2 and out == ""
    assert "cannot create" in err and "Traceback" not in err
    code, _, err = run(["gen", WHOLE, "-o", blocker], capsys)
    assert code == 2 and "exists and is not a directory" in err


SMALL = "graph main(x: float32[2, 3], y: float32[2, 3]) {\n  return relu(add(x, y))\n}\n"


@pytest.mark.parametrize("kind", ["ccompiler", "fused"])
def test_user_spec_is_named_relative_to_its_search_directory(kind, tmp_path, capsys, golden, monkeypatch):
    """A spec from a --spec-path directory is named relative to that directory, so
    the generated text is the same on every machine (the golden holds no tmp path)."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)  # the graph's own locations are relative too
    specs = tmp_path / "my_specs"
    specs.mkdir()
    shipped = SHIPPED_BACKENDS / f"{kind}.yaml"
    headers = []
    if not shipped.is_file():  # a folder spec: its C files go beside the copy, renamed as it is
        shipped = SHIPPED_BACKENDS / kind / f"{kind}.yaml"
        headers = [h.name for h in shipped.parent.glob("*.h")]
    text = shipped.read_text(encoding="utf-8").replace(f"name: {kind} ", f"name: my_{kind} ", 1)
    for name in headers:
        shutil.copy(shipped.parent / name, specs / f"my_{name}")
        text = text.replace(name, f"my_{name}")
    (specs / f"my_{kind}.yaml").write_text(text)
    (tmp_path / "small.graph").write_text(SMALL)
    code, out, err = run(["gen", "small.graph", "--spec-path", specs, "--backend", f"my_{kind}"], capsys)
    assert code == 0, err
    assert f"from the backend spec my_specs/my_{kind}.yaml (from --spec-path)" in out
    assert str(tmp_path) not in out and str(specs.resolve()) not in out
    assert out == golden("c")
    # found through $BYOC_SPEC_PATH instead, the header says so
    monkeypatch.setenv(ENV_VAR, str(specs))
    code, out, err = run(["gen", "small.graph", "--backend", f"my_{kind}"], capsys)
    assert code == 0, err
    assert f"from the backend spec my_specs/my_{kind}.yaml (from ${ENV_VAR})" in out
    assert str(tmp_path) not in out
