"""Shared helpers of the .byoc bundle tests (test_bundle*.py)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from byoc.building import build

GRAPH = """\
graph main(x: float32[3, 4], y: float32[3, 4]) {
  s = @BACKEND {
    k = const float32[3, 4] 0.5
    return multiply(add(x, y), k)
  }
  h = subtract(s, y)
  return s, h
}
"""


def make_bundle(backend: str, tmp_path_factory) -> Path:
    """A bundle of ``GRAPH`` offloaded to ``backend``, written by ``Model.save``."""
    out = tmp_path_factory.mktemp(f"bundle_{backend}")
    source = out / "g.graph"
    source.write_text(GRAPH.replace("@BACKEND", f"@{backend}"))
    path = out / "model.byoc"
    build(source).save(path)
    return path


def entries(path: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(path) as archive:
        return [(name, archive.read(name)) for name in archive.namelist()]


def write_zip(path: Path, items, compression=zipfile.ZIP_DEFLATED) -> Path:
    """A zip holding ``items`` ((name, bytes) pairs, in order), crafted by hand."""
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for name, data in items:
            archive.writestr(zipfile.ZipInfo(name), data)
    return path
