"""The CLI fork server (tests/cli_forks.py) that runs most bad-input cases reports what
a process of the command's own reports: the exit status, both streams, a traceback and
status 1 for an uncaught exception, minus the signal that killed it, and a timeout."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cli_forks import fork_servers
from conftest import EXAMPLES

GRAPH = "graph main(x: float32[4]) {\n  y = relu(x\n  return y\n}\n"


@pytest.fixture
def servers(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "BYOC_SPEC_PATH"}
    env["BYOC_CACHE_DIR"] = str(tmp_path / "cache")
    with fork_servers(1, env, tmp_path) as running:
        yield running, env


@pytest.mark.parametrize(
    "args",
    [
        ["parse", "bad.graph"],  # a located ParseError
        ["run", "bad.graph", "--backend", "nonesuch"],  # a usage error
        ["parse", "--frobnicate"],  # argparse's own
        ["parse", str(EXAMPLES / "guide_whole_graph.graph")],  # success: the graph on stdout
    ],
    ids=["parse-error", "usage-error", "argparse", "success"],
)
def test_a_forked_command_reports_what_its_own_process_reports(tmp_path, servers, args):
    running, env = servers
    (tmp_path / "bad.graph").write_text(GRAPH)
    own = subprocess.run(
        [sys.executable, "-m", "byoc", *args],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    got = running.run(args, tmp_path, tmp_path / "streams", 60)
    assert (got.returncode, got.stdout, got.stderr) == (own.returncode, own.stdout, own.stderr)
    assert got.stdout or got.stderr


@pytest.mark.parametrize(
    ("main", "returncode", "stderr"),
    [
        ("raise ValueError('boom')", 1, "Traceback"),
        ("import sys\nsys.exit('a message')", 1, "a message"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", -9, ""),
        ("import time\ntime.sleep(60)", -9, ""),
        ("import sys\nprint('out'); print('err', file=sys.stderr)", 0, "err"),
    ],
    ids=["uncaught", "exit-message", "signal", "timeout", "clean"],
)
def test_a_crash_a_signal_and_a_timeout(tmp_path, servers, main, returncode, stderr):
    """The server reports what the interpreter would: a traceback and 1 for an uncaught
    exception, SystemExit's message and 1, minus the signal, and kills at the timeout."""
    running, _ = servers
    (tmp_path / "forked_main.py").write_text(main + "\n")
    got = running.run([], tmp_path, tmp_path / "streams", 2, module="forked_main")
    assert got.returncode == returncode
    assert stderr in got.stderr
    assert got.seconds < 30
