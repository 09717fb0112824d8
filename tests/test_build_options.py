"""Per-build options (``--option``, ``build(options=...)``) reach the generators and
the compiler, and bad ones are located errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import run_cli
from partition_support import (
    PLAIN_GRAPH,
    SHIPPED_SPECS,
    assert_guide_runs,
)

import byoc.runtime.build
from byoc.api import load_backend
from byoc.building import build
from byoc.errors import UsageError

# ------------------------------------------------------------------ options per build


@pytest.fixture
def compiles(monkeypatch) -> list[tuple[str, ...]]:
    """The compiler flags of every library build_artifacts compiles (not of the support
    objects the libraries link)."""
    seen: list[tuple[str, ...]] = []
    original = byoc.runtime.build.build_library

    def recording(sources, main, chain, **kwargs):
        if not kwargs.get("object_file"):
            seen.append(chain.flags)
        return original(sources, main, chain, **kwargs)

    monkeypatch.setattr(byoc.runtime.build, "build_library", recording)
    return seen


def test_options_reach_the_compiler(compiles):
    build(PLAIN_GRAPH, backends=["ccompiler"])
    build(PLAIN_GRAPH, backends=["ccompiler"], options={"opt_level": "0"})
    build(PLAIN_GRAPH, backends=["ccompiler"], options={"ccompiler.opt_level": "3"})
    assert len(compiles) == 3
    assert "-O2" in compiles[0] and "-ffast-math" not in compiles[0]
    assert "-O0" in compiles[1] and "-O2" not in compiles[1]
    assert "-O3" in compiles[2]


class _Stop(Exception):
    pass


def test_boolean_option_adds_flags(monkeypatch):
    """fast_math=true adds the spec's option_flags. The library is neither compiled
    nor loaded here: only the command line is wanted."""
    seen = []

    def stop(sources, main, chain, **kwargs):
        seen.append(chain.flags)
        raise _Stop

    monkeypatch.setattr(byoc.runtime.build, "build_library", stop)
    with pytest.raises(_Stop):
        build(PLAIN_GRAPH, backends=["ccompiler"], options={"fast_math": "yes", "opt_level": "1"})
    with pytest.raises(_Stop):
        build(PLAIN_GRAPH, backends=["ccompiler"], options={"fast_math": "no"})
    extra = load_backend("ccompiler").compile.option_flags["fast_math"]
    assert extra
    on, off = seen
    assert set(extra) <= set(on) and "-O1" in on
    assert not set(extra) & set(off) and "-O2" in off


def test_cli_options_reach_the_compiler(compiles, capsys, tmp_path):
    out_file = tmp_path / "g.byoc"
    rc, out, err = run_cli(
        capsys, "build", PLAIN_GRAPH, "--backend", "ccompiler", "--option", "opt_level=1", "-o", out_file
    )
    assert rc == 0, err
    assert "-O1" in compiles[-1]
    rc, out, err = run_cli(capsys, "run", PLAIN_GRAPH, "--backend", "ccompiler", "--option", "opt_level=0")
    assert rc == 0, err
    assert "-O0" in compiles[-1]


def test_options_reach_the_generators(capsys):
    def text(options):
        model = build(PLAIN_GRAPH, backends=["examplejson"], options=options)
        return model.members["examplejson.examplejson"].decode()

    default, wide = text(None), text({"indent": "4"})
    assert "\n  input 0 10 10" in default and "\n    input 0 10 10" not in default
    assert "\n    input 0 10 10" in wide
    assert text({"examplejson.indent": "0"}).count("\ninput ") == 4 + 4 + 3  # inputs of the 3 regions
    # the same through the command line
    rc, out, err = run_cli(capsys, "gen", PLAIN_GRAPH, "--backend", "examplejson", "--option", "indent=8")
    assert rc == 0, err
    assert "\n        input 0 10 10" in out
    # json's indent
    compact = build(PLAIN_GRAPH, backends=["json"], options={"indent": "0"}).members["json.json"].decode()
    pretty = build(PLAIN_GRAPH, backends=["json"]).members["json.json"].decode()
    assert compact != pretty and "\n  " in pretty and "\n  " not in compact


def spec_line(name: str, needle: str) -> int:
    lines = (SHIPPED_SPECS / f"{name}.yaml").read_text().splitlines()
    return next(k for k, line in enumerate(lines, 1) if line.startswith(needle))


BAD_OPTIONS = [
    ("opt_level=fast", "option opt_level of backend ccompiler: 'fast' is not an integer", "  opt_level:"),
    ("opt_level=9", "option opt_level of backend ccompiler: 9 is not one of 0, 1, 2, 3", "  opt_level:"),
    ("ccompiler.fast_math=maybe", "'maybe' is not a boolean", "  fast_math:"),
    ("ccompiler.unroll=4", "backend ccompiler has no option 'unroll'", "  opt_level:"),
    ("unroll=4", "--option unroll: no backend of this build has that option", "  opt_level:"),
]


@pytest.mark.parametrize(
    ("option", "guess"),
    [("opt_levl=2", "did you mean 'opt_level'?"), ("ccompiler.fastmath=1", "did you mean 'fast_math'?")],
)
def test_a_misspelt_option_gets_a_did_you_mean(option, guess, capsys):
    rc, out, err = run_cli(capsys, "gen", PLAIN_GRAPH, "--backend", "ccompiler", "--option", option)
    assert rc == 2 and "Traceback" not in err
    assert f"hint: {guess} " in err


@pytest.mark.parametrize(("option", "message", "line"), BAD_OPTIONS)
def test_bad_options_are_located_errors(option, message, line, capsys):
    for command in ("run", "gen"):
        rc, out, err = run_cli(capsys, command, PLAIN_GRAPH, "--backend", "ccompiler", "--option", option)
        assert rc == 2, out + err
        assert "Traceback" not in err
        assert message in err
        where = f"ccompiler.yaml:{spec_line('ccompiler', line)}:3"
        assert where in err, err
        assert f"{spec_line('ccompiler', line)} | {line}" in err  # the caret excerpt
        assert "hint:" in err
    key, _, value = option.partition("=")
    with pytest.raises(UsageError, match=re.escape(message)) as info:
        build(PLAIN_GRAPH, backends=["ccompiler"], options={key: value})
    loc = info.value.location
    assert loc is not None and Path(loc.file).name == "ccompiler.yaml"
    assert (loc.line, loc.column) == (spec_line("ccompiler", line), 3)


def test_option_for_a_backend_not_in_the_build(capsys):
    rc, out, err = run_cli(
        capsys, "run", PLAIN_GRAPH, "--backend", "ccompiler", "--option", "examplejson.indent=4"
    )
    assert rc == 2 and "backend 'examplejson' is not used by this build" in err
    assert "Traceback" not in err


def test_python_typed_options():
    with pytest.raises(UsageError, match="must be int, got 1.5") as info:
        build(PLAIN_GRAPH, backends=["ccompiler"], options={"opt_level": 1.5})
    assert info.value.location.line == spec_line("ccompiler", "  opt_level:")
    assert_guide_runs(["ccompiler"], options={"opt_level": 1, "fast_math": False})
