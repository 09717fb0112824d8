"""-v, -vv and -q on every command (byoc/cli/logs.py), and byoc's records through
the standard logging module for a program that embeds it."""

from __future__ import annotations

import logging

import pytest
from conftest import EXAMPLES, run_cli

import byoc
from byoc.generator.placement import placement_summary

GUIDE = EXAMPLES / "guide_whole_graph.graph"


def byoc_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("byoc: ")]


def test_by_default_a_run_off_a_terminal_writes_nothing_to_stderr(capsys):
    rc, out, err = run_cli(capsys, "run", GUIDE)
    assert rc == 0 and "every output matches" in out
    assert byoc_lines(err) == []


@pytest.mark.parametrize("where", ["after", "before"])
def test_v_says_each_stage_in_order_with_the_placement(capsys, where):
    argv = ["run", "-v", GUIDE] if where == "after" else ["-v", "run", GUIDE]
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 0 and "every output matches" in out
    lines = byoc_lines(err)
    stages = [line.split()[1].rstrip(":") for line in lines if line.endswith(" s") and ": " in line[6:]]
    order = [
        s for s in ("parse", "partition", "generate", "compile", "load", "run", "reference") if s in stages
    ]
    assert order == ["parse", "partition", "generate", "compile", "load", "run", "reference"]
    assert stages.index("parse") < stages.index("generate") < stages.index("compile") < stages.index("run")
    placement = [line for line in lines if line.startswith("byoc: placement: ")]
    assert len(placement) == 1 and "on the host" in placement[0]
    assert not any("compile command" in line for line in lines)  # that is -vv's


def test_vv_shows_the_compiler_command_and_the_cache_use(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))  # an empty cache: a miss, then a hit
    rc, _, err = run_cli(capsys, "run", "-vv", GUIDE)
    assert rc == 0
    assert any("cache miss" in line for line in byoc_lines(err))
    commands = [line for line in byoc_lines(err) if "compile command" in line]
    # the module's library, and the objects of byoc's support files it links
    assert [" -shared " in c for c in commands].count(True) == 1
    assert sorted(c.rsplit("/", 1)[-1] for c in commands if " -shared " not in c) == [
        "byoc_entry.o",
        "byoc_workspace.o",
    ]
    assert all(line.startswith("byoc: [byoc.") for line in byoc_lines(err))  # the logger's name at -vv
    rc, _, err = run_cli(capsys, "run", "-vv", GUIDE)
    assert rc == 0
    assert any("cache hit" in line for line in byoc_lines(err))
    assert not any("compile command" in line for line in byoc_lines(err))


def test_q_and_v_together_are_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_cli(capsys, "run", "-q", "-v", GUIDE)
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command", ["parse", "ops", "backends", "check", "gen", "partition", "build", "import"]
)
def test_every_command_takes_v_and_q(capsys, command):
    with pytest.raises(SystemExit):
        run_cli(capsys, command, "--help")
    help_text = capsys.readouterr().out
    assert "-v, --verbose" in help_text and "-q, --quiet" in help_text


def test_the_command_line_leaves_the_byoc_logger_as_it_found_it(capsys):
    logger = logging.getLogger("byoc")
    handlers, level = list(logger.handlers), logger.level
    assert run_cli(capsys, "-vv", "parse", GUIDE)[0] == 0
    assert logger.handlers == handlers and logger.level == level


def test_an_embedding_program_hears_the_build_through_logging(caplog):
    with caplog.at_level(logging.INFO, logger="byoc"):
        model = byoc.build(GUIDE)
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("byoc")]
    assert placement_summary(model.placement) in messages and model.placement.get(None)
    assert any(m.startswith("generate: ") for m in messages)
    assert {r.name for r in caplog.records} >= {"byoc.building"}
