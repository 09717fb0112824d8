"""`byoc check`, `byoc backends` and `--spec-path` on the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from byoc.cli import main
from byoc.spec import ENV_VAR, SHIPPED_BACKENDS, SHIPPED_OPS
from byoc.spec.search import load_backend_path

SHIPPED_FILES = sorted([*SHIPPED_BACKENDS.glob("*.yaml"), *SHIPPED_BACKENDS.glob("*/*.yaml")])


def ok(path: Path) -> str:
    """The line `byoc check` prints for the valid shipped spec ``path``: a spec with
    support C or a probe says it compiled them, or which library it lacks to."""
    spec = load_backend_path(path)
    sources = [f.name for f in spec.support if not f.is_header]
    parts = [f"its support C ({', '.join(sources)})"] * bool(sources) + ["its probe"] * (
        spec.probe is not None
    )
    if not parts:
        return f"{path}: ok"
    why = spec.missing_library()
    return f"{path}: ok, " + " and ".join(parts) + (f" not compiled: {why}" if why else " compiled")


SHIPPED_NAMES = ("cblas", "ccompiler", "dnnl", "engine", "examplejson", "fused", "json")


@pytest.fixture(autouse=True)
def _no_user_spec_path(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def user_spec_dir(tmp_path: Path, name: str = "mynpu") -> Path:
    """A directory with one user backend, a json-kind copy named ``name``."""
    directory = tmp_path / "specs"
    directory.mkdir(parents=True, exist_ok=True)
    text = (SHIPPED_BACKENDS / "json.yaml").read_text(encoding="utf-8")
    text = text.replace("name: json ", f"name: {name} ").replace(
        "symbol_prefix: json ", f"symbol_prefix: {name} "
    )
    (directory / f"{name}.yaml").write_text(text, encoding="utf-8")
    return directory


def test_check_shipped_backends_prints_ok(capsys):
    status, out, err = run(capsys, "check", *map(str, SHIPPED_FILES))
    assert status == 0 and err == ""
    assert out.splitlines() == [ok(p) for p in SHIPPED_FILES]
    assert any(p.parent.name == "dnnl" for p in SHIPPED_FILES)  # a backend in a folder of its own


def test_check_shipped_backends_in_a_subprocess():
    argv = [sys.executable, "-m", "byoc", "check", *map(str, SHIPPED_FILES)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [ok(p) for p in SHIPPED_FILES]


def test_check_accepts_an_op_catalog_and_a_directory(capsys):
    status, out, _ = run(capsys, "check", str(SHIPPED_OPS), str(SHIPPED_BACKENDS))
    assert status == 0
    assert out.splitlines() == [f"{SHIPPED_OPS}: ok"] + [ok(p) for p in SHIPPED_FILES]


def test_check_without_arguments_checks_the_search_path(capsys, tmp_path):
    directory = user_spec_dir(tmp_path)
    status, out, _ = run(capsys, "check", "--spec-path", str(directory))
    assert status == 0
    assert f"{directory.resolve() / 'mynpu.yaml'}: ok" in out.splitlines()
    assert len(out.splitlines()) == 1 + 1 + len(SHIPPED_FILES)


def test_check_reports_located_errors_and_exits_2(capsys, tmp_path):
    bad = tmp_path / "ccompiler.yaml"
    bad.write_text(
        (SHIPPED_BACKENDS / "ccompiler.yaml")
        .read_text()
        .replace("symbol_prefix: ccompiler", "symbol_prefix: for")
    )
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if t.startswith("symbol_prefix"))
    good = SHIPPED_FILES[0]
    status, out, err = run(capsys, "check", str(bad), str(good))
    assert status == 2
    assert out == f"{good}: ok\n"
    assert f"{bad}:{line}:16" in err
    assert "'for' is a C or C++ keyword" in err
    assert "Traceback" not in err


def test_check_a_bad_catalog(capsys, tmp_path):
    bad = tmp_path / "ops.yaml"
    bad.write_text("version: 1\nops:\n  add:\n    inputs: 2\n    shape: sideways\n    numpy: add(x0, x1)\n")
    status, _, err = run(capsys, "check", str(bad))
    assert status == 2
    assert f"{bad}:5:12" in err and "unknown shape rule" in err


def test_check_missing_file_exits_2(capsys, tmp_path):
    status, _, err = run(capsys, "check", str(tmp_path / "absent.yaml"))
    assert status == 2 and "cannot read" in err


def table(out: str) -> list[str]:
    """The lines of ``byoc backends``'s table: up to the blank line before its libraries."""
    return out.split("\n\n")[0].splitlines()


