"""Faults: killed writers, corrupted caches, full disks, unwritable outputs, threads.

* **Killed mid-write.** ``byoc gen -o DIR`` and ``byoc build -o FILE`` run in a
  subprocess that SIGKILLs itself at its k-th file-system step inside byoc's atomic
  writers (tests/kill_at_step.py), for every k; plus external SIGKILLs after a
  range of delays. The output is then always the old one or the complete new one.
* **Corrupted caches**: compile-cache entries and unpacked bundle libraries broken
  on disk in several ways are detected and rebuilt.
* **A full disk** (ENOSPC injected into the writers) and **unwritable outputs**
  (under /proc, which even root cannot write; a file where a directory should be;
  EROFS injected) give a clear error and leave nothing behind.
* **Threads**: one compiled module, interpreter or model called from several
  threads at once gives every caller its own correct result.
"""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import byoc
import byoc.runtime
from byoc import cli
from byoc.atomic import write_directory, write_file
from byoc.building import build
from byoc.errors import BuildError, RuntimeFailure, UsageError

TESTS = Path(__file__).resolve().parent
KILLER = TESTS / "kill_at_step.py"

GRAPH_OLD = """\
graph main(x: float32[3, 4], y: float32[3, 4]) {
  s = @json { return add(x, y) }
  return s
}
"""
GRAPH_NEW = """\
graph main(x: float32[3, 4], y: float32[3, 4]) {
  s, t = @json {
    k = const float32[3, 4] 0.25
    return multiply(add(x, y), k), relu(x)
  }
  return s, subtract(t, y)
}
graph other(a: float32[5]) {
  r = @examplejson { return multiply(a, a) }
  return negative(r)
}
"""
"""The old and the new output differ in every file and in the set of files."""

TIMED_KILL_DELAYS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""Seconds after the start at which an external SIGKILL hits ``byoc gen`` / ``byoc build``."""


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BYOC_CACHE_DIR", str(tmp_path_factory.mktemp("byoc-cache")))
        yield


def snapshot(directory: Path) -> dict[str, bytes] | None:
    """Every file of ``directory`` (None when it does not exist)."""
    if not directory.exists():
        return None
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def byoc_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "byoc", *args]


def killer_cmd(kill_at: int, *args: str) -> list[str]:
    return [sys.executable, str(KILLER), str(kill_at), *args]


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def steps_of(cwd: Path, *args: str, env: dict[str, str] | None = None) -> int:
    """How many file-system steps the write of ``byoc ARGS`` takes (a run without a kill)."""
    proc = run(killer_cmd(0, *args), cwd, env)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stderr.strip().splitlines()[-1].split()[-1])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("faults")
    (d / "old.graph").write_text(GRAPH_OLD)
    (d / "new.graph").write_text(GRAPH_NEW)
    return d


@pytest.fixture(scope="module")
def gen_outputs(workdir) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The complete old and new outputs of ``byoc gen -o``."""
    for name in ("old", "new"):
        assert run(byoc_cmd("gen", f"{name}.graph", "-o", f"ref_{name}"), workdir).returncode == 0
    old, new = snapshot(workdir / "ref_old"), snapshot(workdir / "ref_new")
    assert old and new and old != new and set(old) != set(new)
    return old, new


@pytest.fixture(scope="module")
def build_outputs(workdir) -> tuple[bytes, bytes]:
    for name in ("old", "new"):
        assert run(byoc_cmd("build", f"{name}.graph", "-o", f"ref_{name}.byoc"), workdir).returncode == 0
    old, new = (workdir / "ref_old.byoc").read_bytes(), (workdir / "ref_new.byoc").read_bytes()
    assert old != new
    return old, new


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


# ------------------------------------------------------------------ corrupted caches


LIBRARY_GRAPH = (
    "graph main(x: float32[4], y: float32[4]) {\n  s = @ccompiler { return add(x, y) }\n  return s\n}\n"
)


def _corrupt_truncate(lib: Path) -> None:
    lib.write_bytes(lib.read_bytes()[:100])


