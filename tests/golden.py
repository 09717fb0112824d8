"""syrupy single-file snapshot extensions: one readable file per generated artifact.

Snapshots live under ``tests/golden/<test module>/``, each named after its test and
with the artifact's own suffix (``.c``, ``.cc``, ``.json``, ``.examplejson``,
``.graph``, ``.dot``; ``.txt`` for printed reports), so a reviewer reads the generated code itself in ``git diff``.

Review workflow: change a spec or a generator, run ``python -m pytest
--snapshot-update``, read ``git diff tests/golden``, commit. Snapshots hold generated
text only; numeric correctness is checked by running the code, never here.
"""

from __future__ import annotations

from pathlib import Path

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

GOLDEN_DIR = Path(__file__).parent / "golden"


class _GoldenText(SingleFileSnapshotExtension):
    _write_mode = WriteMode.TEXT

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(GOLDEN_DIR / test_location.basename)


def _extension(suffix: str) -> type[_GoldenText]:
    return type(f"Golden_{suffix}", (_GoldenText,), {"file_extension": suffix})


EXTENSIONS: dict[str, type[_GoldenText]] = {
    suffix: _extension(suffix) for suffix in ("c", "cc", "h", "json", "examplejson", "graph", "dot", "txt")
}
"""Artifact suffix -> snapshot extension."""
