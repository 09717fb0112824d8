"""Make the bad inputs that are too large, binary or derived to commit as files.

``cases.yaml`` names a fixture by ``make: NAME``; ``FIXTURES[NAME](directory)``
writes the case's file(s) into ``directory`` (a fresh directory per case). The
files are deterministic: the same bytes on every run.

The fixtures are written by the ``make_*.py`` modules beside this file, one per kind
of input (:data:`FAMILIES`); ``FIXTURES`` gathers theirs. This module finds them
however it is loaded: run as a script, imported, or loaded from its path.

Run as a script to write every fixture for a look at it:

    .venv/bin/python tests/data/bad/make_fixtures.py /tmp/bad-fixtures
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded from its path (tests/test_onnx_hostile.py)
    sys.path.insert(0, str(HERE))

import make_bundles  # noqa: E402
import make_cli_inputs  # noqa: E402
import make_npz_inputs  # noqa: E402
import make_onnx_hostile  # noqa: E402
import make_onnx_models  # noqa: E402
import make_text_inputs  # noqa: E402
import make_weights  # noqa: E402

FAMILIES = (
    make_text_inputs,
    make_npz_inputs,
    make_bundles,
    make_cli_inputs,
    make_weights,
    make_onnx_models,
    make_onnx_hostile,
)
"""The modules that write the fixtures, each with its own ``FIXTURES``."""

FIXTURES: dict[str, Callable[[Path], None]] = {}
for _family in FAMILIES:
    _clash = set(FIXTURES) & set(_family.FIXTURES)
    assert not _clash, f"{_family.__name__}.py redefines fixtures {sorted(_clash)}"
    FIXTURES.update(_family.FIXTURES)


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path("bad-fixtures")
    for name, make in FIXTURES.items():
        target = out / name
        target.mkdir(parents=True, exist_ok=True)
        make(target)
        print(f"{target}: {', '.join(sorted(p.name for p in target.iterdir()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