def test_backends_lists_every_shipped_backend(capsys):
    status, out, _ = run(capsys, "backends")
    assert status == 0
    lines = table(out)
    assert lines[0].split() == ["backend", "kind", "dtypes", "ranks", "ops"]
    assert [line.split()[0] for line in lines[1:]] == list(SHIPPED_NAMES)
    rows = {line.split()[0]: line for line in lines[1:]}
    assert "c_source" in rows["ccompiler"] and "add, subtract, multiply" in rows["ccompiler"]
    assert rows["engine"].split()[1:4] == ["engine", "float32", "0-8"]
    assert "0-8" in rows["json"] and "concatenate" in rows["json"]


def test_backends_detail(capsys):
    status, out, _ = run(capsys, "backends", "ccompiler")
    assert status == 0
    assert "cc -std=c99 -O2 -Wall -Wextra -Werror" in out
    assert "opt_level: int = 2 (one of 0, 1, 2, 3)" in out
    assert "add: rank 1: CSOURCE_BINARY_OP_1D; rank 2: CSOURCE_BINARY_OP_2D" in out


def test_backends_unknown_name_exits_2(capsys):
    status, _, err = run(capsys, "backends", "nope")
    assert status == 2 and "unknown backend 'nope'" in err


@pytest.mark.parametrize("where", ["global", "command"])
def test_spec_path_finds_a_user_backend(capsys, tmp_path, where):
    directory = str(user_spec_dir(tmp_path))
    argv = (
        ["--spec-path", directory, "backends"]
        if where == "global"
        else ["backends", "--spec-path", directory]
    )
    status, out, _ = run(capsys, *argv)
    assert status == 0
    assert [line.split()[0] for line in table(out)[1:]] == sorted([*SHIPPED_NAMES, "mynpu"])


def test_spec_path_is_repeatable(capsys, tmp_path):
    first = user_spec_dir(tmp_path / "a", "first")
    second = user_spec_dir(tmp_path / "b", "second")
    status, out, _ = run(capsys, "--spec-path", str(first), "backends", "--spec-path", str(second))
    assert status == 0
    names = [line.split()[0] for line in table(out)[1:]]
    assert "first" in names and "second" in names


def test_env_var_finds_a_user_backend(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(user_spec_dir(tmp_path)))
    status, out, _ = run(capsys, "backends", "mynpu")
    assert status == 0
    assert out.startswith("mynpu: json backend, from ")


def test_backends_reports_a_broken_user_spec_but_lists_the_rest(capsys, tmp_path):
    directory = tmp_path / "specs"
    directory.mkdir()
    (directory / "broken.yaml").write_text(
        "version: 1\nname: broken\nkind: json\ndtypes: float32\nranks: [1]\nops: {add: {kernel: add}}\n"
    )
    status, out, err = run(capsys, "--spec-path", str(directory), "backends")
    assert status == 2
    assert f"{directory.resolve() / 'broken.yaml'}:4:9" in err
    assert len(table(out)) == 1 + len(SHIPPED_NAMES)


def test_missing_spec_dir_is_a_usage_error(capsys, tmp_path):
    for command in ("ops", "backends"):
        status, out, err = run(capsys, command, "--spec-path", str(tmp_path / "absent"))
        assert status == 2 and out == "" and "does not exist" in err


def test_parse_uses_examplejson_tokens_from_the_spec_path(capsys, tmp_path):
    directory = tmp_path / "specs"
    directory.mkdir()
    text = (SHIPPED_BACKENDS / "examplejson.yaml").read_text().replace("{token: add}", "{token: plus}")
    (directory / "examplejson.yaml").write_text(text)
    graph = tmp_path / "g.examplejson"
    graph.write_text("subgraph_0\n  input 0 4\n  input 1 4\n  plus 2 inputs: 0 1 shape: 4\n")
    status, _, err = run(capsys, "parse", str(graph))
    assert status == 2 and "unknown op token 'plus'" in err
    status, out, _ = run(capsys, "parse", str(graph), "--to", "graph", "--spec-path", str(directory))
    assert status == 0 and "v2 = add(v0, v1)" in out


@pytest.mark.parametrize("command", ["check", "backends", "parse", "ops"])
def test_every_command_takes_spec_path_and_teaches_by_example(capsys, command):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--spec-path DIR" in out
    assert "examples:" in out


def test_top_level_help_mentions_the_spec_commands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "byoc check spec/backends/" in out and "BYOC_SPEC_PATH" in out
