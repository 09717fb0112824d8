"""``byoc completion SHELL`` (byoc/cli/completion.py): a script generated from the parser
itself, which bash runs to complete commands, options and file names."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import EXAMPLES, run_cli

from byoc.cli import parser

pytest.importorskip("shtab")


def completions(script: str, words: list[str]) -> list[str]:
    """What bash offers for the last of ``words`` after sourcing ``script``."""
    line = " ".join(words)
    program = (
        f'eval "$SCRIPT"; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; '
        f'COMP_LINE="{line}"; COMP_POINT={len(line)}; _shtab_byoc; printf "%s\\n" "${{COMPREPLY[@]}}"'
    )
    out = subprocess.run(
        ["bash", "-c", program],
        env={"SCRIPT": script, "PATH": "/usr/bin:/bin"},
        cwd=EXAMPLES.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [w for w in out.stdout.splitlines() if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_options_and_files(capsys):
    rc, script, err = run_cli(capsys, "completion", "bash")
    assert rc == 0 and err == ""
    commands = sorted(parser()._subparsers._group_actions[0].choices)  # every command there is
    assert sorted(completions(script, ["byoc", ""])) == commands
    assert completions(script, ["byoc", "pa"]) == [c for c in commands if c.startswith("pa")]
    assert "--backend" in completions(script, ["byoc", "run", "--back"])
    graphs = sorted(p.relative_to(EXAMPLES.parent).as_posix() for p in EXAMPLES.glob("mlp*"))
    assert sorted(completions(script, ["byoc", "run", "examples/mlp"])) == graphs


@pytest.mark.parametrize("shell", ["zsh", "tcsh"])
def test_other_shells_get_a_script_naming_every_command(capsys, shell):
    rc, script, _ = run_cli(capsys, "completion", shell)
    assert rc == 0
    assert all(c in script for c in parser()._subparsers._group_actions[0].choices)


def test_without_shtab_the_hint_names_the_extra(tmp_path):
    (tmp_path / "shtab.py").write_text("raise ImportError('not installed')\n")
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); from byoc.cli import main; sys.exit(main(['completion', 'bash']))",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "pip install 'byoc-codegen[completion]'" in out.stderr
    assert "Traceback" not in out.stderr
