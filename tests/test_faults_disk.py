"""Faults: corrupted caches, a full disk, read-only file systems and unwritable outputs."""

# Compile-cache entries and unpacked bundle libraries broken on disk in several ways
# are detected and rebuilt. A full disk (ENOSPC injected into the writers) and
# unwritable outputs (under /proc, which even root cannot write; a file where a
# directory should be; EROFS injected) give a clear error and leave nothing behind.

from __future__ import annotations

import errno
import hashlib
import os
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
from byoc import cli
from byoc.atomic import write_directory, write_file
from byoc.building import build
from byoc.errors import BuildError, RuntimeFailure, UsageError


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return make_workdir(tmp_path_factory)


@pytest.fixture(scope="module")
def gen_outputs(workdir) -> tuple[dict[str, bytes], dict[str, bytes]]:
    return make_gen_outputs(workdir)


@pytest.fixture(scope="module")
def build_outputs(workdir) -> tuple[bytes, bytes]:
    return make_build_outputs(workdir)


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
