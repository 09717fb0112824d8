"""The README's commands, outputs and Python example are what byoc does.

Every ``byoc ...`` command in a ``sh`` block of README.md runs, in order within its
block, in a fresh directory holding ``examples/`` and ``spec/``; the quick start's
output and the error example match what the CLI prints; the command table names
every subcommand and only flags that exist; and the Python examples (README.md and
docs/performance.md) run.
"""

from __future__ import annotations

import glob
import re
import shlex
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
BYOC = ("byoc", ".venv/bin/byoc")
"""How the README spells the command."""


def section(title: str) -> str:
    """The text of the README's ``## title`` section."""
    return README.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of ``text`` whose info string is ``language`` ("" for none)."""
    found, current, info = [], None, ""
    for line in text.splitlines(keepends=True):
        fence = line.strip()
        if current is None and fence.startswith("```"):
            current, info = [], fence[3:].strip()
        elif current is not None and fence == "```":
            if info == language:
                found.append("".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return found


def byoc_commands(block: str) -> list[list[str]]:
    """The argument lists of the ``byoc`` commands in a shell block (also those after
    ``&&``), comments dropped."""
    commands = []
    for line in block.splitlines():
        for part in line.split("&&"):
            words = shlex.split(part, comments=True)
            if words and words[0] in BYOC:
                commands.append(words[1:])
    return commands


def expand(argv: list[str]) -> list[str]:
    """Shell globbing, as the shell would do it in the working directory."""
    out = []
    for word in argv:
        matches = sorted(glob.glob(word)) if any(c in word for c in "*?[") else []
        out += matches or [word]
    return out


def subcommand(argv: list[str]) -> str:
    """The command of ``byoc *argv``, after the global options."""
    words = iter(argv)
    for word in words:
        if word == "--spec-path":
            next(words)
        elif not word.startswith("-"):
            return word
    raise AssertionError(f"no command in {argv}")


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """A fresh directory with the repository's examples/ and spec/, as the cwd."""
    for name in ("examples", "spec"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


SH_BLOCKS = [b for b in blocks(README, "sh") if byoc_commands(b)]


def test_readme_shows_byoc_commands():
    commands = [c for b in SH_BLOCKS for c in byoc_commands(b)]
    assert len(commands) >= 10
    assert ["run", "examples/guide_whole_graph.graph"] in commands  # the quick start's main job
    used = {subcommand(c) for c in commands}
    assert {"run", "partition", "dot", "check", "backends", "gen", "build", "parse"} <= used


@pytest.mark.parametrize("block", SH_BLOCKS, ids=[f"block{i}" for i in range(len(SH_BLOCKS))])
def test_readme_commands_run(block, workdir, capsys):
    for argv in byoc_commands(block):
        argv = expand(argv)
        if "--spec-path" in argv:
            (workdir / argv[argv.index("--spec-path") + 1]).mkdir(exist_ok=True)
        if subcommand(argv) == "dot" and "-o" in argv and not argv[argv.index("-o") + 1].endswith(".dot"):
            if shutil.which("dot") is None:
                continue  # SVG and PNG need Graphviz; test_dot.py covers the error
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 0, f"byoc {shlex.join(argv)}: exit {rc}\n{err}"
        assert out, f"byoc {shlex.join(argv)} printed nothing"


def test_quick_start_has_exactly_two_commands():
    commands = blocks(section("Quick start"), "sh")[0].strip().splitlines()
    assert len(commands) == 2
    assert commands[0].endswith("&& .venv/bin/byoc run examples/guide_whole_graph.graph")
    assert commands[1] == "bash .ci/run"
    assert "-m pytest -q" in (REPO / ".ci" / "run").read_text()


def test_quick_start_output_is_what_byoc_run_prints(workdir, capsys):
    shown = blocks(section("Quick start"), "")[0].splitlines()
    rc, out, _ = run_cli(capsys, "run", "examples/guide_whole_graph.graph")
    assert rc == 0
    printed = out.splitlines()
    timing = re.compile(r"[0-9.]+ ms")
    assert [timing.sub("T", line) for line in printed] == [timing.sub("T", line) for line in shown]


def test_error_example_is_what_the_cli_prints(workdir, capsys):
    shown = next(b for b in blocks(section("Errors"), "") if b.startswith("graph error:"))
    (workdir / "bad.graph").write_text("graph main(x: float32[2]) {\n  y = ad(x, x)\n  return y\n}\n")
    rc, out, err = run_cli(capsys, "parse", "bad.graph")
    assert (rc, out, err) == (2, "", shown)


def help_text(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        run_cli(capsys, *argv, "--help")
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_command_table_matches_the_cli(capsys):
    rows = re.findall(r"^\| `byoc (\w+)([^`]*)` \|", section("Command line"), flags=re.M)
    listed = re.findall(r"^    (\w+) {2,}", help_text(capsys), flags=re.M)
    assert sorted(name for name, _ in rows) == sorted(listed)
    for name, usage in rows:
        flags = re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", usage)
        text = help_text(capsys, name)
        assert all(re.search(rf"(?<![\w-]){re.escape(f)}\b", text) for f in flags), (name, flags)


@pytest.mark.parametrize("doc", ["README.md", "docs/performance.md"])
def test_python_examples_run(doc, workdir):
    (example,) = blocks((REPO / doc).read_text(encoding="utf-8"), "python")
    exec(compile(example, doc, "exec"), {})


def test_readme_fits_in_320_lines():
    assert README.count("\n") <= 320


def test_onnx_section_shows_the_whole_flow_and_runs():
    """ "Bring an ONNX model": import, partition over two backends, draw, run on the
    example's test data, save a bundle and run it, and run a transformer of the zoo; its block is one of SH_BLOCKS, so
    test_readme_commands_run runs every command."""
    (block,) = blocks(section("Bring an ONNX model"), "sh")
    assert block in SH_BLOCKS
    commands = byoc_commands(block)
    assert [subcommand(c) for c in commands] == ["import", "partition", "dot", "run", "build", "run", "run"]
    assert all(c[1].endswith(".onnx") for c in commands[:5] + commands[6:])
    assert "ccompiler,json" in commands[1] and "ccompiler,json" in commands[2]
    assert commands[3][commands[3].index("--inputs") + 1] == "examples/onnx/test_data_set_0"
    assert commands[5] == ["run", commands[4][commands[4].index("-o") + 1]]
    assert commands[6][1] == "examples/zoo/gpt2/model.onnx", "a transformer, not only a CNN"
