"""A test kit for backend vendors: the conformance sweep and golden-file helpers.

* :func:`sweep` (``byoc sweep``): every op a backend's spec maps, at every dtype and
  rank it allows, drawn at random (:mod:`byoc.testing.sweep_cases`, by
  :mod:`byoc.testing.draft`), built as one module, run and compared with the numpy
  reference (:mod:`byoc.testing.sweep`, reported by :mod:`byoc.testing.sweep_report`);
* :func:`generated_artifacts`: a graph's generated files as text that is the same on
  every machine, for golden-file tests (syrupy, say);
* :func:`assert_matches_reference`: build a graph for a backend, run it on random (or
  given) inputs and compare every output with the reference.

spec/README.md ("Testing your backend") shows both in a vendor's own test suite.
"""

from __future__ import annotations

from .compare import TOLERANCE, check_close, mismatch
from .golden import assert_matches_reference, generated_artifacts
from .sweep import sweep
from .sweep_report import SweepReport

__all__ = [
    "TOLERANCE",
    "SweepReport",
    "assert_matches_reference",
    "check_close",
    "generated_artifacts",
    "mismatch",
    "sweep",
]
