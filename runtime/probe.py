"""Run a backend's ``probe:`` (:mod:`byoc.spec.probe`): which of its machine-dependent
dtypes this machine computes.

The probe's source is compiled as the spec compiles its modules (its ``compile:``
settings, with the option defaults, and its ``requires:`` libraries), into the build
cache like any module, then loaded and asked once per dtype. Answers are kept for the
process: the CPU does not change under it. A backend whose libraries are not installed
computes none of them (its build would fail anyway, and says why).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from byoc.ir import Function
    from byoc.spec.backend import BackendSpec

SOURCE_NAME = "byoc_probe.c"

_answers: dict[tuple[str, str, str], bool] = {}


def machine_computes(spec: BackendSpec, dtype: str) -> bool:
    """Whether this machine computes ``dtype`` on ``spec``'s backend: True for a dtype
    the spec lists and does not probe, the probe's answer for one it probes."""
    if dtype not in spec.dtypes:
        return False
    probe = spec.probe
    if probe is None or dtype not in probe.dtypes:
        return True
    key = (spec.name, probe.source, dtype)
    if key not in _answers:
        probe_fn = probe_function(spec)
        _answers[key] = probe_fn is not None and bool(probe_fn(dtype.encode("ascii")))
    return _answers[key]


def lacking(spec: BackendSpec, used: Iterable[str]) -> set[str]:
    """The probed dtypes among ``used`` (the dtypes a graph has) that this machine does
    not compute on ``spec``'s backend. Only the dtypes in ``used`` are probed, so a
    graph without them never compiles the probe."""
    probed = {d for d in used if spec.probe is not None and d in spec.probe.dtypes}
    return {d for d in probed if not machine_computes(spec, d)}


def for_machine(spec: BackendSpec, used: Iterable[str]) -> BackendSpec:
    """``spec`` without the dtypes :func:`lacking` finds among ``used``; the same spec
    when it drops none."""
    dropped = lacking(spec, used)
    if not dropped:
        return spec
    return replace(spec, dtypes=tuple(d for d in spec.dtypes if d not in dropped))


def check_regions(spec: BackendSpec, regions: Iterable[Function]) -> None:
    """Raise a UsageError at the first of ``spec``'s ``regions`` (its functions in a
    build) with a value of a probed dtype this machine does not compute: its module
    would fail where it is loaded."""
    from byoc.errors import UsageError

    if spec.probe is None:
        return
    for fn in regions:
        for name, t in fn.types().items():
            if t.dtype in spec.probe.dtypes and not machine_computes(spec, t.dtype):
                raise UsageError(
                    f"backend {spec.name} does not compute {t.dtype} on this machine ({name}: {t})",
                    fn.loc,
                    hint=f"its probe: {spec.probe.doc} Leave the region out and partition with "
                    f"--backend {spec.name} --backend fused: nodes of {t.dtype} then go to fused",
                )


def probe_function(spec: BackendSpec):
    """The loaded ``byoc_probe`` of ``spec``, or None when its libraries are missing."""
    from byoc.spec.probe import PROBE_FUNCTION
    from byoc.spec.requirements import NotFound

    from .build import build_spec_module

    assert spec.probe is not None
    try:
        linkages = [r.locate() for r in spec.requires.values()]
    except NotFound:
        return None
    library = build_spec_module(
        spec,
        {SOURCE_NAME: spec.probe.source},
        SOURCE_NAME,
        spec.template_values(),
        linkages=linkages,
        read_from={SOURCE_NAME: spec.probe.path} if spec.probe.path else None,
    )
    function = getattr(ctypes.CDLL(str(library)), PROBE_FUNCTION)
    function.argtypes = [ctypes.c_char_p]
    function.restype = ctypes.c_int
    return function