def _corrupt_flip(lib: Path) -> None:
    data = bytearray(lib.read_bytes())
    data[len(data) // 2] ^= 0xFF
    lib.write_bytes(bytes(data))


def _corrupt_checksum(lib: Path) -> None:
    (lib.parent / f"{lib.name}.sha256").write_text("not a digest\n")


def _corrupt_delete(lib: Path) -> None:
    lib.unlink()


def _corrupt_entry_is_a_file(lib: Path) -> None:
    entry = lib.parent
    for p in sorted(entry.rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() else p.unlink()
    entry.rmdir()
    entry.write_text("a file where the entry directory was\n")


def _corrupt_library_is_a_directory(lib: Path) -> None:
    lib.unlink()
    lib.mkdir()
    (lib / "junk").write_text("x")


CACHE_CORRUPTIONS = {
    "truncated-library": _corrupt_truncate,
    "bit-flipped-library": _corrupt_flip,
    "garbage-checksum": _corrupt_checksum,
    "deleted-library": _corrupt_delete,
    "entry-is-a-file": _corrupt_entry_is_a_file,
    "library-is-a-directory": _corrupt_library_is_a_directory,
}


def _cache_entries(root: Path) -> list[Path]:
    return sorted(root.glob("??/*/lib*.so"))


def _assert_valid(lib: Path) -> None:
    recorded = (lib.parent / f"{lib.name}.sha256").read_text().strip()
    assert lib.is_file() and hashlib.sha256(lib.read_bytes()).hexdigest() == recorded


@pytest.mark.parametrize("corrupt", CACHE_CORRUPTIONS, ids=list(CACHE_CORRUPTIONS))
def test_corrupted_compile_cache_entry_is_rebuilt(corrupt, tmp_path):
    """The library is built and used by one `byoc run`, broken on disk here (never
    loaded into this process: rewriting a loaded library in place is a SIGBUS), and
    the next `byoc run` detects it, rebuilds the entry and runs correctly."""
    env = dict(os.environ, BYOC_CACHE_DIR=str(tmp_path / "cache"))
    (tmp_path / "g.graph").write_text(LIBRARY_GRAPH)
    assert run(byoc_cmd("run", "g.graph"), tmp_path, env).returncode == 0
    (lib,) = _cache_entries(tmp_path / "cache")
    good = lib.read_bytes()
    CACHE_CORRUPTIONS[corrupt](lib)
    proc = run(byoc_cmd("run", "g.graph"), tmp_path, env)
    assert proc.returncode == 0 and "every output matches" in proc.stdout, proc.stderr
    assert _cache_entries(tmp_path / "cache") == [lib] and lib.read_bytes() == good
    _assert_valid(lib)


BUNDLE_CORRUPTIONS = ("truncated-library", "bit-flipped-library", "library-is-a-directory")


@pytest.mark.parametrize("corrupt", BUNDLE_CORRUPTIONS)
def test_corrupted_unpacked_bundle_library_is_replaced(corrupt, tmp_path):
    """A bundle's library is unpacked into the cache under its sha256; a broken copy
    there is detected and unpacked again."""
    env = dict(os.environ, BYOC_CACHE_DIR=str(tmp_path / "cache"))
    (tmp_path / "g.graph").write_text(LIBRARY_GRAPH)
    assert run(byoc_cmd("build", "g.graph", "-o", "m.byoc"), tmp_path, env).returncode == 0
    assert run(byoc_cmd("run", "m.byoc"), tmp_path, env).returncode == 0
    (lib,) = (tmp_path / "cache" / "bundles").glob("??/*/lib*.so")
    good = lib.read_bytes()
    CACHE_CORRUPTIONS[corrupt](lib)
    proc = run(byoc_cmd("run", "m.byoc"), tmp_path, env)
    assert proc.returncode == 0 and "every output matches" in proc.stdout, proc.stderr
    assert lib.read_bytes() == good


# ------------------------------------------------------------------ full disk, read-only


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _erofs(*args, **kwargs):
    raise OSError(errno.EROFS, os.strerror(errno.EROFS))


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


FULL_DISK_WRITERS = ("gen -o DIR", "build -o FILE", "compile cache", "bundle unpack")


def test_full_disk_on_gen_keeps_the_old_output(workdir, gen_outputs, tmp_path, monkeypatch, capsys):
    old, _ = gen_outputs
    target = tmp_path / "out"
    write_directory(target, {"old.txt": "old"})
    before = snapshot(target)
    monkeypatch.setattr(os, "fsync", _enospc)
    rc = cli.main(["gen", str(workdir / "new.graph"), "-o", str(target)])
    err = capsys.readouterr().err
    assert rc == 2 and "usage error: cannot write" in err and "No space left on device" in err, err
    assert snapshot(target) == before and _leftovers(tmp_path) == []


def test_full_disk_on_build_keeps_the_old_bundle(workdir, build_outputs, tmp_path, monkeypatch, capsys):
    old, _ = build_outputs
    target = tmp_path / "m.byoc"
    target.write_bytes(old)
    monkeypatch.setattr(os, "fsync", _enospc)
    rc = cli.main(["build", str(workdir / "new.graph"), "-o", str(target)])
    err = capsys.readouterr().err
    assert rc == 2 and "No space left on device" in err and "Traceback" not in err, err
    assert target.read_bytes() == old and _leftovers(tmp_path) == []


def test_full_disk_in_the_compile_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "g.graph"
    source.write_text(LIBRARY_GRAPH)
    monkeypatch.setattr(Path, "write_text", _enospc)
    with pytest.raises(BuildError) as info:
        build(source)
    assert "No space left on device" in info.value.message and "BYOC_CACHE_DIR" in info.value.hint
    monkeypatch.undo()
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    assert not list((tmp_path / "cache" / "tmp").iterdir())  # no half-built entry
    assert len(build(source).modules) == 1  # and the next build works


def test_full_disk_when_unpacking_a_bundle(tmp_path, monkeypatch):
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "g.graph"
    source.write_text(LIBRARY_GRAPH)
    build(source).save(tmp_path / "m.byoc")
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache2"))
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: Full(real_fdopen(fd, *a, **k)))
    with pytest.raises(RuntimeFailure, match="No space left on device"):
        byoc.runtime.load(tmp_path / "m.byoc")
    assert not [p for p in (tmp_path / "cache2").rglob(".lib.*")]


READ_ONLY_COMMANDS = ("gen", "build")


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS)
def test_read_only_file_system(command, workdir, tmp_path, monkeypatch, capsys):
    """EROFS from the file system (root ignores permission bits, so it is injected)."""
    monkeypatch.setattr("tempfile.mkdtemp", _erofs)
    monkeypatch.setattr("tempfile.mkstemp", _erofs)
    out = tmp_path / ("out" if command == "gen" else "m.byoc")
    rc = cli.main([command, str(workdir / "old.graph"), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "Read-only file system" in err and "Traceback" not in err, err
    assert not out.exists()


UNWRITABLE_OUTPUTS = (
    ("gen", "/proc/byoc-out", "cannot write /proc/byoc-out"),
    ("build", "/proc/byoc.byoc", "cannot write /proc/byoc.byoc"),
    ("gen", "{work}/old.graph/out", "cannot create"),
    ("build", "{work}/old.graph/m.byoc", "does not exist"),
    ("build", "{fifo}", "not a regular file"),
)


@pytest.mark.parametrize(("command", "output", "message"), UNWRITABLE_OUTPUTS)
def test_unwritable_outputs_in_a_subprocess(command, output, message, workdir, tmp_path):
    """Outputs no user can write (even root: /proc, a path under a file) and a
    special file that must not be replaced: exit 2, a clear message, no traceback."""
    fifo = tmp_path / "pipe.byoc"
    os.mkfifo(fifo)
    out = output.format(work=workdir, fifo=fifo)
    proc = run(byoc_cmd(command, "old.graph", "-o", out), workdir)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("usage error:") and message in proc.stderr, proc.stderr
    assert fifo.exists() and not fifo.is_file()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
def test_permission_denied(workdir, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        rc = cli.main(["gen", str(workdir / "old.graph"), "-o", str(locked / "out")])
        assert rc == 2 and "permission denied" in capsys.readouterr().err
    finally:
        locked.chmod(0o755)


def test_write_file_refuses_special_files(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        write_file(fifo, b"data")


# ------------------------------------------------------------------ threads

THREADS = 8
CALLS = 40

THREAD_GRAPH = """\
graph main(x: float32[64, 33], y: float32[64, 33]) {
  s = @BACKEND {
    k = const float32[64, 33] 0.5
    return multiply(subtract(add(x, y), k), y)
  }
  return s
}
"""
THREAD_BACKENDS = ("ccompiler", "engine", "fused", "json", "examplejson")
"""Modules called from several threads at once: compiled libraries (C, C++, fused C)
and the two interpreters."""


def _hammer(call) -> None:
    """Run ``call(seed)`` from THREADS threads CALLS times each; every result is checked."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def worker(t: int) -> None:
        try:
            barrier.wait()
            for i in range(CALLS):
                call(t * 1000 + i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:3]


def _expected(x, y):
    return ((x + y) - np.float32(0.5)) * y


@pytest.mark.parametrize("backend", THREAD_BACKENDS)
def test_module_functions_from_several_threads(backend, tmp_path):
    spec = Path(byoc.spec.__file__).parent / "backends" / f"{backend}.yaml"
    if not spec.exists():
        pytest.skip(f"no {backend} backend")
    if backend == "examplejson":  # no constants in ExampleJSON regions
        text = THREAD_GRAPH.replace("    k = const float32[64, 33] 0.5\n", "").replace(", k)", ", y)")
        expected = lambda x, y: ((x + y) - y) * y  # noqa: E731
    else:
        text, expected = THREAD_GRAPH, _expected
    program = byoc.parse(text.replace("BACKEND", backend))
    model = build(program, options={"engine.opt_level": "0"} if backend == "engine" else None)
    (module,) = model.modules[-1:]
    symbol = next(iter(module.symbols()))
    fn = module.get_function(symbol)

    def call(seed: int) -> None:
        rng = np.random.default_rng(seed)
        x, y = (rng.uniform(-2, 2, (64, 33)).astype(np.float32) for _ in range(2))
        out = np.empty((64, 33), np.float32)
        fn(x, y, out)
        np.testing.assert_allclose(out, expected(x, y), rtol=1e-6)

    _hammer(call)


def test_model_calls_from_several_threads(tmp_path):
    """A model (its executor owns the storage) serialises whole calls: each caller gets
    the result for its own inputs."""
    text = THREAD_GRAPH.replace("BACKEND", "ccompiler").replace("return s\n", "return s, add(s, x)\n")
    model = build(byoc.parse(text))

    def call(seed: int) -> None:
        rng = np.random.default_rng(seed)
        x, y = (rng.uniform(-2, 2, (64, 33)).astype(np.float32) for _ in range(2))
        s, t = model(x=x, y=y)
        np.testing.assert_allclose(s, _expected(x, y), rtol=1e-6)
        np.testing.assert_allclose(t, _expected(x, y) + x, rtol=1e-6)

    _hammer(call)
