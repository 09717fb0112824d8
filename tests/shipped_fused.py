"""Copies of the shipped fused spec, for tests that change one thing in it: the YAML and
the C files beside it that it lists (``support: [fused_math.h]``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from compile_util import BYOC_SUPPORT

import byoc.spec

FUSED_FOLDER = Path(byoc.spec.SHIPPED_BACKENDS) / "fused"
FUSED_YAML = FUSED_FOLDER / "fused.yaml"


def write_fused_copy(folder: Path, text: str | None = None) -> Path:
    """``folder``/fused.yaml holding ``text`` (the shipped YAML when None) with the
    shipped support files beside it; returns the YAML's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for item in FUSED_FOLDER.iterdir():
        if item.is_file() and item.name != FUSED_YAML.name:
            shutil.copy(item, folder / item.name)
    target = folder / FUSED_YAML.name
    target.write_text(FUSED_YAML.read_text(encoding="utf-8") if text is None else text, encoding="utf-8")
    return target


SUPPORT = {item.name: item.read_text(encoding="utf-8") for item in sorted(FUSED_FOLDER.glob("*.h"))}
"""What compiling a fused module's text needs beside it, by name, besides byoc's support
files (which ``compile_util.compile_library`` adds): the shipped spec's headers."""


def module_of(artifacts):
    """The module artifact of a fused generator's output, checking that the rest are
    support files, byoc's and the spec's (no large-constant binaries)."""
    module, *rest = artifacts
    assert module.role == "module", module
    assert {a.name for a in rest} <= {*SUPPORT, *BYOC_SUPPORT} and set(SUPPORT) <= {a.name for a in rest}, (
        rest
    )
    return module
