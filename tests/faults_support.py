"""Shared helpers of the fault tests (tests/test_faults_*.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def snapshot(directory: Path) -> dict[str, bytes] | None:
    """Every file of ``directory`` (None when it does not exist)."""
    if not directory.exists():
        return None
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def byoc_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "byoc", *args]


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def make_workdir(tmp_path_factory) -> Path:
    """A directory holding ``old.graph`` and ``new.graph``, for a module-scoped fixture."""
    d = tmp_path_factory.mktemp("faults")
    (d / "old.graph").write_text(GRAPH_OLD)
    (d / "new.graph").write_text(GRAPH_NEW)
    return d


def make_gen_outputs(workdir: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The complete old and new outputs of ``byoc gen -o``."""
    for name in ("old", "new"):
        assert run(byoc_cmd("gen", f"{name}.graph", "-o", f"ref_{name}"), workdir).returncode == 0
    old, new = snapshot(workdir / "ref_old"), snapshot(workdir / "ref_new")
    assert old and new and old != new and set(old) != set(new)
    return old, new


def make_build_outputs(workdir: Path) -> tuple[bytes, bytes]:
    for name in ("old", "new"):
        assert run(byoc_cmd("build", f"{name}.graph", "-o", f"ref_{name}.byoc"), workdir).returncode == 0
    old, new = (workdir / "ref_old.byoc").read_bytes(), (workdir / "ref_new.byoc").read_bytes()
    assert old != new
    return old, new
