"""Faults: byoc gen and byoc build killed at every file-system step and after a delay."""

# ``byoc gen -o DIR`` and ``byoc build -o FILE`` run in a subprocess that SIGKILLs
# itself at its k-th file-system step inside byoc's atomic writers
# (tests/kill_at_step.py), for every k; plus external SIGKILLs after a range of
# delays. The output is then always the old one or the complete new one.

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from faults_support import (
    byoc_cmd,
    make_build_outputs,
    make_gen_outputs,
    make_workdir,
    run,
    snapshot,
)

import byoc.runtime

TESTS = Path(__file__).resolve().parent
KILLER = TESTS / "kill_at_step.py"

TIMED_KILL_DELAYS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""Seconds after the start at which an external SIGKILL hits ``byoc gen`` / ``byoc build``."""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return make_workdir(tmp_path_factory)


@pytest.fixture(scope="module")
def gen_outputs(workdir) -> tuple[dict[str, bytes], dict[str, bytes]]:
    return make_gen_outputs(workdir)


@pytest.fixture(scope="module")
def build_outputs(workdir) -> tuple[bytes, bytes]:
    return make_build_outputs(workdir)


def killer_cmd(kill_at: int, *args: str) -> list[str]:
    return [sys.executable, str(KILLER), str(kill_at), *args]


def steps_of(cwd: Path, *args: str, env: dict[str, str] | None = None) -> int:
    """How many file-system steps the write of ``byoc ARGS`` takes (a run without a kill)."""
    proc = run(killer_cmd(0, *args), cwd, env)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stderr.strip().splitlines()[-1].split()[-1])


def _fresh_gen_target(workdir: Path, old: dict[str, bytes] | None, name: str) -> Path:
    """``workdir/name`` holding exactly ``old`` (a complete earlier output), or absent."""
    target = workdir / name
    if target.exists():
        for p in target.iterdir():
            p.unlink()
        target.rmdir()
    if old is not None:
        target.mkdir()
        for file, data in old.items():
            (target / file).write_bytes(data)
    return target


def _parallel(jobs):
    """Run the zero-argument callables ``jobs`` on a few threads (each starts a subprocess)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda job: job(), jobs))


@pytest.mark.parametrize("existing", [True, False], ids=["replacing", "new-directory"])
def test_gen_killed_at_every_step_leaves_old_or_new(workdir, gen_outputs, existing):
    """Killed before each of its n file-system steps (k = 1..n), and not at all (k = n+1)."""
    old, new = gen_outputs
    before = old if existing else None
    _fresh_gen_target(workdir, before, f"probe_{existing}")
    n = steps_of(workdir, "gen", "new.graph", "-o", f"probe_{existing}")
    assert n >= 8  # a staging directory, files written and synced, the swap
    targets = {k: _fresh_gen_target(workdir, before, f"out_{existing}_{k}") for k in range(1, n + 2)}
    procs = _parallel(
        [lambda k=k: run(killer_cmd(k, "gen", "new.graph", "-o", targets[k].name), workdir) for k in targets]
    )
    outcomes = []
    for (k, target), proc in zip(targets.items(), procs):
        assert proc.returncode == (0 if k == n + 1 else -signal.SIGKILL), (k, proc.stderr)
        state = snapshot(target)
        assert state in (before, new), f"killed at step {k}: partial output {sorted(state or ())}"
        outcomes.append("new" if state == new else "old" if state is not None else "absent")
    assert outcomes[-1] == "new" and outcomes[0] == ("old" if existing else "absent")
    # the next run recovers, whatever a kill left behind (hidden .tmp siblings at most)
    for k in (1, n // 2, n):
        assert run(byoc_cmd("gen", "new.graph", "-o", targets[k].name), workdir).returncode == 0
        assert snapshot(targets[k]) == new
    assert not [p for p in workdir.iterdir() if p.name.startswith("out_") and p.suffix == ".tmp"]


def test_build_killed_at_every_step_leaves_old_or_new(workdir, build_outputs):
    old, new = build_outputs
    (workdir / "probe.byoc").write_bytes(old)
    n = steps_of(workdir, "build", "new.graph", "-o", "probe.byoc")
    assert n >= 3
    targets = {k: workdir / f"out_{k}.byoc" for k in range(1, n + 2)}
    for target in targets.values():
        target.write_bytes(old)
    procs = _parallel(
        [
            lambda k=k: run(killer_cmd(k, "build", "new.graph", "-o", targets[k].name), workdir)
            for k in targets
        ]
    )
    outcomes = []
    for (k, target), proc in zip(targets.items(), procs):
        assert proc.returncode == (0 if k == n + 1 else -signal.SIGKILL), (k, proc.stderr)
        state = target.read_bytes()
        assert state in (old, new), f"killed at step {k}: a partial bundle"
        outcomes.append(state == new)
        byoc.runtime.load(target)  # whichever it is, it loads
    assert outcomes[0] is False and outcomes[-1] is True


def _timed_kill(cmd: list[str], cwd: Path, delay: float) -> int:
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    return proc.wait(timeout=60)


def test_gen_and_build_killed_after_a_delay(workdir, gen_outputs, build_outputs):
    """External SIGKILLs at delays spread over a whole run (no hooks at all)."""
    old, new = gen_outputs
    old_bundle, new_bundle = build_outputs
    jobs = []
    for i, delay in enumerate(TIMED_KILL_DELAYS):
        target = _fresh_gen_target(workdir, old, f"timed_{i}")
        bundle = workdir / f"timed_{i}.byoc"
        bundle.write_bytes(old_bundle)
        jobs.append(
            lambda t=target, d=delay: _timed_kill(byoc_cmd("gen", "new.graph", "-o", t.name), workdir, d)
        )
        jobs.append(
            lambda b=bundle, d=delay: _timed_kill(byoc_cmd("build", "new.graph", "-o", b.name), workdir, d)
        )
    _parallel(jobs)
    for i, delay in enumerate(TIMED_KILL_DELAYS):
        assert snapshot(workdir / f"timed_{i}") in (old, new), delay
        assert (workdir / f"timed_{i}.byoc").read_bytes() in (old_bundle, new_bundle), delay


def test_swap_without_renameat2_never_loses_the_old_output(workdir, gen_outputs):
    """Where an atomic exchange is unavailable, a kill between the two renames leaves
    the target absent, with the old output kept whole beside it (documented)."""
    old, new = gen_outputs
    env = dict(os.environ, BYOC_TEST_NO_EXCHANGE="1")
    _fresh_gen_target(workdir, old, "probe_fallback")
    n = steps_of(workdir, "gen", "new.graph", "-o", "probe_fallback", env=env)
    targets = {k: _fresh_gen_target(workdir, old, f"fallback_{k}") for k in range(1, n + 1)}
    procs = _parallel(
        [
            lambda k=k: run(killer_cmd(k, "gen", "new.graph", "-o", targets[k].name), workdir, env)
            for k in targets
        ]
    )
    absent = 0
    for (k, target), proc in zip(targets.items(), procs):
        assert proc.returncode == -signal.SIGKILL
        state = snapshot(target)
        if state is None:
            absent += 1
            kept = list(workdir.glob(f".{target.name}.*.old/previous"))
            assert [snapshot(p) for p in kept] == [old], k
        else:
            assert state in (old, new), k
    assert absent == 1  # exactly the kill between the two renames
